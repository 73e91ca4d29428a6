/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * Completion handling.  Two entry points read a context's CQ:
 *
 * - mca_btl_ofi_context_progress(), from component progress and flush,
 *   hands every completion to its owner (osc/rdma's or ob1's callback);
 * - mca_btl_ofi_context_poll(), from the posting paths (back-pressure and
 *   EAGAIN), only drives the provider and parks what it reads.  Callbacks
 *   must not run there: the caller (ob1 building a request, osc/rdma
 *   halfway through an operation) is not ready to be re-entered.
 *
 * Parked completions are handed out first, so their order is kept.
 */

#include "opal_config.h"

#include <string.h>

#include "opal/util/proc.h"

#include "btl_ofi.h"

static inline bool context_trylock(mca_btl_ofi_context_t *context)
{
    return !opal_using_threads() || 0 == opal_mutex_trylock(&context->lock);
}

static inline void context_unlock(mca_btl_ofi_context_t *context)
{
    if (opal_using_threads()) {
        opal_mutex_unlock(&context->lock);
    }
}

static int error_status(const struct fi_cq_err_entry *err)
{
    return (FI_ECANCELED == err->err) ? OPAL_ERR_TIMEOUT : OPAL_ERROR;
}

/** Read up to @p max completions; the caller holds the context lock. */
static int read_cq(mca_btl_ofi_context_t *context, mca_btl_ofi_event_t *out, int max)
{
    struct fi_cq_tagged_entry entries[MCA_BTL_OFI_CQ_BATCH_LIMIT];
    struct fi_cq_err_entry err;
    ssize_t n;

    if (max > MCA_BTL_OFI_CQ_BATCH_LIMIT) {
        max = MCA_BTL_OFI_CQ_BATCH_LIMIT;
    }
    if (max <= 0) {
        return 0;
    }
    n = fi_cq_read(context->cq, entries, (size_t) max);
    if (n > 0) {
        for (ssize_t i = 0; i < n; ++i) {
            out[i] = (mca_btl_ofi_event_t){ entries[i].op_context, entries[i].len, OPAL_SUCCESS };
        }
        return (int) n;
    }
    if (-FI_EAVAIL != n) {
        if (-FI_EAGAIN != n) {
            MCA_BTL_OFI_VERBOSE(1, "fi_cq_read failed: %s", fi_strerror((int) -n));
        }
        return 0;
    }
    memset(&err, 0, sizeof(err));
    if (fi_cq_readerr(context->cq, &err, 0) <= 0) {
        return 0;
    }
    {
        char buf[256];
        const char *what =
            fi_cq_strerror(context->cq, err.prov_errno, err.err_data, buf, sizeof(buf));
        MCA_BTL_OFI_VERBOSE(1, "completion error on context %d: %s (%s)", context->index,
                            fi_strerror(err.err), NULL != what ? what : "");
    }
    if (NULL == err.op_context) {
        return 0;
    }
    out[0] = (mca_btl_ofi_event_t){ err.op_context, 0, error_status(&err) };
    return 1;
}

static int take_parked(mca_btl_ofi_context_t *context, mca_btl_ofi_event_t *out, int max)
{
    int n = 0;

    while (n < max && context->deferred_count > 0) {
        out[n++] = context->deferred[context->deferred_head];
        context->deferred_head = (context->deferred_head + 1) % MCA_BTL_OFI_DEFERRED_MAX;
        --context->deferred_count;
    }
    return n;
}

static void park(mca_btl_ofi_context_t *context, const mca_btl_ofi_event_t *events, int n)
{
    for (int i = 0; i < n; ++i) {
        int slot = (context->deferred_head + context->deferred_count) % MCA_BTL_OFI_DEFERRED_MAX;
        context->deferred[slot] = events[i];
        ++context->deferred_count;
    }
}

static void dispatch(const mca_btl_ofi_event_t *event)
{
    mca_btl_ofi_ctx_hdr_t *hdr = event->op_context;

    if (MCA_BTL_OFI_OP_SEND == hdr->type || MCA_BTL_OFI_OP_RECV == hdr->type) {
        mca_btl_ofi_frag_t *frag =
            (mca_btl_ofi_frag_t *) ((char *) hdr - offsetof(mca_btl_ofi_frag_t, ctx));
        mca_btl_ofi_am_complete(frag, event->len, event->status);
    } else {
        mca_btl_ofi_comp_t *comp =
            (mca_btl_ofi_comp_t *) ((char *) hdr - offsetof(mca_btl_ofi_comp_t, ctx));
        if (OPAL_SUCCESS != event->status) {
            MCA_BTL_OFI_VERBOSE(1, "operation to %s failed",
                                NULL != comp->endpoint->proc
                                    ? OPAL_NAME_PRINT(comp->endpoint->proc->proc_name)
                                    : "?");
        }
        mca_btl_ofi_rdma_complete(comp, event->status);
    }
}

/*
 * One thread at a time reads a context's CQ *and* runs the callbacks of what
 * it read, in CQ order, as btl/sm and btl/tcp do: ob1 never gets two
 * fragments of one peer at once from them, and handing it ours from two
 * threads at a time crashed it in a 10-minute MPI_THREAD_MULTIPLE soak
 * (mca_pml_ob1_recv_req_start).  The context lock itself is not held over
 * the callbacks, which may post sends.
 */
static inline bool delivery_begin(mca_btl_ofi_context_t *context)
{
    return !opal_using_threads() || 0 == opal_atomic_swap_32(&context->delivering, 1);
}

static inline void delivery_end(mca_btl_ofi_context_t *context)
{
    if (opal_using_threads()) {
        opal_atomic_wmb();
        context->delivering = 0;
    }
}

int mca_btl_ofi_context_progress(mca_btl_ofi_context_t *context)
{
    mca_btl_ofi_event_t events[MCA_BTL_OFI_CQ_BATCH_LIMIT];
    int batch = mca_btl_ofi_component.num_cq_read;
    int n;

    mca_btl_ofi_frag_t *failed[8];
    int nfailed = 0;

    if (!delivery_begin(context)) {
        return 0; /* another thread is reading and delivering right now */
    }
    if (!context_trylock(context)) {
        delivery_end(context); /* a posting path is polling this CQ */
        return 0;
    }
    if (OPAL_UNLIKELY(context->unposted_count > 0)) {
        mca_btl_ofi_am_repost_receives(context);
    }
    if (OPAL_UNLIKELY(context->pending_count > 0)) {
        nfailed = mca_btl_ofi_am_drain_pending(context, failed, 8);
    }
    n = take_parked(context, events, batch);
    n += read_cq(context, events + n, batch - n);
    context_unlock(context);

    /* callbacks run without our lock: they may post new operations */
    for (int i = 0; i < nfailed; ++i) {
        mca_btl_ofi_am_fail(failed[i]);
    }
    for (int i = 0; i < n; ++i) {
        dispatch(events + i);
    }
    delivery_end(context);
    return n + nfailed;
}

void mca_btl_ofi_context_poll(mca_btl_ofi_context_t *context)
{
    mca_btl_ofi_event_t events[MCA_BTL_OFI_CQ_BATCH_LIMIT];
    int room, n;

    if (!context_trylock(context)) {
        return;
    }
    room = MCA_BTL_OFI_DEFERRED_MAX - context->deferred_count;
    if (room > mca_btl_ofi_component.num_cq_read) {
        room = mca_btl_ofi_component.num_cq_read;
    }
    n = read_cq(context, events, room);
    park(context, events, n);
    context_unlock(context);
}
