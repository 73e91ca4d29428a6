/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * Contexts, their CQs and progress.  This file owns the libfabric
 * endpoint with its TX/RX contexts and CQs, and the two ways of reading a
 * CQ:
 *
 * - mca_btl_ofi_context_progress(), from component progress and flush,
 *   hands every completion to its owner through the callback the
 *   operation carries (osc/rdma's or ob1's callbacks run from there);
 * - mca_btl_ofi_context_poll(), from the posting paths (back-pressure and
 *   EAGAIN), only drives the provider and parks what it reads.  Callbacks
 *   must not run there: the caller (ob1 building a request, osc/rdma
 *   halfway through an operation) is not ready to be re-entered.
 *
 * Parked completions are handed out first, so their order is kept.  What
 * a completion means is its owner's business: nothing here names rdma,
 * atomics or fragments.
 *
 * The progress thread.  With manual progress nothing moves unless someone
 * calls the provider, and a passive target that computes, sleeps or spins
 * on its own window (osc/rdma does a compare-and-swap on the local rank in
 * place) calls nobody.  One thread per process wakes every
 * btl_ofi_progress_idle_us and looks at each context: if no application
 * thread progressed it since the last look, it drives the provider itself
 * (progress_context).  It runs our own completions (receive buffers, atomics
 * the target applies) and parks those that would call the layer above,
 * which the application then gets at its next progress call in CQ order;
 * among application threads the per-context "delivering" flag keeps one
 * deliverer at a time.  Between reading a batch and parking what it kept,
 * the thread holds completions outside the lock; meanwhile nobody else
 * reads the CQ (context->thread_batch), or newer completions would reach
 * the layer above first: ob1 unpacks a non-contiguous message fragment by
 * fragment, and Open MPI's convertor writes wrong bytes, or crashes, when
 * a fragment that ends inside an element of the datatype is not followed
 * by the next one.  It never takes a lock the application holds for long:
 * a context it cannot lock at once is left for the next look.
 */

#include "opal_config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "btl_ofi.h"

opal_thread_local int mca_btl_ofi_thread_index = -1;

/* ------------------------------------------------------------------ */
/* Opening and closing                                                 */

static int open_cq(mca_btl_ofi_module_t *module, mca_btl_ofi_context_t *context)
{
    struct fi_cq_attr attr = {
        .format = FI_CQ_FORMAT_TAGGED,
        .wait_obj = FI_WAIT_NONE,
        .size = 0,
    };
    int rc = fi_cq_open(module->domain, &attr, &context->cq, context);
    if (0 != rc) {
        mca_btl_ofi_show_fi_error("fi_cq_open", module->device_name, rc);
        return OPAL_ERROR;
    }
    return OPAL_SUCCESS;
}

static int open_plain_context(mca_btl_ofi_module_t *module, mca_btl_ofi_context_t *context)
{
    int rc = fi_ep_bind(module->ep, &context->cq->fid, FI_TRANSMIT | FI_RECV);
    if (0 != rc) {
        mca_btl_ofi_show_fi_error("fi_ep_bind(cq)", module->device_name, rc);
        return OPAL_ERROR;
    }
    context->tx = context->rx = module->ep;
    return OPAL_SUCCESS;
}

static int open_scalable_context(mca_btl_ofi_module_t *module, mca_btl_ofi_context_t *context)
{
    struct fi_info *info = module->info;
    int rc = fi_tx_context(module->ep, context->index, info->tx_attr, &context->tx, context);
    if (0 == rc) {
        rc = fi_ep_bind(context->tx, &context->cq->fid, FI_TRANSMIT);
    }
    if (0 == rc) {
        rc = fi_enable(context->tx);
    }
    if (0 != rc) {
        mca_btl_ofi_show_fi_error("fi_tx_context", module->device_name, rc);
        return OPAL_ERROR;
    }
    rc = fi_rx_context(module->ep, context->index, info->rx_attr, &context->rx, context);
    if (0 == rc) {
        rc = fi_ep_bind(context->rx, &context->cq->fid, FI_RECV);
    }
    if (0 == rc) {
        rc = fi_enable(context->rx);
    }
    if (0 != rc) {
        mca_btl_ofi_show_fi_error("fi_rx_context", module->device_name, rc);
        return OPAL_ERROR;
    }
    return OPAL_SUCCESS;
}

/* Endpoint objects first, then the CQ they were bound to. */
static void close_tx_rx(mca_btl_ofi_module_t *module, mca_btl_ofi_context_t *context)
{
    if (module->is_scalable_ep) {
        if (NULL != context->tx) {
            fi_close(&context->tx->fid);
        }
        if (NULL != context->rx) {
            fi_close(&context->rx->fid);
        }
    }
    context->tx = context->rx = NULL;
}

static void release_context(mca_btl_ofi_context_t *context)
{
    if (NULL != context->cq) {
        fi_close(&context->cq->fid);
        context->cq = NULL;
    }
    free(context->deferred);
    context->deferred = NULL;
    context->deferred_size = 0;
    OBJ_DESTRUCT(&context->pending_sends);
    OBJ_DESTRUCT(&context->unposted_recvs);
    OBJ_DESTRUCT(&context->lock);
}

/** How many contexts we can have; says so when the request is cut. */
static int usable_contexts(mca_btl_ofi_module_t *module)
{
    struct fi_domain_attr *d = module->info->domain_attr;
    int wanted = mca_btl_ofi_component.num_contexts_per_module;
    size_t offered = d->max_ep_tx_ctx < d->max_ep_rx_ctx ? d->max_ep_tx_ctx : d->max_ep_rx_ctx;

    if (wanted <= 1) {
        return 1;
    }
    if (mca_btl_ofi_component.disable_sep || offered <= 1) {
        opal_show_help("help-mpi-btl-ofi.txt", "contexts clamped", true, opal_process_info.nodename,
                       module->device_name, wanted, 1,
                       mca_btl_ofi_component.disable_sep ? "btl_ofi_disable_sep is set"
                                                         : "the domain has no scalable endpoint");
        return 1;
    }
    if ((size_t) wanted > offered) {
        opal_show_help("help-mpi-btl-ofi.txt", "contexts clamped", true, opal_process_info.nodename,
                       module->device_name, wanted, (int) offered, "the domain offers no more");
        return (int) offered;
    }
    return wanted;
}

/*
 * Every write, read and non-fetching atomic names delivery-complete; a send
 * only needs its buffer back.  shm (libfabric 1.17) moves every message of
 * 4 KiB or less sent under delivery-complete through its segmentation
 * buffers, one transfer per peer at a time, and refuses RMA to that peer
 * meanwhile, so its sends ask for transmit-complete.  Not for every
 * provider: tcp;ofi_rxm across hosts then hung in rma_sync.
 */
static void choose_send_completion(mca_btl_ofi_module_t *module)
{
    if (0 == strcmp(module->info->fabric_attr->prov_name, "shm")) {
        module->info->tx_attr->op_flags &= ~FI_DELIVERY_COMPLETE;
        module->info->tx_attr->op_flags |= FI_TRANSMIT_COMPLETE;
    }
}

void mca_btl_ofi_contexts_plan(mca_btl_ofi_module_t *module)
{
    int n = usable_contexts(module);

    choose_send_completion(module);
    module->is_scalable_ep = n > 1;
    module->rx_ctx_bits = 0;
    if (module->is_scalable_ep) {
        while ((1 << module->rx_ctx_bits) < n) {
            ++module->rx_ctx_bits;
        }
        module->info->ep_attr->tx_ctx_cnt = n;
        module->info->ep_attr->rx_ctx_cnt = n;
    }
}

/*
 * shm names its region after the process id ("<pid>:<uid>:<index>" in
 * /dev/shm), creates it exclusively and fails fi_enable with EBUSY when
 * the file exists and a live process has that pid.  A job killed with
 * SIGKILL leaves its regions behind, and once the pid comes round again
 * the new process is that live owner: it cannot start.  A suffix that
 * differs from one process to the next (the start time in nanoseconds)
 * keeps stale regions out of the way; peers learn the name through the
 * modex as before.  Best effort: the default name still works otherwise.
 */
static void name_shm_endpoint_uniquely(mca_btl_ofi_module_t *module)
{
    char name[256], unique[sizeof(name)];
    size_t len = sizeof(name);
    struct timespec now;
    int rc;

    if (0 != strcmp(module->info->fabric_attr->prov_name, "shm")) {
        return;
    }
    rc = fi_getname(&module->ep->fid, name, &len);
    if (0 != rc || len == 0 || len > sizeof(name) || '\0' != name[len - 1]) {
        MCA_BTL_OFI_VERBOSE(10, "shm: keeping the default endpoint name (fi_getname: %s)",
                            0 != rc ? fi_strerror(-rc) : "not a string");
        return;
    }
    clock_gettime(CLOCK_REALTIME, &now);
    rc = snprintf(unique, sizeof(unique), "%s:%llx", name,
                  (unsigned long long) now.tv_sec * 1000000000ull
                      + (unsigned long long) now.tv_nsec);
    if (rc < 0 || (size_t) rc >= sizeof(unique)) {
        return;
    }
    rc = fi_setname(&module->ep->fid, unique, (size_t) rc + 1);
    if (0 != rc) {
        MCA_BTL_OFI_VERBOSE(10, "shm: keeping the default endpoint name %s (fi_setname: %s)", name,
                            fi_strerror(-rc));
        return;
    }
    MCA_BTL_OFI_VERBOSE(20, "shm: endpoint named %s", unique);
}

static int open_fabric_endpoint(mca_btl_ofi_module_t *module)
{
    int rc;

    if (module->is_scalable_ep) {
        rc = fi_scalable_ep(module->domain, module->info, &module->ep, NULL);
        if (0 == rc) {
            rc = fi_scalable_ep_bind(module->ep, &module->av->fid, 0);
        }
    } else {
        rc = fi_endpoint(module->domain, module->info, &module->ep, NULL);
        if (0 == rc) {
            rc = fi_ep_bind(module->ep, &module->av->fid, 0);
        }
    }
    if (0 != rc) {
        mca_btl_ofi_show_fi_error(module->is_scalable_ep ? "fi_scalable_ep" : "fi_endpoint",
                                  module->device_name, rc);
        return OPAL_ERROR;
    }
    name_shm_endpoint_uniquely(module);
    return OPAL_SUCCESS;
}

int mca_btl_ofi_contexts_init(mca_btl_ofi_module_t *module)
{
    int n = module->is_scalable_ep ? (int) module->info->ep_attr->tx_ctx_cnt : 1;

    module->contexts = calloc(n, sizeof(*module->contexts));
    if (NULL == module->contexts) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    for (int i = 0; i < n; ++i) {
        mca_btl_ofi_context_t *context = module->contexts + i;
        OBJ_CONSTRUCT(&context->lock, opal_mutex_t);
        OBJ_CONSTRUCT(&context->pending_sends, opal_list_t);
        OBJ_CONSTRUCT(&context->unposted_recvs, opal_list_t);
        context->index = i;
        context->module = module;
        module->num_contexts = i + 1;
        context->deferred = calloc(MCA_BTL_OFI_DEFERRED_INITIAL, sizeof(*context->deferred));
        if (NULL == context->deferred) {
            mca_btl_ofi_contexts_fini(module);
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
        context->deferred_size = MCA_BTL_OFI_DEFERRED_INITIAL;
        if (OPAL_SUCCESS != open_cq(module, context)) {
            mca_btl_ofi_contexts_fini(module);
            return OPAL_ERROR;
        }
    }
    return OPAL_SUCCESS;
}

void mca_btl_ofi_contexts_fini(mca_btl_ofi_module_t *module)
{
    for (int i = 0; i < module->num_contexts; ++i) {
        release_context(module->contexts + i);
    }
    free(module->contexts);
    module->contexts = NULL;
    module->num_contexts = 0;
}

int mca_btl_ofi_contexts_open(mca_btl_ofi_module_t *module)
{
    int rc = open_fabric_endpoint(module);

    for (int i = 0; OPAL_SUCCESS == rc && i < module->num_contexts; ++i) {
        rc = module->is_scalable_ep ? open_scalable_context(module, module->contexts + i)
                                    : open_plain_context(module, module->contexts + i);
    }
    if (OPAL_SUCCESS == rc) {
        rc = fi_enable(module->ep);
        if (0 != rc) {
            mca_btl_ofi_show_fi_error("fi_enable", module->device_name, rc);
            rc = OPAL_ERROR;
        }
    }
    if (OPAL_SUCCESS != rc) {
        mca_btl_ofi_contexts_close(module);
    }
    return rc;
}

void mca_btl_ofi_contexts_close(mca_btl_ofi_module_t *module)
{
    for (int i = 0; i < module->num_contexts; ++i) {
        close_tx_rx(module, module->contexts + i);
    }
    if (NULL != module->ep) {
        fi_close(&module->ep->fid);
        module->ep = NULL;
    }
}

/* ------------------------------------------------------------------ */
/* Reading completions                                                 */

static inline bool context_trylock(mca_btl_ofi_context_t *context)
{
    return !mca_btl_ofi_threaded() || 0 == opal_mutex_trylock(&context->lock);
}

static int error_status(const struct fi_cq_err_entry *err)
{
    return (FI_ECANCELED == err->err) ? OPAL_ERR_TIMEOUT : OPAL_ERROR;
}

static int read_cq_error(mca_btl_ofi_context_t *context, mca_btl_ofi_event_t *out)
{
    struct fi_cq_err_entry err;
    char buf[256];
    const char *what;

    memset(&err, 0, sizeof(err));
    if (fi_cq_readerr(context->cq, &err, 0) <= 0) {
        return 0;
    }
    what = fi_cq_strerror(context->cq, err.prov_errno, err.err_data, buf, sizeof(buf));
    MCA_BTL_OFI_VERBOSE(1, "completion error on context %d: %s (%s)", context->index,
                        fi_strerror(err.err), NULL != what ? what : "");
    if (NULL == err.op_context) {
        return 0;
    }
    out[0] = (mca_btl_ofi_event_t){ err.op_context, 0, error_status(&err) };
    return 1;
}

/** Read up to @p max completions. */
static int read_cq(mca_btl_ofi_context_t *context, mca_btl_ofi_event_t *out, int max)
{
    struct fi_cq_tagged_entry entries[MCA_BTL_OFI_CQ_BATCH_LIMIT];
    ssize_t n;

    MCA_BTL_OFI_ASSERT_LOCKED(&context->lock);
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
    if (-FI_EAVAIL == n) {
        return read_cq_error(context, out);
    }
    if (-FI_EAGAIN != n) {
        MCA_BTL_OFI_VERBOSE(1, "fi_cq_read failed: %s", fi_strerror((int) -n));
    }
    return 0;
}

static int take_parked(mca_btl_ofi_context_t *context, mca_btl_ofi_event_t *out, int max)
{
    int n = 0;

    MCA_BTL_OFI_ASSERT_LOCKED(&context->lock);
    while (n < max && context->deferred_count > 0) {
        out[n++] = context->deferred[context->deferred_head];
        context->deferred_head = (context->deferred_head + 1) % context->deferred_size;
        --context->deferred_count;
    }
    return n;
}

/* Doubles the ring, its oldest entry first; false when out of memory. */
static bool grow_parked(mca_btl_ofi_context_t *context)
{
    int size = context->deferred_size * 2;
    mca_btl_ofi_event_t *ring = calloc((size_t) size, sizeof(*ring));

    if (NULL == ring) {
        return false;
    }
    for (int i = 0; i < context->deferred_count; ++i) {
        ring[i] = context->deferred[(context->deferred_head + i) % context->deferred_size];
    }
    free(context->deferred);
    context->deferred = ring;
    context->deferred_size = size;
    context->deferred_head = 0;
    return true;
}

/* Returns how many were parked: all of them unless memory ran out, when
 * the rest are lost (and said so). */
static int park(mca_btl_ofi_context_t *context, const mca_btl_ofi_event_t *events, int n)
{
    MCA_BTL_OFI_ASSERT_LOCKED(&context->lock);
    for (int i = 0; i < n; ++i) {
        int slot;
        if (context->deferred_count == context->deferred_size && !grow_parked(context)) {
            MCA_BTL_OFI_VERBOSE(1, "context %d: no memory to park %d completions", context->index,
                                n - i);
            return i;
        }
        slot = (context->deferred_head + context->deferred_count) % context->deferred_size;
        context->deferred[slot] = events[i];
        ++context->deferred_count;
    }
    return n;
}

/* Puts completions back at the head of the ring, in their order: what an
 * application thread took from the ring, or read behind it, and could not
 * run yet (recv_complete holds the layer above's messages until it can
 * take them) is older than anything parked since, and than the rest of
 * the ring when it took only part of it.  Returns how many were parked,
 * as park() does. */
static int park_ahead(mca_btl_ofi_context_t *context, const mca_btl_ofi_event_t *events, int n)
{
    MCA_BTL_OFI_ASSERT_LOCKED(&context->lock);
    for (int i = n - 1; i >= 0; --i) {
        if (context->deferred_count == context->deferred_size && !grow_parked(context)) {
            MCA_BTL_OFI_VERBOSE(1, "context %d: no memory to park %d completions", context->index,
                                i + 1);
            return n - 1 - i;
        }
        context->deferred_head =
            (context->deferred_head + context->deferred_size - 1) % context->deferred_size;
        context->deferred[context->deferred_head] = events[i];
        ++context->deferred_count;
    }
    return n;
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
    return !mca_btl_ofi_app_threaded() || 0 == opal_atomic_swap_32(&context->delivering, 1);
}

static inline void delivery_end(mca_btl_ofi_context_t *context)
{
    if (mca_btl_ofi_app_threaded()) {
        opal_atomic_wmb();
        context->delivering = 0;
    }
}

static inline bool work_due(const mca_btl_ofi_context_t *context)
{
    return NULL != context->work && (context->pending_count > 0 || context->unposted_count > 0);
}

/*
 * One pass over a context: the work hook, then (for an application
 * thread, @p may_call_up) the parked completions, then one batch of the
 * CQ, read under the lock and run without it: callbacks may post new
 * operations.  The progress thread passes false: parked completions stay
 * for an application thread, and those it reads that would call the layer
 * above are parked behind them; until they are, the CQ is left alone.
 */
static int progress_context(mca_btl_ofi_context_t *context, bool may_call_up)
{
    mca_btl_ofi_event_t events[MCA_BTL_OFI_FAILED_MAX + MCA_BTL_OFI_CQ_BATCH_LIMIT];
    int batch = mca_btl_ofi_component.num_cq_read;
    int n = 0, parked = 0, kept = 0;
    bool holding = false;

    if (!delivery_begin(context)) {
        return 0; /* another thread is reading and delivering right now */
    }
    if (!context_trylock(context)) {
        delivery_end(context); /* a posting path is polling this CQ */
        return 0;
    }
    if (OPAL_UNLIKELY(work_due(context))) {
        n = context->work(context, events, MCA_BTL_OFI_FAILED_MAX);
    }
    if (may_call_up) {
        parked = take_parked(context, events + n, batch);
        n += parked;
    }
    /* what the thread holds came out of the CQ before anything still in
     * it: whatever is parked now is older still, and may be delivered */
    if (!context->thread_batch) {
        int read = read_cq(context, events + n, batch - parked);
        n += read;
        holding = !may_call_up && read > 0;
        context->thread_batch = holding;
    }
    mca_btl_ofi_unlock(&context->lock);

    for (int i = 0; i < n; ++i) {
        if (!events[i].hdr->complete(events[i].hdr, events[i].len, events[i].status, may_call_up)) {
            events[kept++] = events[i];
        }
    }
    if (kept > 0 || holding) {
        mca_btl_ofi_lock(&context->lock);
        /* the CQ was read only once the ring was empty: what an application
         * thread keeps is the oldest there is; what the progress thread keeps
         * is newer than the ring, which it never takes from */
        if (may_call_up) {
            (void) park_ahead(context, events, kept);
        } else {
            (void) park(context, events, kept);
        }
        context->thread_batch = false;
        mca_btl_ofi_unlock(&context->lock);
    }
    delivery_end(context);
    return n;
}

int mca_btl_ofi_context_progress(mca_btl_ofi_context_t *context)
{
    return progress_context(context, true);
}

void mca_btl_ofi_context_poll(mca_btl_ofi_context_t *context)
{
    mca_btl_ofi_event_t events[MCA_BTL_OFI_CQ_BATCH_LIMIT];
    int room, n;

    if (!context_trylock(context)) {
        return;
    }
    if (context->thread_batch) {
        /* parked now, these would go ahead of the thread's older ones */
        mca_btl_ofi_unlock(&context->lock);
        return;
    }
    room = context->deferred_size - context->deferred_count;
    if (room > mca_btl_ofi_component.num_cq_read) {
        room = mca_btl_ofi_component.num_cq_read;
    }
    n = read_cq(context, events, room);
    park(context, events, n);
    mca_btl_ofi_unlock(&context->lock);
}

static bool module_has_outstanding(const mca_btl_ofi_module_t *module)
{
    for (int i = 0; i < module->num_contexts; ++i) {
        if (module->contexts[i].outstanding > 0) {
            return true;
        }
    }
    return false;
}

/* Progress found nothing: if one-sided operations have waited a while
 * without any completion, their targets may be computing outside MPI, so
 * wake their progress threads (btl_ofi_wake.c).  The clock is read only
 * here, while the caller waits anyway. */
static void watch_for_stall(mca_btl_ofi_module_t *module)
{
    int64_t after = (int64_t) mca_btl_ofi_component.progress_wake_us * 1000, now;

    if (after <= 0 || !module_has_outstanding(module)) {
        if (0 != module->stall.since) {
            module->stall.since = 0;
        }
        return;
    }
    now = mca_btl_ofi_now_ns();
    if (mca_btl_ofi_wake_due(&module->stall, now, after, true)) {
        (void) mca_btl_ofi_endpoints_wake_waited(module);
        if (NULL != module->on_stall) {
            module->on_stall(module, now);
        }
    }
}

int mca_btl_ofi_progress_module(mca_btl_ofi_module_t *module)
{
    int events = 0;

    for (int i = 0; i < module->num_contexts; ++i) {
        mca_btl_ofi_context_t *context = module->contexts + i;
        /* only a change matters: an increment lost to a race is harmless */
        context->app_progress = context->app_progress + 1;
        events += mca_btl_ofi_context_progress(context);
    }
    if (OPAL_UNLIKELY(0 == events)) {
        watch_for_stall(module);
    } else if (OPAL_UNLIKELY(0 != module->stall.since)) {
        module->stall.since = 0;
    }
    return events;
}

/*
 * On socket providers one poll of the network CQ is a system call over
 * every connection (tcp: poll(), about 1 us), several times what a
 * same-host atomic through shm costs in all, and an origin that awaits
 * only same-host operations expects nothing from there.  Such passes leave
 * the network out, but never more than NETWORK_SKIPS_MAX in a row: other
 * hosts' operations aimed at this rank keep moving while it waits.  A
 * rank that only serves (nothing of its own outstanding) polls every pass.
 */
#define NETWORK_SKIPS_MAX 16

bool mca_btl_ofi_network_pass_skipped(mca_btl_ofi_module_t *module)
{
    if (OPAL_LIKELY(NULL == module->same_host)) {
        return false; /* no write: this runs on every pass of every thread */
    }
    if (module_has_outstanding(module) || !module_has_outstanding(module->same_host)
        || module->network_skips >= NETWORK_SKIPS_MAX) {
        if (0 != module->network_skips) {
            module->network_skips = 0;
        }
        return false;
    }
    ++module->network_skips;
    return true;
}

int mca_btl_ofi_progress(void)
{
    int events = 0;

    for (int m = 0; m < mca_btl_ofi_component.module_count; ++m) {
        mca_btl_ofi_module_t *module = mca_btl_ofi_component.modules[m];
        if (!mca_btl_ofi_network_pass_skipped(module)) {
            events += mca_btl_ofi_progress_module(module);
        }
    }
    return events;
}

/* ------------------------------------------------------------------ */
/* The progress thread                                                 */

/*
 * A look costs the rank whose core the thread shares about 10 us (the
 * wake-up, two context switches, the provider's progress, a colder cache):
 * one every 100 us took 9.5 % of a computing rank's time.  So the thread
 * looks only as often as a peer may need it (mca_btl_ofi_look_after_us):
 * - while no registration of ours takes remote access, no peer can aim a
 *   one-sided operation at us: no thread until the first one, then no
 *   timer, only the kick of the next exposure;
 * - while memory is exposed but nothing has been aimed at us for
 *   btl_ofi_progress_linger_us: a look every btl_ofi_progress_sleep_us, a
 *   safety net, provided every peer can wake the thread (an origin that
 *   waits btl_ofi_progress_wake_us without completions sends a datagram);
 * - within the linger time of a sign of traffic (a wake-up, a look that
 *   found completions or operations of our own outstanding): a look every
 *   btl_ofi_progress_idle_us, and at once when woken.
 * A thread that sleeps for milliseconds is also one the scheduler lets
 * preempt the computation as soon as it wakes.
 */
typedef enum {
    LOOK_STOP,  /**< the thread must end */
    LOOK_KICK,  /**< memory became exposed */
    LOOK_TIMER, /**< the period is over */
    LOOK_WOKEN, /**< a waiting origin's datagram */
} look_cause_t;

static struct {
    pthread_t thread;
    int kick_fd;                 /**< eventfd: exposure began, or stopping is set */
    int timer_fd;                /**< timerfd: the thread's period, with nudges */
    bool timer_armed;            /**< timer_fd may fire: a timeout-less wait disarms it */
    volatile bool stopping;      /**< set before the last kick */
    bool enabled;                /**< component init wants a thread */
    bool can_sleep;              /**< peers can wake it: the sleep period applies */
    bool running;                /**< created and not joined; under start_lock */
    opal_atomic_int64_t exposed; /**< registrations with remote access held */
    pthread_mutex_t start_lock;  /**< serialises creation against stop */
} progress_thread = { .kick_fd = -1, .timer_fd = -1, .start_lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * The nudge.  Linux decides whether a woken thread preempts the running
 * task when it wakes it, and not again until the next tick (4 ms at HZ
 * 250) or the next wake-up on that CPU.  Traced here: when the thread's
 * timer fires as its computing rank's time slice nears its end, the rank
 * keeps the core and the thread waits for the tick, an operation 1-4 ms
 * late each time.  Where the rank and its thread have a core to
 * themselves that is rare (1 timed wake-up in 2 600 on one node); where
 * the thread competes with another process's scheduling group (2
 * simulated hosts on the same CPUs), 1-5 % of them.  A second timer,
 * firing btl_ofi_progress_nudge_us after the thread's, wakes a helper
 * bound to the thread's CPU: that wake-up makes the scheduler choose
 * again, and by then the rank's slice is over.  The thread's own timer is
 * then a timerfd armed just before the helper's, so the helper's, later,
 * reprograms no timer device: 0-3 us of thread time per look more than a
 * ppoll timeout, measured under a stream of puts.  Nudging only after a
 * late wake-up saved little of that (late wake-ups come often enough
 * under traffic) and left the first of each burst unrescued.  The helper
 * is not disarmed: a thread that ran in time re-arms it for its next wait
 * before it fires, or it finds the thread in a look and goes back to
 * sleep.
 */
static struct {
    pthread_t thread;
    int timer_fd;            /**< -1: no helper (yet) */
    int cpu;                 /**< the CPU the helper is bound to; -1: none yet */
    bool unavailable;        /**< the helper could not start: never again */
    volatile bool armed;     /**< the look thread waits on a timer, due at due_ns */
    volatile int64_t due_ns; /**< CLOCK_MONOTONIC */
} nudger = { .timer_fd = -1, .cpu = -1 };

static void ask_short_slice(int slice_us);

static inline int64_t nudge_ns(void)
{
    return (int64_t) mca_btl_ofi_component.progress_nudge_us * 1000;
}

/* Arms timerfd @p fd to fire at @p at_ns (CLOCK_MONOTONIC); 0 disarms it
 * (and clears what fired). */
static void arm_at(int fd, int64_t at_ns)
{
    struct itimerspec when = { .it_value = { .tv_sec = (time_t) (at_ns / 1000000000),
                                             .tv_nsec = (long) (at_ns % 1000000000) } };

    (void) timerfd_settime(fd, TFD_TIMER_ABSTIME, &when, NULL);
}

/* The helper's timer fired while the look thread waits.  Past the thread's
 * own timer, the thread was woken and has not run: the scheduler may pass
 * it over again, so nudge until it runs.  Before it (the thread armed its
 * next wait as the timer fired), put that wait's nudge back. */
static void nudge_again(void)
{
    int64_t now = mca_btl_ofi_now_ns(), due = nudger.due_ns;

    if (now < due + nudge_ns()) {
        arm_at(nudger.timer_fd, due + nudge_ns());
        return;
    }
    mca_btl_ofi_count(mca_btl_ofi_component.modules[0], MCA_BTL_OFI_CNT_NUDGE, 1);
    arm_at(nudger.timer_fd, now + nudge_ns());
}

static void *nudger_main(void *arg)
{
    uint64_t fired;

    (void) arg;
    (void) pthread_setname_np(pthread_self(), "btl-ofi-nudge");
    ask_short_slice(mca_btl_ofi_component.progress_slice_us);
    for (;;) {
        ssize_t n = read(nudger.timer_fd, &fired, sizeof(fired));

        if (progress_thread.stopping || (n < 0 && EINTR != errno)) {
            break;
        }
        if (n == (ssize_t) sizeof(fired) && nudger.armed) {
            nudge_again();
        }
    }
    return NULL;
}

/* Started by the look thread's first timed wait; without it the thread
 * runs as before. */
static bool start_nudger(void)
{
    pthread_attr_t attr;
    int rc;

    if (nudger.timer_fd >= 0 || nudger.unavailable) {
        return nudger.timer_fd >= 0;
    }
    nudger.unavailable = true;
    nudger.timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (nudger.timer_fd < 0) {
        MCA_BTL_OFI_VERBOSE(1, "progress thread without nudges: timerfd_create failed: %s",
                            strerror(errno));
        return false;
    }
    nudger.cpu = -1;
    pthread_attr_init(&attr);
    (void) pthread_attr_setstacksize(&attr, 64 * 1024);
    rc = pthread_create(&nudger.thread, &attr, nudger_main, NULL);
    pthread_attr_destroy(&attr);
    if (0 != rc) {
        MCA_BTL_OFI_VERBOSE(1, "progress thread without nudges: pthread_create failed: %s",
                            strerror(rc));
        close(nudger.timer_fd);
        nudger.timer_fd = -1;
        return false;
    }
    nudger.unavailable = false;
    return true;
}

/* After the look thread is joined: nothing arms the timer any more. */
static void stop_nudger(void)
{
    if (nudger.timer_fd < 0) {
        nudger.unavailable = false;
        return;
    }
    progress_thread.stopping = true;
    arm_at(nudger.timer_fd, 1);
    pthread_join(nudger.thread, NULL);
    close(nudger.timer_fd);
    nudger.timer_fd = -1;
}

/* The helper's wake-up must land on the CPU where the thread waits. */
static void bind_nudger_here(void)
{
    int cpu = sched_getcpu();
    cpu_set_t here;

    if (cpu < 0 || cpu == nudger.cpu || cpu >= CPU_SETSIZE) {
        return;
    }
    CPU_ZERO(&here);
    CPU_SET(cpu, &here);
    if (0 == pthread_setaffinity_np(nudger.thread, sizeof(here), &here)) {
        nudger.cpu = cpu;
    }
}

/* A timed wait that ended more than the nudge time after its timeout. */
static void note_lateness(int64_t due)
{
    if (mca_btl_ofi_now_ns() > due + nudge_ns()) {
        mca_btl_ofi_count(mca_btl_ofi_component.modules[0], MCA_BTL_OFI_CNT_LOOK_LATE, 1);
    }
}

/* A wait whose timer is the thread's timerfd (one of @p fds), due at
 * @p due, with the helper's armed after it to fire the nudge time later. */
static int wait_nudged(struct pollfd *fds, nfds_t nfds, int64_t due)
{
    int rc;

    arm_at(progress_thread.timer_fd, due);
    progress_thread.timer_armed = true;
    bind_nudger_here();
    nudger.due_ns = due;
    nudger.armed = true;
    arm_at(nudger.timer_fd, due + nudge_ns());
    rc = ppoll(fds, nfds, NULL, NULL);
    nudger.armed = false;
    return rc;
}

/* Waits until one of @p fds is readable or @p timeout_us (-1: no timeout)
 * passed: with nudges, on the thread's timerfd; otherwise with ppoll's own
 * timeout.  Returns ppoll's answer. */
static int wait_with_timer(struct pollfd *fds, nfds_t nfds, int timeout_us)
{
    struct timespec timeout = { .tv_sec = timeout_us / 1000000,
                                .tv_nsec = (long) (timeout_us % 1000000) * 1000 };
    bool timed = timeout_us >= 0 && nudge_ns() > 0;
    bool nudged = timed && start_nudger();
    int64_t due;
    int rc;

    if (!nudged && progress_thread.timer_armed) {
        /* left armed by a nudged wait that the eventfd or a datagram ended */
        arm_at(progress_thread.timer_fd, 0);
        progress_thread.timer_armed = false;
    }
    if (!timed) {
        return ppoll(fds, nfds, timeout_us >= 0 ? &timeout : NULL, NULL);
    }
    due = mca_btl_ofi_now_ns() + (int64_t) timeout_us * 1000;
    rc = nudged ? wait_nudged(fds, nfds, due) : ppoll(fds, nfds, &timeout, NULL);
    note_lateness(due);
    return rc;
}

/* A context the application did not progress since the last look gets
 * the thread's progress; returns the completions that took, -1 when the
 * application had progressed it. */
static int look_at(mca_btl_ofi_context_t *context)
{
    uint64_t seen = context->app_progress;
    int n = -1;

    if (seen == context->thread_seen) {
        n = progress_context(context, false);
    }
    context->thread_seen = seen;
    return n;
}

/* Every wake-up takes a core from a rank that may be spinning in MPI: while
 * the application progresses everything itself the thread looks half as
 * often each time, up to MCA_BTL_OFI_IDLE_BACKOFF looks apart, and back to
 * every btl_ofi_progress_idle_us as soon as a context was left idle. */
static int next_interval_us(int interval, bool stepped_in)
{
    int base = mca_btl_ofi_component.progress_idle_us;

    if (stepped_in) {
        return base;
    }
    return (interval < base * MCA_BTL_OFI_IDLE_BACKOFF / 2) ? interval * 2
                                                            : base * MCA_BTL_OFI_IDLE_BACKOFF;
}

/* One look at every context.  Returns whether the thread stepped in for
 * one; @p busy is set when traffic shows: completions it read, or
 * operations of this process still outstanding. */
static bool look_at_all(bool *busy)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;
    bool stepped_in = false;

    for (int m = 0; m < c->module_count; ++m) {
        mca_btl_ofi_module_t *module = c->modules[m];
        int steps = 0;

        for (int i = 0; i < module->num_contexts; ++i) {
            int n = look_at(module->contexts + i);

            steps += n >= 0;
            *busy |= n > 0 || module->contexts[i].outstanding > 0;
        }
        if (steps > 0) {
            stepped_in = true;
            mca_btl_ofi_count(module, MCA_BTL_OFI_CNT_STEP_IN, (uint64_t) steps);
        }
    }
    return stepped_in;
}

static void drain_kicks(void)
{
    uint64_t count;

    while (read(progress_thread.kick_fd, &count, sizeof(count)) < 0 && EINTR == errno) {
    }
}

/* The look thread's descriptors: what ends its waits. */
enum { FD_KICK, FD_TIMER, FD_WAKE, FD_COUNT };

/* Waits on the kick eventfd, the thread's timer (@p timeout_us, -1: none)
 * and, when @p nfds is FD_COUNT, the wake-up socket. */
static look_cause_t wait_on(struct pollfd *fds, nfds_t nfds, int timeout_us, int *wakeups)
{
    if (wait_with_timer(fds, nfds, timeout_us) <= 0) {
        return LOOK_TIMER; /* a signal: look either way */
    }
    if (fds[FD_KICK].revents & POLLIN) {
        drain_kicks();
        return progress_thread.stopping ? LOOK_STOP : LOOK_KICK;
    }
    if (nfds > FD_WAKE && (fds[FD_WAKE].revents & POLLIN)) {
        *wakeups += mca_btl_ofi_wake_drain();
        return LOOK_WOKEN;
    }
    return LOOK_TIMER;
}

/* Without wake-ups, or with nothing exposed, one wait will do.  With them,
 * one wait for the period or a wake-up; a wake-up that comes within the
 * gap of the last look (the caller's previous return) waits out the rest
 * of the gap before the look.  So a thread that nothing wakes, the usual
 * case while nothing is aimed at its rank, is woken once per look, not
 * twice (a wait for the gap, then one for the rest). */
static look_cause_t sleep_until_look(struct pollfd *fds, int timeout_us, int gap, int *wakeups)
{
    int64_t start, left;
    look_cause_t cause;

    if (fds[FD_WAKE].fd < 0 || timeout_us < 0 || gap >= timeout_us) {
        return wait_on(fds, FD_WAKE, timeout_us, wakeups);
    }
    start = mca_btl_ofi_now_ns();
    cause = wait_on(fds, FD_COUNT, timeout_us, wakeups);
    if (LOOK_WOKEN == cause) {
        left = (int64_t) gap * 1000 - (mca_btl_ofi_now_ns() - start);
        if (left > 0) {
            /* the timer alone: a kick meanwhile waits in the eventfd */
            (void) wait_with_timer(fds + FD_TIMER, 1, (int) (left / 1000));
        }
    }
    return cause;
}

static void count_look(look_cause_t cause, int wakeups)
{
    mca_btl_ofi_module_t *first = mca_btl_ofi_component.modules[0];

    mca_btl_ofi_count(first, MCA_BTL_OFI_CNT_LOOK, 1);
    mca_btl_ofi_count(
        first, LOOK_WOKEN == cause ? MCA_BTL_OFI_CNT_LOOK_WOKEN : MCA_BTL_OFI_CNT_LOOK_TIMER, 1);
    if (wakeups > 0) {
        mca_btl_ofi_count(first, MCA_BTL_OFI_CNT_WAKE_RECV, (uint64_t) wakeups);
    }
}

/* A look happens when the plan's period is over or a peer wakes the
 * thread, but never sooner than btl_ofi_progress_gap_us after the last
 * one: a thread that wakes too often for the scheduler to let it preempt
 * a computing rank at once (measured: looks 40 us apart) makes 1-2 % of
 * the operations wait for the next tick, 4 ms here. */
/* What sched_setattr(2) reads, up to sched_period: glibc before 2.41
 * declares neither the call nor the structure. */
typedef struct {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime;
    uint64_t sched_deadline;
    uint64_t sched_period;
} look_sched_attr_t;

/*
 * Linux's EEVDF scheduler (6.6 on) lets a woken task run at once only when
 * its virtual deadline comes before the running one's.  A thread that
 * looks every 100 us has used its share by then, so a rank that computes
 * keeps the core until its slice or the tick ends: 1-5 ms seen across
 * hosts.  A shorter slice (6.12 on; the default is 3 ms) gives the thread
 * an earlier deadline on every wake-up; the CPU time it takes does not
 * change.  The thread's nice value stays what it is.
 */
static void ask_short_slice(int slice_us)
{
#if defined(__linux__) && defined(SYS_sched_setattr)
    look_sched_attr_t attr = { .size = sizeof(attr), .sched_policy = SCHED_OTHER };
    pid_t tid = (pid_t) syscall(SYS_gettid);

    if (slice_us <= 0) {
        return;
    }
    errno = 0;
    attr.sched_nice = getpriority(PRIO_PROCESS, (id_t) tid);
    if (0 != errno) {
        return;
    }
    attr.sched_runtime = (uint64_t) slice_us * 1000;
    if (0 != syscall(SYS_sched_setattr, tid, &attr, 0)) {
        MCA_BTL_OFI_VERBOSE(10, "progress thread: the scheduler kept its slice: %s",
                            strerror(errno));
    }
#else
    (void) slice_us;
#endif
}

/* btl_ofi_progress_rt_priority: refused where the process may not have a
 * real-time priority; the thread then runs as before, and says so once. */
static void ask_real_time(int priority)
{
    struct sched_param param = { .sched_priority = priority };
    int rc;

    if (priority <= 0) {
        return;
    }
    rc = pthread_setschedparam(progress_thread.thread, SCHED_RR, &param);
    if (0 != rc) {
        opal_show_help("help-mpi-btl-ofi.txt", "progress rt refused", true,
                       opal_process_info.nodename, priority, strerror(rc));
        return;
    }
    MCA_BTL_OFI_VERBOSE(10, "progress thread: SCHED_RR priority %d", priority);
}

static void *progress_thread_main(void *arg)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;
    struct pollfd fds[FD_COUNT] = {
        [FD_KICK] = { .fd = progress_thread.kick_fd, .events = POLLIN },
        /* armed only by nudged waits: without nudges, nothing to poll */
        [FD_TIMER] = { .fd = c->progress_nudge_us > 0 ? progress_thread.timer_fd : -1,
                       .events = POLLIN },
        [FD_WAKE] = { .fd = mca_btl_ofi_wake_fd(), .events = POLLIN },
    };
    mca_btl_ofi_look_plan_t plan = { .can_sleep = progress_thread.can_sleep,
                                     .linger_ns = (int64_t) c->progress_linger_us * 1000,
                                     .interval_us = c->progress_idle_us,
                                     .sleep_us = c->progress_sleep_us };
    int64_t last_traffic = mca_btl_ofi_now_ns();

    (void) arg;
    /* so that top -H, ps -L and perf name it */
    (void) pthread_setname_np(pthread_self(), "btl-ofi-look");
    if (0 == c->progress_rt_priority) {
        ask_short_slice(c->progress_slice_us); /* (it would undo SCHED_RR) */
    }
    /* Linux lets a timed wait overrun by 50 us by default, half of a
     * whole idle period: ask for 1 us (a timerfd has no slack) */
    (void) prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    for (;;) {
        int wakeups = 0;
        bool busy = false, stepped_in;
        look_cause_t cause;

        plan.exposed = progress_thread.exposed > 0;
        plan.quiet_ns = mca_btl_ofi_now_ns() - last_traffic;
        cause =
            sleep_until_look(fds, mca_btl_ofi_look_after_us(&plan), c->progress_gap_us, &wakeups);
        if (LOOK_STOP == cause) {
            break;
        }
        if (LOOK_KICK == cause || progress_thread.exposed <= 0) {
            /* the next plan sees the new exposure; an exposure that
             * begins is likely followed by traffic */
            last_traffic = mca_btl_ofi_now_ns();
            continue;
        }
        stepped_in = look_at_all(&busy);
        count_look(cause, wakeups);
        if (busy || LOOK_WOKEN == cause) {
            last_traffic = mca_btl_ofi_now_ns();
        }
        plan.interval_us = next_interval_us(plan.interval_us, stepped_in);
    }
    return NULL;
}

void mca_btl_ofi_progress_thread_enable(bool can_sleep)
{
    progress_thread.enabled = true;
    progress_thread.can_sleep = can_sleep;
}

static void close_thread_fds(void)
{
    if (progress_thread.kick_fd >= 0) {
        close(progress_thread.kick_fd);
    }
    if (progress_thread.timer_fd >= 0) {
        close(progress_thread.timer_fd);
    }
    progress_thread.kick_fd = progress_thread.timer_fd = -1;
}

static int start_locked(void)
{
    int rc;

    if (progress_thread.running || !progress_thread.enabled) {
        return OPAL_SUCCESS;
    }
    progress_thread.kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    progress_thread.timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (progress_thread.kick_fd < 0 || progress_thread.timer_fd < 0) {
        MCA_BTL_OFI_VERBOSE(1, "no progress thread: %s failed: %s",
                            progress_thread.kick_fd < 0 ? "eventfd" : "timerfd_create",
                            strerror(errno));
        close_thread_fds();
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    progress_thread.stopping = false;
    rc = pthread_create(&progress_thread.thread, NULL, progress_thread_main, NULL);
    if (0 != rc) {
        close_thread_fds();
        MCA_BTL_OFI_VERBOSE(1, "no progress thread: pthread_create failed: %s", strerror(rc));
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    progress_thread.running = true;
    MCA_BTL_OFI_VERBOSE(10, "progress thread started: memory is exposed");
    ask_real_time(mca_btl_ofi_component.progress_rt_priority);
    return OPAL_SUCCESS;
}

static void kick(void)
{
    uint64_t one = 1;

    while (write(progress_thread.kick_fd, &one, sizeof(one)) < 0 && EINTR == errno) {
    }
}

void mca_btl_ofi_progress_expose(int delta)
{
    if (1 != delta) {
        (void) opal_atomic_fetch_add_64(&progress_thread.exposed, delta);
        return; /* the thread sees it at its next look */
    }
    if (0 != opal_atomic_fetch_add_64(&progress_thread.exposed, 1) || !progress_thread.enabled) {
        return;
    }
    if (mca_btl_ofi_component.module_count > 0) {
        mca_btl_ofi_count(mca_btl_ofi_component.modules[0], MCA_BTL_OFI_CNT_EXPOSE, 1);
    }
    pthread_mutex_lock(&progress_thread.start_lock);
    if (progress_thread.running) {
        kick();
    } else {
        (void) start_locked();
    }
    pthread_mutex_unlock(&progress_thread.start_lock);
}

void mca_btl_ofi_progress_thread_stop(void)
{
    pthread_mutex_lock(&progress_thread.start_lock);
    progress_thread.enabled = false;
    mca_btl_ofi_wake_listen(false);
    if (!progress_thread.running) {
        pthread_mutex_unlock(&progress_thread.start_lock);
        return;
    }
    progress_thread.stopping = true;
    kick();
    pthread_join(progress_thread.thread, NULL);
    stop_nudger();
    close_thread_fds();
    progress_thread.running = false;
    pthread_mutex_unlock(&progress_thread.start_lock);
    MCA_BTL_OFI_VERBOSE(10, "progress thread stopped");
}
