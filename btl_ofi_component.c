/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * The component: registration (the parameters themselves are the table
 * in btl_ofi_params.c), provider discovery and NIC selection, component
 * init (which checks the parameters, opens one module per NIC and
 * publishes their addresses) and the MPI_T counters.
 */

#include "opal_config.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "opal/mca/base/mca_base_pvar.h"
#include "opal/mca/btl/base/base.h"
#include "opal/mca/common/ofi/common_ofi.h"
#include "opal/util/argv.h"
#include "opal/util/printf.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_ofi.h"
#include "btl_ofi_params.h"

static void register_pvars(void);

/* ------------------------------------------------------------------ */
/* Registration                                                        */

/* Ours and the defaults of the BTL framework's come from the table
 * (btl_ofi_params.c); common/ofi and the framework register theirs after. */
static int mca_btl_ofi_component_register(void)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;
    mca_btl_ofi_module_t *module = &mca_btl_ofi_module_template;
    int rc;

    rc = mca_btl_ofi_params_register(&c->super.btl_version);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    rc = opal_common_ofi_mca_register(&c->super.btl_version);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }

    module->super.btl_flags = MCA_BTL_FLAGS_RDMA | MCA_BTL_FLAGS_ATOMIC_OPS
                              | MCA_BTL_FLAGS_ATOMIC_FOPS | MCA_BTL_OFI_FLAGS_REMOTE_COMPLETION
                              | MCA_BTL_FLAGS_SEND | MCA_BTL_FLAGS_SEND_INPLACE;
    rc = mca_btl_base_param_register(&c->super.btl_version, &module->super);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    register_pvars();
    return OPAL_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* open / close                                                        */

/*
 * Built out of tree, our DSO and its help file sit in a directory Open MPI
 * does not search for help texts; without this every message of ours
 * would read "Sorry! You were supposed to get help about ...".  Installed
 * in tree, the file is in Open MPI's data directory and this finds nothing.
 */
static void add_help_dir_of_dso(void)
{
    static bool added = false;
    char file[PATH_MAX], dir[PATH_MAX];
    Dl_info where;

    if (added || 0 == dladdr((void *) &mca_btl_ofi_component, &where) || NULL == where.dli_fname) {
        return;
    }
    (void) snprintf(dir, sizeof(dir), "%s", where.dli_fname);
    (void) snprintf(file, sizeof(file), "%s/help-mpi-btl-ofi.txt", dirname(dir));
    if (0 == access(file, R_OK)) {
        (void) opal_show_help_add_dir(dir);
        added = true;
    }
}

static int mca_btl_ofi_component_open(void)
{
    mca_btl_ofi_compat_keep_loaded((const void *) &mca_btl_ofi_component);
    add_help_dir_of_dso();
    mca_btl_ofi_component.module_count = 0;
    mca_btl_ofi_component.provider_name = NULL;
    return opal_common_ofi_open();
}

static int mca_btl_ofi_component_close(void)
{
    mca_btl_ofi_peer_jobs_unwatch();
    mca_btl_ofi_progress_thread_stop();
    mca_btl_ofi_wake_close();
    free(mca_btl_ofi_component.provider_name);
    mca_btl_ofi_component.provider_name = NULL;
    /* Closing the modules joined every provider thread already: nothing to
     * wait for here. */
    return opal_common_ofi_close();
}

/* ------------------------------------------------------------------ */
/* Provider discovery                                                  */

/** Was a value set by the user rather than left at its default? */
static bool var_set_by_user(const char *framework, const char *component, const char *name)
{
    mca_base_var_source_t source = MCA_BASE_VAR_SOURCE_DEFAULT;
    int index = mca_base_var_find("opal", framework, component, name);

    if (index < 0 || OPAL_SUCCESS != mca_base_var_get_value(index, NULL, &source, NULL)) {
        return false;
    }
    return MCA_BASE_VAR_SOURCE_DEFAULT != source;
}

/* ob1's eager limit follows the provider unless the user set it; its
 * rendezvous eager limit (the first fragment of a rendezvous) stays. */
static void choose_eager_limits(const char *provider)
{
    mca_btl_base_module_t *m = &mca_btl_ofi_module_template.super;
    size_t limit = mca_btl_ofi_default_eager_limit(provider, m->btl_max_send_size);

    if (!var_set_by_user("btl", "ofi", "eager_limit")) {
        m->btl_eager_limit = limit;
    }
    if (m->btl_rndv_eager_limit > m->btl_eager_limit) {
        m->btl_rndv_eager_limit = m->btl_eager_limit;
    }
    MCA_BTL_OFI_VERBOSE(10, "eager limit %zu, rendezvous eager limit %zu", m->btl_eager_limit,
                        m->btl_rndv_eager_limit);
}

/* sockets reads FI_SOCKETS_MAX_BUF_SZ when its fabric opens, after this;
 * mca_btl_ofi_sockets_widen in btl_ofi_context.c says why its sockets
 * need wide receive buffers.  The user's value stands, 0 included. */
static void choose_sockets_buffers(const char *provider)
{
    const char *user = getenv("FI_SOCKETS_MAX_BUF_SZ");
    int size = mca_btl_ofi_sockets_buf_size(provider, user);
    char value[16];

    mca_btl_ofi_component.sockets_buf_sz = size;
    if (NULL != user || size <= 0) {
        return;
    }
    (void) snprintf(value, sizeof(value), "%d", size);
    if (0 != setenv("FI_SOCKETS_MAX_BUF_SZ", value, 0)) {
        MCA_BTL_OFI_VERBOSE(1, "sockets: could not set FI_SOCKETS_MAX_BUF_SZ");
        mca_btl_ofi_component.sockets_buf_sz = 0;
        return;
    }
    MCA_BTL_OFI_VERBOSE(10, "sockets: FI_SOCKETS_MAX_BUF_SZ=%s", value);
}

/** Did the user name this component in --mca btl explicitly? */
static bool btl_ofi_requested(void)
{
    const char **value = NULL;
    int index = mca_base_var_find("opal", "btl", NULL, NULL);

    if (index < 0 || OPAL_SUCCESS != mca_base_var_get_value(index, &value, NULL, NULL)
        || NULL == value || NULL == *value) {
        return false;
    }
    return '^' != (*value)[0] && NULL != strstr(*value, "ofi");
}

/* A spawned job must reach its parents: where they chose a network
 * provider, shm would leave the children, however few nodes they share,
 * unable to reach back (their processes' blobs name the provider). */
static bool parent_uses_network(void)
{
    opal_process_name_t parent;
    const char *theirs;
    void *blob = NULL;
    size_t size = 0;
    bool network;
    int rc;

    if (!mca_btl_ofi_compat_parent(&parent)) {
        return false;
    }
    OPAL_MODEX_RECV(rc, &mca_btl_ofi_component.super.btl_version, &parent, &blob, &size);
    if (OPAL_SUCCESS != rc) {
        return false; /* the parent does not use this component */
    }
    theirs = mca_btl_ofi_modex_provider(blob, size);
    network = NULL != theirs && 0 != strcasecmp(theirs, "shm");
    MCA_BTL_OFI_VERBOSE(10, "spawned by %s, which uses %s", OPAL_NAME_PRINT(parent),
                        NULL != theirs ? theirs : "an unknown provider");
    free(blob);
    return network;
}

/* Asked once: the answer may take a round trip to the parent. */
static bool spawned_by_network_job(void)
{
    static int answer = -1;

    if (answer < 0) {
        answer = parent_uses_network();
    }
    return answer > 0;
}

static bool job_on_one_node(void)
{
    uint32_t job_size = mca_btl_ofi_compat_job_size();

    return job_size > 0 && (uint32_t) opal_process_info.num_local_peers + 1 >= job_size
           && !spawned_by_network_job();
}

/** fi_getinfo with the newest API we were built with, then 1.9. */
static int query_providers(struct fi_info *hints, struct fi_info **list)
{
    int rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, hints, list);
    if (-FI_ENOSYS == rc || -FI_EINVAL == rc) {
        rc = fi_getinfo(FI_VERSION(1, 9), NULL, NULL, 0, hints, list);
    }
    return rc;
}

typedef struct {
    const char *include;
    const char *exclude;
    bool one_node;
} provider_filter_t;

static bool passes_filter(const struct fi_info *info, uint64_t required, const provider_filter_t *f)
{
    char why[256];
    const char *prov = info->fabric_attr->prov_name;

    if (NULL != f->include && !mca_btl_ofi_list_names(f->include, prov)) {
        MCA_BTL_OFI_VERBOSE(20, "%s: not in the include list", prov);
        return false;
    }
    if (NULL != f->exclude && mca_btl_ofi_list_names(f->exclude, prov)) {
        MCA_BTL_OFI_VERBOSE(20, "%s: in the exclude list", prov);
        return false;
    }
    if (!mca_btl_ofi_info_usable(info, required, why, sizeof(why))) {
        MCA_BTL_OFI_VERBOSE(10, "rejected %s (%s): %s", prov, info->domain_attr->name, why);
        return false;
    }
    if (mca_btl_ofi_provider_rank(prov, f->one_node) < 0) {
        MCA_BTL_OFI_VERBOSE(10, "rejected %s: not for a job spanning several nodes", prov);
        return false;
    }
    return true;
}

/** Is a usable provider named by its full name in the include list? */
static bool include_names_one_exactly(struct fi_info *list, uint64_t required,
                                      const provider_filter_t *filter)
{
    for (struct fi_info *info = list; NULL != info; info = info->next) {
        if (mca_btl_ofi_list_names_exactly(filter->include, info->fabric_attr->prov_name)
            && passes_filter(info, required, filter)) {
            return true;
        }
    }
    return false;
}

/** The best-ranked provider name among the usable infos, or NULL.  When
 * the include list names a usable provider exactly, only such are taken. */
static const char *choose_provider(struct fi_info *list, uint64_t required,
                                   const provider_filter_t *filter)
{
    bool exact = NULL != filter->include && include_names_one_exactly(list, required, filter);
    const char *best = NULL;
    int best_rank = -1;

    for (struct fi_info *info = list; NULL != info; info = info->next) {
        int rank;
        if (!passes_filter(info, required, filter)
            || (exact
                && !mca_btl_ofi_list_names_exactly(filter->include,
                                                   info->fabric_attr->prov_name))) {
            continue;
        }
        rank = mca_btl_ofi_provider_rank(info->fabric_attr->prov_name, filter->one_node);
        if (rank > best_rank) {
            best_rank = rank;
            best = info->fabric_attr->prov_name;
        }
    }
    return best;
}

static bool is_loopback_domain(const struct fi_info *info)
{
    const char *name = info->domain_attr->name;
    return NULL != name && (0 == strcmp(name, "lo") || 0 == strncmp(name, "lo:", 3));
}

/**
 * Collect one fi_info per NIC of the chosen provider, nearest first: the
 * NIC that common/ofi's locality-aware selection picks leads, the rest
 * follow in the provider's order.  Loopback interfaces are dropped when a
 * real one exists: a peer on another host would read 127.0.0.1 as itself.
 */
static int collect_nics(struct fi_info *list, const char *prov, uint64_t required,
                        const provider_filter_t *filter, struct fi_info **nics, int max)
{
    int count = 0;
    bool have_real = false;
    struct fi_info *first_of_prov = NULL, *nearest;

    for (struct fi_info *info = list; NULL != info; info = info->next) {
        if (0 == strcmp(info->fabric_attr->prov_name, prov)
            && passes_filter(info, required, filter)) {
            if (NULL == first_of_prov) {
                first_of_prov = info;
            }
            have_real |= !is_loopback_domain(info);
        }
    }
    if (NULL == first_of_prov) {
        return 0;
    }
    nearest = mca_btl_ofi_compat_nearest(first_of_prov);

    for (int pass = 0; pass < 2 && count < max; ++pass) {
        for (struct fi_info *info = (0 == pass) ? nearest : first_of_prov;
             NULL != info && count < max; info = (0 == pass) ? NULL : info->next) {
            bool duplicate = false;
            if (0 != strcmp(info->fabric_attr->prov_name, prov)
                || !passes_filter(info, required, filter)
                || (have_real && is_loopback_domain(info))) {
                continue;
            }
            for (int i = 0; i < count; ++i) {
                duplicate |= (0 == strcmp(nics[i]->domain_attr->name, info->domain_attr->name));
            }
            if (!duplicate) {
                nics[count++] = info;
            }
        }
    }
    return count;
}

/* What discovery asks: the provider's own locks whenever a second thread
 * (the application's or our progress thread) may enter it. */
static enum fi_threading threading_to_ask(const mca_btl_ofi_component_t *c)
{
    if (c->app_threads || MCA_BTL_OFI_PROGRESS_THREAD_OFF != c->progress_thread) {
        return FI_THREAD_SAFE;
    }
    return FI_THREAD_DOMAIN;
}

/* Application threads may enter one endpoint at once.  Our progress thread
 * alone needs only that an endpoint and its CQ are never entered twice at
 * once, which the context lock gives once posts and AV changes take it
 * too: ofi_rxm then leaves out the locks it takes on every post and CQ
 * read.  shm moved no row; net (libfabric 1.17) hung in spawn with it,
 * and 2.1's tcp in rma_sync (2.1 opens that as another kind of domain). */
static enum fi_threading threading_for(const mca_btl_ofi_component_t *c, const char *prov,
                                       enum fi_threading asked)
{
    if (FI_THREAD_SAFE != asked || c->app_threads || !mca_btl_ofi_name_has_layer(prov, "ofi_rxm")) {
        return asked;
    }
    return FI_THREAD_COMPLETION;
}

static struct fi_info *hints_for(struct fi_info *hints, uint64_t caps, enum fi_threading threading)
{
    mca_btl_ofi_fill_hints(hints, caps, FI_PROGRESS_UNSPEC, threading);
    return hints;
}

/** A provider discovery chose and the list and capabilities it came with. */
typedef struct {
    struct fi_info *list; /**< fi_getinfo's answer, owned */
    uint64_t caps;        /**< capabilities it was asked with */
    const char *prov;     /**< the chosen provider's name, inside list */
} choice_t;

/* An include list that names a provider by a layer only ("tcp" for
 * "tcp;ofi_rxm") may still name one exactly in a later round: libfabric
 * 2.x's RDM tcp has no atomics and is listed only once they are given up. */
static bool choice_is_final(const provider_filter_t *filter, const char *prov)
{
    return NULL == filter->include || mca_btl_ofi_list_names_exactly(filter->include, prov);
}

static void keep_choice(choice_t *kept, struct fi_info *list, uint64_t caps, const char *prov)
{
    fi_freeinfo(kept->list);
    *kept = (choice_t){ list, caps, prov };
}

/**
 * Find the provider: ask fi_getinfo for everything we would like and
 * choose among what it lists; when nothing listed qualifies (libfabric
 * 2.1 offers FI_HMEM on shm alone, which the filter or a multi-node job
 * may rule out), give up one wish and ask again.  A provider the include
 * list names only by a layer is kept while later rounds look for one it
 * names exactly.
 */
static int discover(const provider_filter_t *filter, enum fi_threading threading,
                    struct fi_info **list_out, uint64_t *caps_out, const char **prov_out)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;
    mca_btl_ofi_wishes_t w = {
        .rma = MCA_BTL_OFI_MODE_TWO_SIDED != c->mode,
        .msg = MCA_BTL_OFI_MODE_ONE_SIDED != c->mode,
        .msg_optional = !var_set_by_user("btl", "ofi", "mode"),
        .hmem = !c->disable_hmem,
        .atomics = true,
    };
    struct fi_info *hints = fi_allocinfo();
    choice_t kept = { NULL, 0, NULL };

    if (NULL == hints) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    do {
        uint64_t caps = mca_btl_ofi_wished_caps(&w);
        uint64_t required = mca_btl_ofi_primary_caps(caps);
        struct fi_info *list = NULL;
        const char *prov = NULL;

        if (0 == query_providers(hints_for(hints, caps, threading), &list) && NULL != list) {
            prov = choose_provider(list, required, filter);
        }
        if (NULL == prov) {
            MCA_BTL_OFI_VERBOSE(10, "no listed provider qualifies for capabilities 0x%llx",
                                (unsigned long long) required);
            fi_freeinfo(list);
        } else if (choice_is_final(filter, prov)) {
            keep_choice(&kept, list, required, prov);
            break;
        } else if (NULL == kept.list) {
            keep_choice(&kept, list, required, prov);
        } else {
            fi_freeinfo(list);
        }
    } while (mca_btl_ofi_give_up_wish(&w));
    fi_freeinfo(hints);
    if (NULL == kept.list) {
        MCA_BTL_OFI_VERBOSE(1, "fi_getinfo found no usable provider");
        return OPAL_ERR_NOT_FOUND;
    }
    *list_out = kept.list;
    *caps_out = kept.caps;
    *prov_out = kept.prov;
    return OPAL_SUCCESS;
}

/** Ask again for the chosen provider with our preferred progress model
 * and @p threading; NULL when discovery's answer has both already. */
static struct fi_info *requery(const char *prov, uint64_t caps, enum fi_threading threading)
{
    struct fi_info *hints = fi_allocinfo(), *list = NULL;
    int progress = mca_btl_ofi_component.progress_mode;

    if (NULL == hints || (FI_PROGRESS_UNSPEC == progress && FI_THREAD_COMPLETION != threading)) {
        fi_freeinfo(hints);
        return NULL;
    }
    mca_btl_ofi_fill_hints(hints, caps, progress, threading);
    hints->fabric_attr->prov_name = strdup(prov);
    if (0 != query_providers(hints, &list)) {
        list = NULL;
        MCA_BTL_OFI_VERBOSE(
            10, "%s cannot do the requested progress or threading model; using its own", prov);
    }
    fi_freeinfo(hints);
    return list;
}

static void report_no_provider(const provider_filter_t *filter)
{
    if (btl_ofi_requested() || NULL != filter->include) {
        opal_show_help("help-mpi-btl-ofi.txt", "no provider", true, opal_process_info.nodename,
                       filter->include ? filter->include : "(none)",
                       filter->exclude ? filter->exclude : "(none)");
    }
}

static int open_modules(struct fi_info **nics, int count)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;

    for (int i = 0; i < count; ++i) {
        mca_btl_ofi_module_t *module = NULL;
        if (OPAL_SUCCESS == mca_btl_ofi_module_open(&module, nics[i], c->module_count)) {
            c->modules[c->module_count++] = module;
        }
    }
    return c->module_count > 0 ? OPAL_SUCCESS : OPAL_ERR_NOT_AVAILABLE;
}

/* btl_ofi_local_atomics: a one-sided lead on a network provider, with
 * peers on this host; by default only in a job that spans hosts (a
 * one-node job takes shm, or keeps the provider the user named). */
static bool same_host_atomics_wanted(const provider_filter_t *filter)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;
    const char *why = NULL;

    if (0 == c->local_atomics) {
        return false;
    }
    if (0 == strcmp(c->provider_name, "shm")) {
        why = "the provider is shm";
    } else if (NULL != filter->exclude && mca_btl_ofi_list_names(filter->exclude, "shm")) {
        why = "shm is in the exclude list";
    } else if (opal_process_info.num_local_peers < 1) {
        why = "no peer on this host";
    } else if (c->local_atomics < 0 && job_on_one_node()) {
        why = "the job is on one node";
    } else if (c->local_atomics < 0 && spawned_by_network_job()) {
        /* -1 asks whether the job spans hosts, which a spawned one
         * cannot tell of its parents */
        why = "a spawned job";
    } else if (0 == (c->modules[0]->super.btl_flags & MCA_BTL_FLAGS_ATOMIC_FOPS)) {
        why = "no atomics";
    } else if (c->module_count >= MCA_BTL_OFI_MAX_MODULES_LIMIT) {
        why = "no room for another module";
    }
    if (NULL != why) {
        MCA_BTL_OFI_VERBOSE(10, "same-host atomics through %s: %s", c->provider_name, why);
        return false;
    }
    return true;
}

/*
 * A network provider carries a same-host peer's atomics over its loopback:
 * each waits for both processes' progress through the kernel's sockets
 * (a fetch-and-op took 56 us with 4 ranks on 2 cores, 8 us on shm).  So a
 * module of the shm provider, opened after the NICs' (the modex publishes
 * its name last), takes them.  Failing that, they stay where they were.
 */
static void open_same_host_module(const provider_filter_t *filter, enum fi_threading threading)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;
    struct fi_info *hints = NULL, *list = NULL;
    mca_btl_ofi_module_t *module = NULL;
    uint64_t caps = MCA_BTL_OFI_RMA_CAPS;

    if (!same_host_atomics_wanted(filter) || NULL == (hints = fi_allocinfo())) {
        goto out;
    }
    mca_btl_ofi_fill_hints(hints, caps, FI_PROGRESS_MANUAL, threading);
    hints->fabric_attr->prov_name = strdup("shm");
    if (0 != query_providers(hints, &list) || NULL == list) {
        MCA_BTL_OFI_VERBOSE(1, "same-host atomics stay on %s: no shm with RMA and atomics",
                            c->provider_name);
        goto out;
    }
    if (OPAL_SUCCESS != mca_btl_ofi_module_open(&module, list, c->module_count)) {
        goto out;
    }
    if (!mca_btl_ofi_same_host_setup(c->modules[0], module)) {
        mca_btl_ofi_module_finalize(&module->super);
        goto out;
    }
    c->modules[c->module_count++] = module;
out:
    fi_freeinfo(hints);
    fi_freeinfo(list);
}

/* The IPv4 address of our provider's endpoint (network order), 0 when it
 * has none: where peers on other nodes reach our wake-up socket. */
static uint32_t endpoint_ip4(void)
{
    mca_btl_ofi_module_t *lead = mca_btl_ofi_component.modules[0];

    return mca_btl_ofi_wake_ip4(lead->ep_name, lead->ep_name_len, lead->info->addr_format);
}

/* Without the channel, threads keep to their timer. */
static void open_wake_channel(void)
{
    int err = mca_btl_ofi_wake_open(endpoint_ip4());

    if (0 == err) {
        MCA_BTL_OFI_VERBOSE(10, "wake-ups: channel open");
    } else {
        MCA_BTL_OFI_VERBOSE(1, "no wake-ups between progress threads: %s; threads keep their timer",
                            strerror(err));
    }
}

/* Whether every peer can wake our thread: a wake-up port is published
 * and, in a job that spans nodes, one on our provider's address too. */
static bool thread_can_sleep(void)
{
    mca_btl_ofi_wake_addr_t self;

    mca_btl_ofi_wake_self(&self);
    return mca_btl_ofi_component.progress_wake_us > 0 && 0 != self.port
           && (job_on_one_node() || 0 != self.net_port);
}

/* How many of this node's ranks share each of its CPUs, at least 1. */
static long ranks_per_cpu(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long ranks = (long) opal_process_info.num_local_peers + 1;

    return (cpus > 0 && ranks > cpus) ? (ranks + cpus - 1) / cpus : 1;
}

/* The bound the thread serves.  Where this node's ranks outnumber its
 * CPUs, a rank waits its turn for a core anyway, and threads that look
 * every btl_ofi_progress_idle_us take the turns the ranks need: measured
 * (bench/scale.py, every rank putting to every other, tcp;ofi_rxm), 16
 * ranks on 2 CPUs took 0.30-0.35 s with the thread, 0.09-0.10 without it,
 * and 0.08-0.11 with a period of 1 ms.  So the period grows with the
 * ranks each CPU carries. */
static int thread_period_us(void)
{
    return mca_btl_ofi_crowded_us(mca_btl_ofi_component.progress_idle_us, ranks_per_cpu(),
                                  MCA_BTL_OFI_CROWDED_PERIOD_US);
}

/* The same holds for an origin's wake-ups: a target that only waits its
 * turn for a CPU gains nothing from one, and the turn its thread then
 * takes is another rank's.  Measured (rma_dyn_list -b on shm, 4 ranks on
 * 2 CPUs, 10 interleaved rounds): wake-ups after 100 us took 1.06-1.09
 * of thread-off's time, after 200 us 0.97-0.98. */
static void set_wake_after(void)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;
    long per_cpu = ranks_per_cpu();

    c->wake_after_us =
        c->progress_wake_us > 0 ? mca_btl_ofi_crowded_us(c->progress_wake_us, per_cpu, 0) : 0;
    c->wake_floor_us = per_cpu > 1 ? MCA_BTL_OFI_CROWDED_WAKE_US : 0;
}

/* The thread is decided per provider: one that moves data on its own
 * needs none.  Without it, progress stays the application's alone. */
static void start_progress_thread(void)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;
    mca_btl_ofi_progress_setup_t setup = { .look = mca_btl_ofi_contexts_look };
    const char *why = NULL;

    if (!mca_btl_ofi_progress_thread_wanted(
            c->progress_thread, c->modules[0]->info->domain_attr->data_progress, &why)) {
        MCA_BTL_OFI_VERBOSE(1, "no progress thread: %s", why);
        c->sends_need_caller = FI_PROGRESS_AUTO != c->modules[0]->info->domain_attr->data_progress;
        return;
    }
    /* the thread may come at any registration: the locks are real now */
    c->threaded = true;
    mca_btl_ofi_wake_listen(true);
    setup.can_sleep = thread_can_sleep();
    setup.period_us = thread_period_us();
    setup.crowded = ranks_per_cpu() > 1;
    mca_btl_ofi_progress_thread_enable(&setup);
    if (setup.can_sleep) {
        MCA_BTL_OFI_VERBOSE(1,
                            "progress thread on: %s; it starts when memory is first exposed, "
                            "looks every %d us while traffic is aimed at this process and "
                            "every %d us after %d us without, and waiting origins wake it",
                            why, setup.period_us, c->progress_sleep_us, c->progress_linger_us);
    } else {
        MCA_BTL_OFI_VERBOSE(1,
                            "progress thread on: %s; it starts when memory is first exposed "
                            "and looks every %d us while any is (no wake-ups reach it)",
                            why, setup.period_us);
    }
}

static mca_btl_base_module_t **mca_btl_ofi_component_init(int *num_btl_modules,
                                                          bool enable_progress_threads,
                                                          bool enable_mpi_threads)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;
    mca_btl_base_module_t **result = NULL;
    struct fi_info *list = NULL, *progress_list = NULL, *nics[MCA_BTL_OFI_MAX_MODULES_LIMIT];
    provider_filter_t filter = { 0 };
    const char *prov = NULL;
    uint64_t caps = 0;
    int count;
    enum fi_threading threading;

    *num_btl_modules = 0;
    c->output = opal_common_ofi.output;
    c->module_count = 0;

    if (fi_version() < FI_VERSION(1, 9)) {
        MCA_BTL_OFI_VERBOSE(1, "libfabric older than 1.9: disqualified");
        return NULL;
    }
    MCA_BTL_OFI_VERBOSE(1, "libfabric %u.%u loaded; built with %d.%d headers, asking for that API",
                        FI_MAJOR(fi_version()), FI_MINOR(fi_version()), FI_MAJOR_VERSION,
                        FI_MINOR_VERSION);
    if (OPAL_SUCCESS != mca_btl_ofi_params_check()) {
        return NULL;
    }
    c->max_send_size = mca_btl_ofi_module_template.super.btl_max_send_size;
    c->app_threads = enable_mpi_threads || enable_progress_threads || opal_using_threads();
    c->threaded = c->app_threads;
    threading = threading_to_ask(c);

    filter.one_node = job_on_one_node();
    filter.include = (NULL != opal_common_ofi.prov_include) ? *opal_common_ofi.prov_include : NULL;
    if (NULL != filter.include && '\0' == filter.include[0]) {
        filter.include = NULL;
    }
    /* common/ofi's default exclude list is written for the MTL; our own
     * ranking already puts software providers last, so only a list the
     * user gave applies. */
    if (var_set_by_user("opal_common", "ofi", "provider_exclude")) {
        filter.exclude = *opal_common_ofi.prov_exclude;
    }
    if (NULL != filter.include && NULL != filter.exclude && '\0' != filter.exclude[0]) {
        opal_show_help("help-mpi-btl-ofi.txt", "include and exclude", true,
                       opal_process_info.nodename, filter.include, filter.exclude);
        filter.exclude = NULL;
    }

    if (OPAL_SUCCESS != discover(&filter, threading, &list, &caps, &prov)) {
        report_no_provider(&filter);
        goto out;
    }
    c->provider_name = strdup(prov);
    c->two_sided = 0 != (caps & FI_MSG);
    choose_eager_limits(c->provider_name);
    choose_sockets_buffers(c->provider_name);

    progress_list = requery(c->provider_name, caps, threading_for(c, c->provider_name, threading));
    count = 0;
    if (NULL != progress_list) {
        count = collect_nics(progress_list, c->provider_name, caps, &filter, nics, c->max_nics);
    }
    if (0 == count) {
        count = collect_nics(list, c->provider_name, caps, &filter, nics, c->max_nics);
    }
    c->posts_locked = count > 0 && FI_THREAD_COMPLETION == nics[0]->domain_attr->threading;
    MCA_BTL_OFI_VERBOSE(1, "provider %s, %d NIC(s), %s, %s", c->provider_name, count,
                        c->two_sided ? "one- and two-sided" : "one-sided only",
                        count > 0 ? fi_tostr(&nics[0]->domain_attr->threading, FI_TYPE_THREADING)
                                  : "");

    if (0 == count || OPAL_SUCCESS != open_modules(nics, count)) {
        report_no_provider(&filter);
        goto out;
    }
    mca_btl_ofi_rails_setup(c->modules[0]);
    if (MCA_BTL_OFI_MODE_TWO_SIDED != c->mode) {
        open_same_host_module(&filter, threading);
    }
    set_wake_after();
    if (c->progress_wake_us > 0) {
        open_wake_channel();
    }
    /* before the modex: it publishes where the thread takes wake-ups */
    start_progress_thread();
    if (OPAL_SUCCESS != mca_btl_ofi_modex_send()) {
        goto out;
    }

    result = calloc(c->module_count, sizeof(*result));
    if (NULL == result) {
        goto out;
    }
    for (int i = 0; i < c->module_count; ++i) {
        result[i] = &c->modules[i]->super;
    }
    *num_btl_modules = c->module_count;
    mca_btl_ofi_peer_jobs_watch();

out:
    if (NULL == result) {
        while (c->module_count > 0) {
            mca_btl_ofi_module_finalize(&c->modules[0]->super);
        }
        mca_btl_ofi_wake_close();
    }
    if (NULL != progress_list) {
        fi_freeinfo(progress_list);
    }
    if (NULL != list) {
        fi_freeinfo(list);
    }
    return result;
}

/* ------------------------------------------------------------------ */
/* MPI_T performance variables                                         */

static const struct {
    const char *name;
    const char *help;
} pvar_names[MCA_BTL_OFI_CNT_MAX] = {
    [MCA_BTL_OFI_CNT_PUT] = { "put_count", "Puts posted by btl/ofi" },
    [MCA_BTL_OFI_CNT_PUT_BYTES] = { "put_bytes", "Bytes put by btl/ofi" },
    [MCA_BTL_OFI_CNT_GET] = { "get_count", "Gets posted by btl/ofi" },
    [MCA_BTL_OFI_CNT_GET_BYTES] = { "get_bytes", "Bytes read by btl/ofi gets" },
    [MCA_BTL_OFI_CNT_ATOMIC] = { "atomic_count", "Atomic operations posted by btl/ofi" },
    [MCA_BTL_OFI_CNT_SEND] = { "send_count", "Two-sided messages sent by btl/ofi" },
    [MCA_BTL_OFI_CNT_SEND_BYTES] = { "send_bytes", "Two-sided bytes sent by btl/ofi" },
    [MCA_BTL_OFI_CNT_RECV] = { "recv_count", "Two-sided messages received by btl/ofi" },
    [MCA_BTL_OFI_CNT_RECV_BYTES] = { "recv_bytes", "Two-sided bytes received by btl/ofi" },
    [MCA_BTL_OFI_CNT_FLUSH] = { "flush_count", "Flushes served by btl/ofi" },
    [MCA_BTL_OFI_CNT_RETRY] = { "retry_count", "Posts refused with EAGAIN by the provider" },
    [MCA_BTL_OFI_CNT_ERROR] = { "error_count", "Operations completed with an error" },
    [MCA_BTL_OFI_CNT_REPOST] = { "repost_count",
                                 "Operations posted again on another rail after theirs failed or "
                                 "refused them" },
    [MCA_BTL_OFI_CNT_RAIL_DOWN] = { "rail_down_count",
                                    "Rails taken out of service for a peer after an error" },
    [MCA_BTL_OFI_CNT_LOCAL_COPY] = { "local_copy_count",
                                     "Puts and gets to a same-host peer done as one copy into "
                                     "or out of its memory (btl_ofi_local_copy), also counted "
                                     "in put_count and get_count" },
    [MCA_BTL_OFI_CNT_LOCAL_ATOMIC] = { "local_atomic_count",
                                       "Atomics to a same-host peer through the shm provider "
                                       "(btl_ofi_local_atomics), also counted in atomic_count" },
    [MCA_BTL_OFI_CNT_IN_PLACE_ATOMIC] = { "in_place_atomic_count",
                                          "Atomics at an address of this process (its own "
                                          "window, its node's MPI_Win_allocate segment) that "
                                          "osc/rdma sends without a registration, applied in "
                                          "place with the CPU's atomic instructions, also "
                                          "counted in atomic_count" },
    [MCA_BTL_OFI_CNT_MR_REG] = { "mr_count", "Memory regions registered with the provider" },
    [MCA_BTL_OFI_CNT_MR_DEREG] = { "mr_release_count",
                                   "Memory regions released (mr_count minus this: held now)" },
    [MCA_BTL_OFI_CNT_WAKE_SENT] = { "wake_sent_count",
                                    "Wake-ups sent to peers' progress threads by origins whose "
                                    "operations waited (btl_ofi_progress_wake_us)" },
    [MCA_BTL_OFI_CNT_WAKE_RECV] = { "wake_recv_count",
                                    "Wake-ups our progress thread received from waiting origins" },
    [MCA_BTL_OFI_CNT_LOOK] = { "look_count", "Looks of our progress thread at the contexts" },
    [MCA_BTL_OFI_CNT_LOOK_TIMER] = { "look_timer_count",
                                     "Looks of our progress thread that its timer started" },
    [MCA_BTL_OFI_CNT_LOOK_WOKEN] = { "look_woken_count",
                                     "Looks of our progress thread that a waiting origin's "
                                     "wake-up started" },
    [MCA_BTL_OFI_CNT_STEP_IN] = { "step_in_count",
                                  "Contexts our progress thread progressed because the "
                                  "application had not since its last look" },
    [MCA_BTL_OFI_CNT_EXPOSE] = { "expose_count",
                                 "Times memory became remotely accessible after none was (the "
                                 "first starts the progress thread)" },
    [MCA_BTL_OFI_CNT_LOOK_LATE] = { "look_late_count",
                                    "Looks of our progress thread that began more than "
                                    "btl_ofi_progress_nudge_us after its timer fired: the "
                                    "scheduler passed the woken thread over" },
    [MCA_BTL_OFI_CNT_NUDGE] = { "nudge_count",
                                "Second timers (nudges) that found our progress thread woken "
                                "and not yet run, each making the scheduler choose again on its "
                                "CPU" },
    [MCA_BTL_OFI_CNT_AV_INSERT] = { "av_insert_count",
                                    "Peers entered in the provider's address vector, one per "
                                    "process met and module" },
    [MCA_BTL_OFI_CNT_AV_REMOVE] = { "av_remove_count",
                                    "Peers removed from the provider's address vector: those of "
                                    "another job that said they leave (their MPI_Finalize) or "
                                    "whose job ended cleanly (Open MPI 5); the others stay until "
                                    "the module closes" },
    [MCA_BTL_OFI_CNT_PEER_LEFT] = { "peer_left_count",
                                    "Processes of another job (spawned, connected) that said they "
                                    "leave, from their MPI_Finalize" },
    [MCA_BTL_OFI_CNT_EMPTY_PAUSE] = { "empty_pause_count",
                                      "Progress passes of application threads that found "
                                      "nothing while operations of ours were awaited or memory "
                                      "exposed, each followed by a pause of about 100 ns (shm "
                                      "only)" },
};

static int read_counter(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    int which = (int) (intptr_t) pvar->ctx;
    unsigned long total = 0;

    (void) obj;
    for (int m = 0; m < mca_btl_ofi_component.module_count; ++m) {
        total += (unsigned long) mca_btl_ofi_component.modules[m]->counters[which];
    }
    *(unsigned long *) value = total;
    return OPAL_SUCCESS;
}

/* the nic_* variants hold one value per module, so striping across NICs
 * can be seen */
static int read_counter_per_nic(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    int which = (int) (intptr_t) pvar->ctx;
    unsigned long *out = value;

    (void) obj;
    out[0] = 0;
    for (int m = 0; m < mca_btl_ofi_component.module_count; ++m) {
        out[m] = (unsigned long) mca_btl_ofi_component.modules[m]->counters[which];
    }
    return OPAL_SUCCESS;
}

static int count_nics(struct mca_base_pvar_t *pvar, mca_base_pvar_event_t event, void *obj,
                      int *count)
{
    (void) pvar;
    (void) obj;
    if (MCA_BASE_PVAR_HANDLE_BIND == event) {
        *count = mca_btl_ofi_component.module_count > 0 ? mca_btl_ofi_component.module_count : 1;
    }
    return OPAL_SUCCESS;
}

static void register_pvars(void)
{
    const mca_base_pvar_flag_t flags = MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS;

    for (int i = 0; i < MCA_BTL_OFI_CNT_MAX; ++i) {
        char *name = NULL, *help = NULL;

        (void) mca_base_component_pvar_register(
            &mca_btl_ofi_component.super.btl_version, pvar_names[i].name, pvar_names[i].help,
            OPAL_INFO_LVL_4, MCA_BASE_PVAR_CLASS_COUNTER, MCA_BASE_VAR_TYPE_UNSIGNED_LONG, NULL,
            MCA_BASE_VAR_BIND_NO_OBJECT, flags, read_counter, NULL, NULL, (void *) (intptr_t) i);
        if (0 > opal_asprintf(&name, "nic_%s", pvar_names[i].name)
            || 0 > opal_asprintf(&help, "%s, one value per NIC (module)", pvar_names[i].help)) {
            free(name);
            continue;
        }
        (void) mca_base_component_pvar_register(
            &mca_btl_ofi_component.super.btl_version, name, help, OPAL_INFO_LVL_4,
            MCA_BASE_PVAR_CLASS_COUNTER, MCA_BASE_VAR_TYPE_UNSIGNED_LONG, NULL,
            MCA_BASE_VAR_BIND_NO_OBJECT, flags, read_counter_per_nic, NULL, count_nics,
            (void *) (intptr_t) i);
        free(name);
        free(help);
    }
}

/* ------------------------------------------------------------------ */

mca_btl_ofi_component_t mca_btl_ofi_component = {
    .super = {
        .btl_version = {
            /* our own release number, not Open MPI's */
            MCA_BTL_OFI_BTL_VERSION,
            .mca_component_name = "ofi",
            MCA_BASE_MAKE_VERSION(component, BTL_OFI_VERSION_MAJOR, BTL_OFI_VERSION_MINOR,
                                  BTL_OFI_VERSION_RELEASE),
            .mca_open_component = mca_btl_ofi_component_open,
            .mca_close_component = mca_btl_ofi_component_close,
            .mca_register_component_params = mca_btl_ofi_component_register,
        },
        .btl_data = {
            .param_field = MCA_BASE_METADATA_PARAM_NONE,
        },
        .btl_init = mca_btl_ofi_component_init,
        .btl_progress = mca_btl_ofi_progress,
    },
};
