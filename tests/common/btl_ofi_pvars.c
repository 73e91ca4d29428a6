/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/* btl/ofi's MPI_T counters for the test and benchmark programs; see
 * btl_ofi_pvars.h. */

#include "btl_ofi_pvars.h"

#include <mpi.h>
#include <string.h>

const char *const btl_ofi_pvars_standard[BTL_OFI_PVARS_NUM_STANDARD] = {
    "put_count",   "put_bytes",   "get_count",        "get_bytes",          "atomic_count",
    "send_count",  "send_bytes",  "recv_count",       "recv_bytes",         "flush_count",
    "retry_count", "error_count", "local_copy_count", "local_atomic_count", "in_place_atomic_count",
};

/* The counters btl_ofi_component.c registers (each also as nic_<name>). */
static const char *const pvar_base_names[] = {
    "put_count",          "put_bytes",         "get_count",
    "get_bytes",          "atomic_count",      "send_count",
    "send_bytes",         "recv_count",        "recv_bytes",
    "flush_count",        "retry_count",       "error_count",
    "mr_count",           "mr_release_count",  "wake_sent_count",
    "wake_recv_count",    "look_count",        "look_timer_count",
    "look_woken_count",   "step_in_count",     "expose_count",
    "repost_count",       "rail_down_count",   "local_copy_count",
    "local_atomic_count", "look_late_count",   "nudge_count",
    "av_insert_count",    "av_remove_count",   "in_place_atomic_count",
    "peer_left_count",    "empty_pause_count",
};
#define NUM_BASE  ((int) (sizeof(pvar_base_names) / sizeof(pvar_base_names[0])))
#define NUM_PVARS (2 * NUM_BASE) /* the global ones, then the nic_ ones */

static struct {
    int open;
    MPI_T_pvar_session session;
    MPI_T_pvar_handle handles[NUM_PVARS];
    int counts[NUM_PVARS]; /**< values per handle; 0: no such counter */
} pvars;

/* Slot of counter NAME ("put_count", "nic_put_bytes"); -1 if unknown. */
static int slot_of(const char *name)
{
    int offset = 0;

    if (0 == strncmp(name, "nic_", 4)) {
        name += 4;
        offset = NUM_BASE;
    }
    for (int i = 0; i < NUM_BASE; ++i) {
        if (0 == strcmp(name, pvar_base_names[i])) {
            return offset + i;
        }
    }
    return -1;
}

int btl_ofi_pvars_open(void)
{
    int level = MPI_THREAD_SINGLE, provided;

    if (pvars.open) {
        return 0;
    }
    MPI_Query_thread(&level);
    if (MPI_SUCCESS != MPI_T_init_thread(level, &provided)) {
        return -1;
    }
    if (MPI_SUCCESS != MPI_T_pvar_session_create(&pvars.session)) {
        MPI_T_finalize();
        return -1;
    }
    for (int i = 0; i < NUM_PVARS; ++i) {
        char full[64];
        int index, count = 0;

        snprintf(full, sizeof(full), "btl_ofi_%s%s", i < NUM_BASE ? "" : "nic_",
                 pvar_base_names[i % NUM_BASE]);
        pvars.counts[i] = 0;
        if (MPI_SUCCESS == MPI_T_pvar_get_index(full, MPI_T_PVAR_CLASS_COUNTER, &index)
            && MPI_SUCCESS
                   == MPI_T_pvar_handle_alloc(pvars.session, index, NULL, &pvars.handles[i],
                                              &count)) {
            pvars.counts[i] = count > 0 ? count : 0;
            if (0 == pvars.counts[i]) {
                MPI_T_pvar_handle_free(pvars.session, &pvars.handles[i]);
            }
        }
    }
    pvars.open = 1;
    return 0;
}

void btl_ofi_pvars_close(void)
{
    if (!pvars.open) {
        return;
    }
    for (int i = 0; i < NUM_PVARS; ++i) {
        if (pvars.counts[i] > 0) {
            MPI_T_pvar_handle_free(pvars.session, &pvars.handles[i]);
            pvars.counts[i] = 0;
        }
    }
    MPI_T_pvar_session_free(&pvars.session);
    MPI_T_finalize();
    pvars.open = 0;
}

int btl_ofi_pvars_count(const char *name)
{
    int slot = slot_of(name);

    return pvars.open && slot >= 0 ? pvars.counts[slot] : 0;
}

int btl_ofi_pvars_read_each(const char *name, unsigned long *values, int max)
{
    unsigned long buf[BTL_OFI_PVARS_MAX_VALUES];
    int count = btl_ofi_pvars_count(name);

    if (count < 1 || count > max || count > BTL_OFI_PVARS_MAX_VALUES
        || MPI_SUCCESS != MPI_T_pvar_read(pvars.session, pvars.handles[slot_of(name)], buf)) {
        return -1;
    }
    memcpy(values, buf, (size_t) count * sizeof(values[0]));
    return count;
}

int btl_ofi_pvars_read(const char *name, unsigned long *sum)
{
    unsigned long values[BTL_OFI_PVARS_MAX_VALUES];
    int count = btl_ofi_pvars_read_each(name, values, BTL_OFI_PVARS_MAX_VALUES);

    if (count < 0) {
        return -1;
    }
    *sum = 0;
    for (int i = 0; i < count; ++i) {
        *sum += values[i];
    }
    return 0;
}

long btl_ofi_pvars_get(const char *name)
{
    unsigned long value;

    return 0 == btl_ofi_pvars_read(name, &value) ? (long) value : -1;
}

long btl_ofi_pvars_mr_held(void)
{
    long made = btl_ofi_pvars_get("mr_count"), released = btl_ofi_pvars_get("mr_release_count");

    return made < 0 || released < 0 ? -1 : made - released;
}

void btl_ofi_pvars_print(FILE *out, int rank)
{
    fprintf(out,
            "PVARS rank=%d put=%ld get=%ld atomic=%ld send=%ld recv=%ld flush=%ld retry=%ld "
            "error=%ld mr_held=%ld wake_sent=%ld wake_recv=%ld look=%ld look_timer=%ld "
            "look_woken=%ld step_in=%ld expose=%ld repost=%ld rail_down=%ld local_atomic=%ld "
            "look_late=%ld nudge=%ld empty_pause=%ld\n",
            rank, btl_ofi_pvars_get("put_count"), btl_ofi_pvars_get("get_count"),
            btl_ofi_pvars_get("atomic_count"), btl_ofi_pvars_get("send_count"),
            btl_ofi_pvars_get("recv_count"), btl_ofi_pvars_get("flush_count"),
            btl_ofi_pvars_get("retry_count"), btl_ofi_pvars_get("error_count"),
            btl_ofi_pvars_mr_held(), btl_ofi_pvars_get("wake_sent_count"),
            btl_ofi_pvars_get("wake_recv_count"), btl_ofi_pvars_get("look_count"),
            btl_ofi_pvars_get("look_timer_count"), btl_ofi_pvars_get("look_woken_count"),
            btl_ofi_pvars_get("step_in_count"), btl_ofi_pvars_get("expose_count"),
            btl_ofi_pvars_get("repost_count"), btl_ofi_pvars_get("rail_down_count"),
            btl_ofi_pvars_get("local_atomic_count"), btl_ofi_pvars_get("look_late_count"),
            btl_ofi_pvars_get("nudge_count"), btl_ofi_pvars_get("empty_pause_count"));
    fflush(out);
}
