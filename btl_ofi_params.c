/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * The parameters: one table row per MCA parameter (name, type, default,
 * range, ompi_info level, help), the registration and the range checks
 * that walk it.  contrib/params reads this file to write
 * docs/parameters.md and README's list: keep one ".field = value," per
 * line, numbers as expressions of literals and the component's #defines
 * and enums, and a "== Group ==" comment before each group of rows.
 * Levels follow Open MPI: what a user sets 1-4, tuning 5-6, internals 9.
 */

#include "opal_config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "opal/util/printf.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_ofi.h"
#include "btl_ofi_params.h"

static char *progress_mode_param;   /* owned by the MCA variable system */
static char *progress_thread_param; /* owned by the MCA variable system */

static int check_mode(const mca_btl_ofi_param_t *row);
static int check_progress_thread(const mca_btl_ofi_param_t *row);
static int check_progress_mode(const mca_btl_ofi_param_t *row);
static int check_eager_limit(const mca_btl_ofi_param_t *row);
static int check_rndv_eager_limit(const mca_btl_ofi_param_t *row);

#define COMPONENT (&mca_btl_ofi_component)
#define TEMPLATE  (&mca_btl_ofi_module_template.super)

static const mca_btl_ofi_param_t params[] = {
    /* == Selection == */
    {
        .name = "mode",
        .type = MCA_BASE_VAR_TYPE_INT,
        .level = OPAL_INFO_LVL_4,
        .storage = &COMPONENT->mode,
        .def = MCA_BTL_OFI_MODE_FULL_SUPPORT,
        .min = MCA_BTL_OFI_MODE_ONE_SIDED,
        .max = MCA_BTL_OFI_MODE_FULL_SUPPORT,
        .check = check_mode,
        .help = "What the component carries: 0 one-sided only, 1 two-sided only, 2 both "
                "(one-sided only where the provider has no FI_MSG); another value disqualifies it",
    },
    {
        .name = "provider_include",
        .registrar = MCA_BTL_OFI_PARAM_COMMON_OFI,
        .type = MCA_BASE_VAR_TYPE_STRING,
        .level = OPAL_INFO_LVL_1,
        .def_str = "",
        .help = "Providers to choose from, comma-separated, by full name (tcp;ofi_rxm) or "
                "layer (ofi_rxm); empty: every provider, best first",
    },
    {
        .name = "provider_exclude",
        .registrar = MCA_BTL_OFI_PARAM_COMMON_OFI,
        .type = MCA_BASE_VAR_TYPE_STRING,
        .level = OPAL_INFO_LVL_1,
        .def_str = "shm,sockets,tcp,udp,rstream,usnic,net",
        .help = "Providers never to choose; only a list the user sets applies (the default "
                "is written for the MTL), and not together with btl_ofi_provider_include",
    },
    {
        .name = "max_nics",
        .type = MCA_BASE_VAR_TYPE_INT,
        .level = OPAL_INFO_LVL_4,
        .storage = &COMPONENT->max_nics,
        .def = 4,
        .min = 1,
        .max = MCA_BTL_OFI_MAX_MODULES_LIMIT,
        .help = "Largest number of NICs (modules) to use",
    },
    {
        .name = "num_contexts_per_module",
        .type = MCA_BASE_VAR_TYPE_INT,
        .level = OPAL_INFO_LVL_5,
        .storage = &COMPONENT->num_contexts_per_module,
        .def = 1,
        .min = 1,
        .max = MCA_BTL_OFI_MAX_CONTEXTS_LIMIT,
        .help = "Communication contexts (TX/RX pairs) per module for threads; above 1 needs a "
                "scalable endpoint and is clamped to what the domain offers",
    },
    {
        .name = "disable_sep",
        .type = MCA_BASE_VAR_TYPE_BOOL,
        .level = OPAL_INFO_LVL_6,
        .storage = &COMPONENT->disable_sep,
        .def = false,
        .help = "Never use a scalable endpoint",
    },
    {
        .name = "disable_hmem",
        .type = MCA_BASE_VAR_TYPE_BOOL,
        .level = OPAL_INFO_LVL_6,
        .storage = &COMPONENT->disable_hmem,
        .def = false,
        .help = "Do not ask providers for device (HMEM) memory support",
    },
    {
        .name = "verbose",
        .registrar = MCA_BTL_OFI_PARAM_COMMON_OFI,
        .type = MCA_BASE_VAR_TYPE_INT,
        .level = OPAL_INFO_LVL_3,
        .def = 0,
        .help = "Diagnostics: 1 the provider and modules chosen, 10 every provider rejected "
                "and why",
    },
    /* == One-sided == */
    {
        .name = "rails",
        .type = MCA_BASE_VAR_TYPE_INT,
        .level = OPAL_INFO_LVL_5,
        .storage = &COMPONENT->rails,
        .def = 0,
        .min = 0,
        .max = MCA_BTL_OFI_MAX_RAILS,
        .help = "NICs the first module, which carries osc/rdma's windows, moves one-sided "
                "bytes on: 0 every module opened, 1 its own NIC only",
    },
    {
        .name = "stripe_min",
        .type = MCA_BASE_VAR_TYPE_INT,
        .level = OPAL_INFO_LVL_5,
        .storage = &COMPONENT->stripe_min,
        .def = 65536,
        .min = 0,
        .max = 1 << 30,
        .help = "Smallest put or get, in bytes, split into one chunk per rail; smaller ones "
                "go whole, each on the next rail; 0: never split",
    },
    {
        .name = "put_limit",
        .registrar = MCA_BTL_OFI_PARAM_BTL_BASE,
        .type = MCA_BASE_VAR_TYPE_SIZE_T,
        .level = OPAL_INFO_LVL_6,
        .storage = &TEMPLATE->btl_put_limit,
        .def = 1 << 30,
        .min = 1,
        .max = LONG_MAX,
        .on_bad = MCA_BTL_OFI_PARAM_RESET,
        .help = "Largest single put, in bytes",
    },
    {
        .name = "get_limit",
        .registrar = MCA_BTL_OFI_PARAM_BTL_BASE,
        .type = MCA_BASE_VAR_TYPE_SIZE_T,
        .level = OPAL_INFO_LVL_6,
        .storage = &TEMPLATE->btl_get_limit,
        .def = 1 << 30,
        .min = 1,
        .max = LONG_MAX,
        .on_bad = MCA_BTL_OFI_PARAM_RESET,
        .help = "Largest single get, in bytes",
    },
    {
        .name = "mr_cache_max",
        .type = MCA_BASE_VAR_TYPE_INT,
        .level = OPAL_INFO_LVL_6,
        .storage = &COMPONENT->mr_cache_max,
        .def = 4096,
        .min = 0,
        .max = 1000000,
        .help = "Memory registrations a module keeps with the provider, released ones kept "
                "for reuse included; past it the least recently used are released",
    },
    {
        .name = "emulate_atomics",
        .type = MCA_BASE_VAR_TYPE_BOOL,
        .level = OPAL_INFO_LVL_6,
        .storage = &COMPONENT->emulate_atomics,
        .def = false,
        .help = "Apply atomics at the target through our own messages even where the "
                "provider offers them (always where it does not)",
    },
    {
        .name = "num_cq_read",
        .type = MCA_BASE_VAR_TYPE_INT,
        .level = OPAL_INFO_LVL_6,
        .storage = &COMPONENT->num_cq_read,
        .def = 64,
        .min = 1,
        .max = MCA_BTL_OFI_CQ_BATCH_LIMIT,
        .help = "Completion entries read by one fi_cq_read",
    },
    {
        .name = "disable_inject",
        .type = MCA_BASE_VAR_TYPE_BOOL,
        .level = OPAL_INFO_LVL_9,
        .storage = &COMPONENT->disable_inject,
        .def = false,
        .help = "Never use fi_inject_write or fi_inject for small transfers",
    },
    /* == Same host == */
    {
        .name = "local_copy",
        .type = MCA_BASE_VAR_TYPE_INT,
        .level = OPAL_INFO_LVL_5,
        .storage = &COMPONENT->local_copy,
        .def = -1,
        .min = -1,
        .max = 1,
        .help = "Puts and gets to a same-host peer as one cross-memory-attach copy instead of "
                "the provider's loopback: -1 when the job spans hosts, 1 always, 0 never; "
                "never on shm",
    },
    {
        .name = "local_atomics",
        .type = MCA_BASE_VAR_TYPE_INT,
        .level = OPAL_INFO_LVL_5,
        .storage = &COMPONENT->local_atomics,
        .def = -1,
        .min = -1,
        .max = 1,
        .help = "Atomics to a same-host peer through libfabric's shm provider instead of the "
                "provider's loopback: -1 when the job spans hosts, 1 always, 0 never",
    },
    {
        .name = "origin_rma",
        .type = MCA_BASE_VAR_TYPE_BOOL,
        .level = OPAL_INFO_LVL_6,
        .storage = &COMPONENT->origin_rma,
        .def = true,
        .help = "Writes and reads that complete at the origin where the provider can (shm "
                "of libfabric 1.x with cross-memory attach): no progress needed at the "
                "target, a system call each",
    },
    /* == Progress == */
    {
        .name = "progress_thread",
        .type = MCA_BASE_VAR_TYPE_STRING,
        .level = OPAL_INFO_LVL_4,
        .storage = &progress_thread_param,
        .def_str = "auto",
        .values = "auto, on, off",
        .check = check_progress_thread,
        .help = "A thread that drives the provider while no application thread calls into "
                "MPI, so that one-sided operations complete while their target computes; "
                "auto: unless the provider moves data on its own",
    },
    {
        .name = "progress_idle_us",
        .type = MCA_BASE_VAR_TYPE_INT,
        .level = OPAL_INFO_LVL_5,
        .storage = &COMPONENT->progress_idle_us,
        .def = 100,
        .min = 10,
        .max = 1000000,
        .help = "How often the progress thread looks, so how long a context goes without the "
                "application's progress before the thread drives it, in microseconds; where "
                "ranks outnumber this node's CPUs, times the ranks each CPU carries and at "
                "least 4 ms",
    },
    {
        .name = "progress_mode",
        .type = MCA_BASE_VAR_TYPE_STRING,
        .level = OPAL_INFO_LVL_5,
        .storage = &progress_mode_param,
        .def_str = "manual",
        .values = "manual, auto, unspec",
        .check = check_progress_mode,
        .help = "Progress model asked of the provider; manual: we drive progress, on the "
                "target too (the provider's own where it cannot do manual)",
    },
    {
        .name = "progress_threshold",
        .type = MCA_BASE_VAR_TYPE_INT,
        .level = OPAL_INFO_LVL_9,
        .storage = &COMPONENT->progress_threshold,
        .def = 64,
        .min = 1,
        .max = 1000000,
        .help = "Outstanding operations per context from which posting an operation first "
                "drives progress",
    },
    {
        .name = "progress_wake_us",
        .type = MCA_BASE_VAR_TYPE_INT,
        .level = OPAL_INFO_LVL_9,
        .storage = &COMPONENT->progress_wake_us,
        .def = 100,
        .min = 0,
        .max = 1000000,
        .help = "How long an origin's one-sided operations go without a completion before it "
                "wakes their targets' progress threads, in microseconds, times the ranks each "
                "CPU carries where they outnumber this node's CPUs (there 2 ms at least in "
                "all), plus 1 us for every 1000 bytes they move; 0: never",
    },
    {
        .name = "progress_gap_us",
        .type = MCA_BASE_VAR_TYPE_INT,
        .level = OPAL_INFO_LVL_9,
        .storage = &COMPONENT->progress_gap_us,
        .def = 250,
        .min = 0,
        .max = 1000000,
        .help = "Least time between two looks of the progress thread, however often peers "
                "wake it, in microseconds",
    },
    {
        .name = "progress_slice_us",
        .type = MCA_BASE_VAR_TYPE_INT,
        .level = OPAL_INFO_LVL_9,
        .storage = &COMPONENT->progress_slice_us,
        .def = 100,
        .min = 0,
        .max = 100000,
        .help = "Time slice the progress thread asks of the scheduler (Linux 6.12 and later), "
                "in microseconds; 0: the kernel's default",
    },
    {
        .name = "progress_nudge_us",
        .type = MCA_BASE_VAR_TYPE_INT,
        .level = OPAL_INFO_LVL_9,
        .storage = &COMPONENT->progress_nudge_us,
        .def = 200,
        .min = 0,
        .max = 1000000,
        .help = "How long after its timer the progress thread may wait to run before a second "
                "timer on its CPU makes the scheduler choose again, in microseconds; 0: none",
    },
    {
        .name = "progress_rt_priority",
        .type = MCA_BASE_VAR_TYPE_INT,
        .level = OPAL_INFO_LVL_9,
        .storage = &COMPONENT->progress_rt_priority,
        .def = 0,
        .min = 0,
        .max = 99,
        .help = "Real-time priority (SCHED_RR) the progress thread asks for where the process "
                "may have one; 0: the normal scheduler",
    },
    {
        .name = "progress_sleep_us",
        .type = MCA_BASE_VAR_TYPE_INT,
        .level = OPAL_INFO_LVL_9,
        .storage = &COMPONENT->progress_sleep_us,
        .def = 50000,
        .min = 10,
        .max = 10000000,
        .help = "The progress thread's period, where every peer can wake it, once nothing "
                "has been aimed at this process for btl_ofi_progress_linger_us, in "
                "microseconds (after a look that found the application in MPI with no "
                "send of its own outstanding, on a core that no other work contends: 1 s, or "
                "this when longer)",
    },
    {
        .name = "progress_linger_us",
        .type = MCA_BASE_VAR_TYPE_INT,
        .level = OPAL_INFO_LVL_9,
        .storage = &COMPONENT->progress_linger_us,
        .def = 10000,
        .min = 0,
        .max = 10000000,
        .help = "How long the progress thread keeps to btl_ofi_progress_idle_us after the "
                "last traffic aimed at this process, in microseconds",
    },
    /* == Two-sided == */
    {
        .name = "rd_num",
        .type = MCA_BASE_VAR_TYPE_INT,
        .level = OPAL_INFO_LVL_6,
        .storage = &COMPONENT->rd_num,
        .def = 64,
        .min = 1,
        .max = 8192,
        .help = "Receive buffers posted per context for two-sided traffic",
    },
    {
        .name = "max_send_size",
        .registrar = MCA_BTL_OFI_PARAM_BTL_BASE,
        .type = MCA_BASE_VAR_TYPE_SIZE_T,
        .level = OPAL_INFO_LVL_6,
        .storage = &TEMPLATE->btl_max_send_size,
        .def = 64 * 1024,
        .min = 1024,
        .max = 1024 * 1024,
        .help = "Largest two-sided fragment, in bytes: the size of a receive buffer",
    },
    {
        .name = "eager_limit",
        .registrar = MCA_BTL_OFI_PARAM_BTL_BASE,
        .type = MCA_BASE_VAR_TYPE_SIZE_T,
        .level = OPAL_INFO_LVL_5,
        .storage = &TEMPLATE->btl_eager_limit,
        .def = 16 * 1024,
        .values = "1 .. btl_ofi_max_send_size",
        .check = check_eager_limit,
        .help = "Largest message ob1 sends at once, in bytes; unless set, "
                "btl_ofi_max_send_size on sockets and 16 KiB elsewhere",
    },
    {
        .name = "rndv_eager_limit",
        .registrar = MCA_BTL_OFI_PARAM_BTL_BASE,
        .type = MCA_BASE_VAR_TYPE_SIZE_T,
        .level = OPAL_INFO_LVL_6,
        .storage = &TEMPLATE->btl_rndv_eager_limit,
        .def = 16 * 1024,
        .values = "1 .. btl_ofi_eager_limit",
        .check = check_rndv_eager_limit,
        .help = "First fragment of a larger message, in bytes; out of range it becomes "
                "btl_ofi_eager_limit, quietly",
    },
    /* == Open MPI's BTL parameters == */
    {
        .name = "rdma_pipeline_send_length",
        .registrar = MCA_BTL_OFI_PARAM_BTL_BASE,
        .type = MCA_BASE_VAR_TYPE_SIZE_T,
        .level = OPAL_INFO_LVL_9,
        .storage = &TEMPLATE->btl_rdma_pipeline_send_length,
        .def = 256 * 1024,
        .help = "ob1's pipeline: bytes of a large message sent as fragments before RDMA",
    },
    {
        .name = "rdma_pipeline_frag_size",
        .registrar = MCA_BTL_OFI_PARAM_BTL_BASE,
        .type = MCA_BASE_VAR_TYPE_SIZE_T,
        .level = OPAL_INFO_LVL_9,
        .storage = &TEMPLATE->btl_rdma_pipeline_frag_size,
        .def = 4 * 1024 * 1024,
        .help = "ob1's pipeline: largest RDMA fragment, in bytes",
    },
    {
        .name = "min_rdma_pipeline_size",
        .registrar = MCA_BTL_OFI_PARAM_BTL_BASE,
        .type = MCA_BASE_VAR_TYPE_SIZE_T,
        .level = OPAL_INFO_LVL_9,
        .storage = &TEMPLATE->btl_min_rdma_pipeline_size,
        .def = (16 + 256) * 1024,
        .help = "ob1's pipeline: smallest message that takes it, in bytes; at least "
                "btl_ofi_eager_limit + btl_ofi_rdma_pipeline_send_length",
    },
    {
        .name = "accelerator_max_send_size",
        .registrar = MCA_BTL_OFI_PARAM_BTL_BASE,
        .type = MCA_BASE_VAR_TYPE_SIZE_T,
        .level = OPAL_INFO_LVL_9,
        .storage = MCA_BTL_OFI_ACCELERATOR_MAX_SEND_SIZE(TEMPLATE),
        .def = 0,
        .help = "Open MPI's GPU fragment size (smcuda only); unused here",
    },
    {
        .name = "latency",
        .registrar = MCA_BTL_OFI_PARAM_BTL_BASE,
        .type = MCA_BASE_VAR_TYPE_UNSIGNED_INT,
        .level = OPAL_INFO_LVL_6,
        .storage = &TEMPLATE->btl_latency,
        .def = 1,
        .help = "Latency, in microseconds, by which ob1 ranks BTLs",
    },
    {
        .name = "bandwidth",
        .registrar = MCA_BTL_OFI_PARAM_BTL_BASE,
        .type = MCA_BASE_VAR_TYPE_UNSIGNED_INT,
        .level = OPAL_INFO_LVL_6,
        .storage = &TEMPLATE->btl_bandwidth,
        .def = 10000,
        .help = "Bandwidth, in Mbit/s, by which ob1 shares a large message among BTLs",
    },
    {
        .name = "atomic_flags",
        .registrar = MCA_BTL_OFI_PARAM_BTL_BASE,
        .type = MCA_BASE_VAR_TYPE_UNSIGNED_INT,
        .level = OPAL_INFO_LVL_5,
        .help = "The atomic operations offered (read-only)",
    },
    {
        .name = "put_alignment",
        .registrar = MCA_BTL_OFI_PARAM_BTL_BASE,
        .type = MCA_BASE_VAR_TYPE_SIZE_T,
        .level = OPAL_INFO_LVL_6,
        .def = 0,
        .help = "Alignment a put needs; 0: none",
    },
    {
        .name = "get_alignment",
        .registrar = MCA_BTL_OFI_PARAM_BTL_BASE,
        .type = MCA_BASE_VAR_TYPE_SIZE_T,
        .level = OPAL_INFO_LVL_6,
        .def = 0,
        .help = "Alignment a get needs; 0: none",
    },
    {
        .name = "exclusivity",
        .registrar = MCA_BTL_OFI_PARAM_BTL_BASE,
        .type = MCA_BASE_VAR_TYPE_UNSIGNED_INT,
        .level = OPAL_INFO_LVL_7,
        .storage = &TEMPLATE->btl_exclusivity,
        .def = MCA_BTL_EXCLUSIVITY_HIGH - 50,
        .help = "Preference among BTLs that reach the same peer: above the MTL's, so that "
                "osc/rdma takes this BTL when it is selected",
    },
};

#define NUM_PARAMS (sizeof(params) / sizeof(params[0]))

/* ------------------------------------------------------------------ */
/* Values of a row, whatever its C type                                */

static long long row_value(const mca_btl_ofi_param_t *row)
{
    size_t size;

    switch (row->type) {
    case MCA_BASE_VAR_TYPE_INT:
        return *(int *) row->storage;
    case MCA_BASE_VAR_TYPE_UNSIGNED_INT:
        return *(unsigned int *) row->storage;
    case MCA_BASE_VAR_TYPE_SIZE_T:
        size = *(size_t *) row->storage;
        return size > (size_t) LLONG_MAX ? LLONG_MAX : (long long) size;
    case MCA_BASE_VAR_TYPE_BOOL:
        return *(bool *) row->storage;
    default:
        return 0;
    }
}

static void row_set(const mca_btl_ofi_param_t *row, long long value)
{
    switch (row->type) {
    case MCA_BASE_VAR_TYPE_INT:
        *(int *) row->storage = (int) value;
        break;
    case MCA_BASE_VAR_TYPE_UNSIGNED_INT:
        *(unsigned int *) row->storage = (unsigned int) value;
        break;
    case MCA_BASE_VAR_TYPE_SIZE_T:
        *(size_t *) row->storage = (size_t) value;
        break;
    case MCA_BASE_VAR_TYPE_BOOL:
        *(bool *) row->storage = 0 != value;
        break;
    default:
        break;
    }
}

static void row_set_default(const mca_btl_ofi_param_t *row)
{
    if (MCA_BASE_VAR_TYPE_STRING == row->type) {
        /* the variable system replaces it with a copy it owns */
        *(char **) row->storage = (char *) row->def_str;
    } else {
        row_set(row, row->def);
    }
}

/* ------------------------------------------------------------------ */
/* Registration                                                        */

/** The help ompi_info shows: the row's, and its range. */
static char *describe(const mca_btl_ofi_param_t *row)
{
    char *text = NULL;
    int rc;

    if (row->min < row->max) {
        rc = opal_asprintf(&text, "%s (%lld..%lld)", row->help, row->min, row->max);
    } else if (NULL != row->values) {
        rc = opal_asprintf(&text, "%s (%s)", row->help, row->values);
    } else {
        rc = opal_asprintf(&text, "%s", row->help);
    }
    return rc < 0 ? NULL : text;
}

static int register_row(const mca_base_component_t *version, const mca_btl_ofi_param_t *row)
{
    char *help = describe(row);
    int rc;

    if (NULL == help) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    row_set_default(row);
    /* the variable system keeps a copy of the help */
    rc = mca_base_component_var_register(version, row->name, help, row->type, NULL, 0, 0,
                                         row->level, MCA_BASE_VAR_SCOPE_READONLY, row->storage);
    free(help);
    return rc < 0 ? rc : OPAL_SUCCESS;
}

int mca_btl_ofi_params_register(const mca_base_component_t *version)
{
    int rc;

    for (size_t i = 0; i < NUM_PARAMS; ++i) {
        const mca_btl_ofi_param_t *row = &params[i];

        if (NULL == row->storage) {
            continue;
        }
        /* a framework parameter is registered again by the framework after
         * us, bound to the same storage: the variable system keeps the
         * level and help it was first registered with, ours */
        rc = register_row(version, row);
        if (OPAL_SUCCESS != rc) {
            MCA_BTL_OFI_VERBOSE(1, "could not register btl_ofi_%s: %d", row->name, rc);
            return rc;
        }
    }
    return OPAL_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Checks                                                              */

static void show_bad_param(const mca_btl_ofi_param_t *row, long long value, long long min,
                           long long max, long long used)
{
    char name[128]; /* btl_ofi_ and a name of the table */

    (void) snprintf(name, sizeof(name), "btl_ofi_%s", row->name);
    opal_show_help("help-mpi-btl-ofi.txt", "bad parameter", true, opal_process_info.nodename, name,
                   (long) value, (long) min, (long) max, (long) used);
}

/** The generic check: a number outside [min, max] is clamped or reset. */
static void check_range(const mca_btl_ofi_param_t *row)
{
    long long value = row_value(row), used;

    if (row->min >= row->max || (value >= row->min && value <= row->max)) {
        return;
    }
    if (MCA_BTL_OFI_PARAM_RESET == row->on_bad) {
        used = row->def;
    } else {
        used = value < row->min ? row->min : row->max;
    }
    show_bad_param(row, value, row->min, row->max, used);
    row_set(row, used);
}

/* A mode we cannot interpret disqualifies the component: other BTLs
 * carry the traffic rather than ours carrying the wrong kind. */
static int check_mode(const mca_btl_ofi_param_t *row)
{
    long long value = row_value(row);

    if (value < row->min || value > row->max) {
        opal_show_help("help-mpi-btl-ofi.txt", "bad mode", true, opal_process_info.nodename,
                       (int) value);
        return OPAL_ERR_BAD_PARAM;
    }
    return OPAL_SUCCESS;
}

static int check_progress_thread(const mca_btl_ofi_param_t *row)
{
    const char *value = *(char **) row->storage;
    int choice = mca_btl_ofi_parse_progress_thread(value);

    if (choice < 0) {
        opal_show_help("help-mpi-btl-ofi.txt", "bad progress thread", true,
                       opal_process_info.nodename, value);
        choice = mca_btl_ofi_parse_progress_thread(row->def_str);
    }
    mca_btl_ofi_component.progress_thread = choice;
    return OPAL_SUCCESS;
}

static int check_progress_mode(const mca_btl_ofi_param_t *row)
{
    const char *value = *(char **) row->storage;
    int mode = mca_btl_ofi_parse_progress_mode(value);

    if (mode < 0) {
        opal_show_help("help-mpi-btl-ofi.txt", "bad progress mode", true,
                       opal_process_info.nodename, value);
        mode = mca_btl_ofi_parse_progress_mode(row->def_str);
    }
    mca_btl_ofi_component.progress_mode = mode;
    return OPAL_SUCCESS;
}

/* Bounded by btl_ofi_max_send_size, checked in an earlier row. */
static int check_eager_limit(const mca_btl_ofi_param_t *row)
{
    long long value = row_value(row);
    long long max = (long long) mca_btl_ofi_module_template.super.btl_max_send_size;

    if (0 == value || value > max) {
        show_bad_param(row, value, 1, max, max);
        row_set(row, max);
    }
    return OPAL_SUCCESS;
}

/* Bounded by btl_ofi_eager_limit, checked in an earlier row; quietly, as
 * ob1 would. */
static int check_rndv_eager_limit(const mca_btl_ofi_param_t *row)
{
    long long value = row_value(row);
    long long max = (long long) mca_btl_ofi_module_template.super.btl_eager_limit;

    if (0 == value || value > max) {
        row_set(row, max);
    }
    return OPAL_SUCCESS;
}

int mca_btl_ofi_params_check(void)
{
    for (size_t i = 0; i < NUM_PARAMS; ++i) {
        const mca_btl_ofi_param_t *row = &params[i];

        if (NULL == row->storage) {
            continue;
        }
        if (NULL == row->check) {
            check_range(row);
        } else if (OPAL_SUCCESS != row->check(row)) {
            return OPAL_ERR_BAD_PARAM;
        }
    }
    return OPAL_SUCCESS;
}
