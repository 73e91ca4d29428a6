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
 * atomics or fragments.  The posting paths report the first post to a
 * peer where the sockets provider's connection to it still needs a wider
 * receive buffer (mca_btl_ofi_sockets_widen, below).
 *
 * The progress thread's look (btl_ofi_progress.c owns the thread, and
 * calls mca_btl_ofi_contexts_look below).  Every application entry into a
 * context (progress, a posting path's poll, a post) adds to its
 * app_progress; a context whose count did not move since the last look has
 * been left alone for a whole period, and only then does the thread drive
 * the provider for it (progress_context).  It runs our own completions
 * (receive buffers, atomics the target applies) and parks those that would
 * call the layer above, which the application then gets at its next
 * progress call in CQ order; among application threads the per-context
 * "delivering" flag keeps one deliverer at a time.  Between reading a
 * batch and parking what it kept, the thread holds completions outside the
 * lock; meanwhile nobody else reads the CQ (context->thread_batch), or
 * newer completions would reach the layer above first: ob1 unpacks a
 * non-contiguous message fragment by fragment, and Open MPI's convertor
 * writes wrong bytes, or crashes, when a fragment that ends inside an
 * element of the datatype is not followed by the next one.  It never takes
 * a lock the application holds for long: a context it cannot lock at once
 * is left for the next look.
 */

#include "opal_config.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
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
    if (mca_btl_ofi_on_shm(module)) {
        module->info->tx_attr->op_flags &= ~FI_DELIVERY_COMPLETE;
        module->info->tx_attr->op_flags |= FI_TRANSMIT_COMPLETE;
    }
}

/*
 * On shm a reply or a request comes through memory that the waiting rank
 * polls and its peer's CPU writes: a rank that polls back to back takes
 * those cache lines from the writer on every pass, on both sides (an
 * origin awaiting a reply, a target spinning in MPI).  An application
 * thread's pass that found nothing pauses the core for about
 * EMPTY_PASS_PAUSE_NS before the next: on shm, 2 ranks, 20 paired
 * rounds, 8-byte put/get/acc/fop/cas latency 0.81/0.80/0.89/0.87/0.85 of
 * back-to-back polling, 8-byte put_bw and put_rate 1.14/1.12, 64 KiB and
 * 1 MiB rows unchanged (docs/decisions.md).  A pause lasts 10 to 150
 * cycles depending on the CPU, so the count is measured once.  Network
 * providers poll a NIC's memory or make a system call per pass: a process
 * without an shm module never pauses.
 */
#define EMPTY_PASS_PAUSE_NS   100
#define EMPTY_PASS_PAUSES_MAX 64
#define PAUSE_TRIAL           256

static int pauses_lasting(int64_t ns)
{
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
    int64_t fastest = INT64_MAX, count;

    /* the fastest of three trials: one the scheduler interrupted is long */
    for (int trial = 0; trial < 3; ++trial) {
        int64_t start = mca_btl_ofi_now_ns(), took;
        for (int i = 0; i < PAUSE_TRIAL; ++i) {
            mca_btl_ofi_cpu_pause();
        }
        took = mca_btl_ofi_now_ns() - start;
        fastest = took < fastest ? took : fastest;
    }
    count = fastest > 0 ? (ns * PAUSE_TRIAL + fastest / 2) / fastest : EMPTY_PASS_PAUSES_MAX;
    return (int) (count < 1 ? 1 : (count > EMPTY_PASS_PAUSES_MAX ? EMPTY_PASS_PAUSES_MAX : count));
#else
    (void) ns;
    return 0; /* no spin-wait hint to give */
#endif
}

static void choose_empty_pass_pause(const mca_btl_ofi_module_t *module)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;

    if (0 == c->empty_pass_pauses && mca_btl_ofi_on_shm(module)) {
        c->empty_pass_pauses = pauses_lasting(EMPTY_PASS_PAUSE_NS);
        MCA_BTL_OFI_VERBOSE(10, "shm: a progress pass that finds nothing pauses %d times",
                            c->empty_pass_pauses);
    }
}

void mca_btl_ofi_contexts_plan(mca_btl_ofi_module_t *module)
{
    int n = usable_contexts(module);

    choose_send_completion(module);
    choose_empty_pass_pause(module);
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

    if (!mca_btl_ofi_on_shm(module)) {
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
        context->lock = 0;
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
/* sockets: the receive buffers of the connections it makes           */

/*
 * sockets (libfabric 1.17) peeks at each message's 24-byte header and
 * takes none of it until all 24 bytes have arrived.  When a burst ends
 * inside a header, the bytes before it sit at the end of one kernel buffer
 * that TCP charged with all it coalesced there (~120 KiB seen); in a
 * receive buffer still at the kernel's initial 128 KiB that leaves less
 * room than a loopback segment, so the receiver advertises a zero window
 * until it reads, and it never reads: the job hangs with a few bytes (8,
 * 14, 22 seen) unread on one side and the rest of the burst unsent on the
 * other.  FI_SOCKETS_MAX_BUF_SZ (the component sets it when the user did
 * not) sizes the provider's listening socket, hence the sockets it
 * accepts, but not those it connects.  Those we size here: the sockets
 * whose peer is the address add_procs noted (note_sockets_address).
 *
 * When: right after the first post to the peer succeeded
 * (mca_btl_ofi_sockets_posted, one predictable branch per post).  The
 * provider connects within that post, so the socket exists, and nothing
 * the peer sends back can have filled the initial buffer yet; widened at
 * the first completion instead, a burst of reads posted before it would
 * bring its answers into the initial buffer, where the stall begins.  The
 * connections belong to the libfabric endpoint this file opens, and rdma
 * and frag may call here, not into btl_ofi_endpoint.c.
 *
 * Once per peer, best effort: no socket found means the provider talks to
 * the peer over the socket it accepted, which the listener sized.
 */
void mca_btl_ofi_sockets_widen(mca_btl_ofi_endpoint_t *endpoint)
{
    int size = mca_btl_ofi_component.sockets_buf_sz;
    int widened;

    endpoint->addr.widen_socket = false;
    widened = mca_btl_ofi_widen_sockets_to((struct sockaddr *) &endpoint->addr.sock_name,
                                           endpoint->addr.sock_name_len, size);
    MCA_BTL_OFI_VERBOSE(20, "sockets: %d socket(s) connected to %s take %d-byte receive buffers",
                        widened, OPAL_NAME_PRINT(endpoint->proc->proc_name), size);
}

/* ------------------------------------------------------------------ */
/* Reading completions                                                 */

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

    MCA_BTL_OFI_ASSERT_CTX_LOCKED(&context->lock);
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

    MCA_BTL_OFI_ASSERT_CTX_LOCKED(&context->lock);
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
    MCA_BTL_OFI_ASSERT_CTX_LOCKED(&context->lock);
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
    MCA_BTL_OFI_ASSERT_CTX_LOCKED(&context->lock);
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
 * Returns the completions handed out, or -1 when another thread was in
 * the context (the progress thread then counts the application present).
 */
static int progress_context(mca_btl_ofi_context_t *context, bool may_call_up)
{
    mca_btl_ofi_event_t events[MCA_BTL_OFI_FAILED_MAX + MCA_BTL_OFI_CQ_BATCH_LIMIT];
    int batch = mca_btl_ofi_component.num_cq_read;
    int n = 0, parked = 0, kept = 0;
    bool holding = false;

    if (!delivery_begin(context)) {
        return -1; /* another thread is reading and delivering right now */
    }
    if (!mca_btl_ofi_ctx_trylock(&context->lock)) {
        delivery_end(context); /* a posting path or a long provider call */
        return -1;
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
    mca_btl_ofi_ctx_unlock(&context->lock);

    for (int i = 0; i < n; ++i) {
        if (!events[i].hdr->complete(events[i].hdr, events[i].len, events[i].status, may_call_up)) {
            events[kept++] = events[i];
        }
    }
    if (kept > 0 || holding) {
        mca_btl_ofi_ctx_lock(&context->lock);
        /* the CQ was read only once the ring was empty: what an application
         * thread keeps is the oldest there is; what the progress thread keeps
         * is newer than the ring, which it never takes from */
        if (may_call_up) {
            (void) park_ahead(context, events, kept);
        } else {
            (void) park(context, events, kept);
        }
        context->thread_batch = false;
        mca_btl_ofi_ctx_unlock(&context->lock);
    }
    delivery_end(context);
    return n;
}

int mca_btl_ofi_context_progress(mca_btl_ofi_context_t *context)
{
    int n = progress_context(context, true);

    return n > 0 ? n : 0;
}

void mca_btl_ofi_context_poll(mca_btl_ofi_context_t *context)
{
    mca_btl_ofi_event_t events[MCA_BTL_OFI_CQ_BATCH_LIMIT];
    int room, n;

    mca_btl_ofi_context_entered(context);
    if (!mca_btl_ofi_ctx_trylock(&context->lock)) {
        return;
    }
    if (context->thread_batch) {
        /* parked now, these would go ahead of the thread's older ones */
        mca_btl_ofi_ctx_unlock(&context->lock);
        return;
    }
    room = context->deferred_size - context->deferred_count;
    if (room > mca_btl_ofi_component.num_cq_read) {
        room = mca_btl_ofi_component.num_cq_read;
    }
    n = read_cq(context, events, room);
    park(context, events, n);
    mca_btl_ofi_ctx_unlock(&context->lock);
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

static int64_t module_outstanding_bytes(const mca_btl_ofi_module_t *module, int64_t *ops)
{
    int64_t bytes = 0;

    *ops = 0;
    for (int i = 0; i < module->num_contexts; ++i) {
        bytes += module->contexts[i].outstanding_bytes;
        *ops += module->contexts[i].outstanding;
    }
    return bytes;
}

/* A wait ended.  How soon its last wake-up was answered matters only in a
 * process that yields its core (mca_btl_ofi_stall_wait_ended): elsewhere,
 * every np-2 job among them, the clock is not read. */
static void end_wait(mca_btl_ofi_module_t *module)
{
    mca_btl_ofi_stall_watch_t *watch = &module->stall;
    bool yields = opal_progress_yield_when_idle;

    mca_btl_ofi_stall_wait_ended(watch, (yields && 0 != watch->woke_ns) ? mca_btl_ofi_now_ns() : 0,
                                 yields);
}

/* Progress found nothing: if one-sided operations have waited a while
 * without any completion, their targets may be computing outside MPI, so
 * wake their progress threads (btl_ofi_progress.c).  The clock is read only
 * here, while the caller waits anyway, and not on every pass: a few
 * microseconds late is nothing against the wake-up's 100.  A wait on a job that has ended
 * abnormally would never end: its processes are reported lost here (and
 * those of a job that ended cleanly leave the address vectors). */
static void watch_for_stall(mca_btl_ofi_module_t *module)
{
    int64_t after, now, bytes, ops;
    bool at_once;

    if (OPAL_UNLIKELY(mca_btl_ofi_peers_news())) {
        mca_btl_ofi_peers_gone();
    }

    if (mca_btl_ofi_component.wake_after_us <= 0 || !module_has_outstanding(module)) {
        if (0 != module->stall.since) {
            end_wait(module);
        }
        return;
    }
    at_once = mca_btl_ofi_wake_at_once(&module->stall);
    if (!at_once && !mca_btl_ofi_stall_read_due(&module->stall)) {
        return;
    }
    bytes = module_outstanding_bytes(module, &ops);
    after = mca_btl_ofi_wake_after_ns(mca_btl_ofi_component.wake_after_us,
                                      mca_btl_ofi_component.wake_floor_us, bytes, ops);
    now = mca_btl_ofi_now_ns();
    mca_btl_ofi_stall_clock_read(&module->stall, now);
    if (at_once) {
        (void) mca_btl_ofi_endpoints_wake_waited(module, true);
    }
    if (mca_btl_ofi_wake_due(&module->stall, now, after, true)) {
        module->stall.woke_ns = now;
        module->stall.woke_peers = (uint32_t) mca_btl_ofi_endpoints_wake_waited(module, false);
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
        mca_btl_ofi_context_entered(context);
        events += mca_btl_ofi_context_progress(context);
    }
    if (OPAL_UNLIKELY(0 == events)) {
        watch_for_stall(module);
    } else if (OPAL_UNLIKELY(0 != module->stall.since)) {
        end_wait(module);
    }
    return events;
}

void mca_btl_ofi_module_serve(mca_btl_ofi_module_t *module)
{
    for (int i = 0; i < module->num_contexts; ++i) {
        (void) progress_context(module->contexts + i, false);
    }
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

/* Open MPI's progress also runs other components: a rank whose traffic
 * goes through btl/sm alone (ob1's messages with "ofi,sm,self") pauses
 * for nothing, 8-byte ping-pong 1.6 times slower.  Only a rank that
 * awaits operations of ours, or exposes memory that peers may aim at
 * through us, pauses. */
static bool awaits_or_serves(void)
{
    if (mca_btl_ofi_progress_exposed()) {
        return true;
    }
    for (int m = 0; m < mca_btl_ofi_component.module_count; ++m) {
        if (module_has_outstanding(mca_btl_ofi_component.modules[m])) {
            return true;
        }
    }
    return false;
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
    if (0 == events && 0 != mca_btl_ofi_component.empty_pass_pauses && awaits_or_serves()) {
        mca_btl_ofi_empty_pass_pause(mca_btl_ofi_component.modules[0]);
    }
    return events;
}

/* ------------------------------------------------------------------ */
/* What the progress thread's look does (btl_ofi_progress.c)           */

/* A context the application did not touch since the last look gets the
 * thread's progress; returns the completions that took, -1 when the
 * application had been there or is in it now (one provider call that
 * outlasts a look, such as shm copying a window of large puts). */
static int look_at(mca_btl_ofi_context_t *context)
{
    uint64_t seen = context->app_progress;
    int n = -1;

    if (seen == context->thread_seen && 0 == context->app_posting) {
        n = progress_context(context, false);
        /* the replies the thread sent in there (atomics the target
         * applies) entered the context too: that was not the application */
        seen = context->app_progress;
    }
    context->thread_seen = seen;
    return n;
}

bool mca_btl_ofi_contexts_look(bool *busy, bool *sending)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;
    bool stepped_in = false;

    for (int m = 0; m < c->module_count; ++m) {
        mca_btl_ofi_module_t *module = c->modules[m];
        int steps = 0;

        for (int i = 0; i < module->num_contexts; ++i) {
            int n = look_at(module->contexts + i);

            steps += n >= 0;
            *busy |= n > 0 || mca_btl_ofi_context_owes(module->contexts + i);
            /* a queued send has no kick of its own: it may have queued
             * while the send watch was on, and the watch may have ended
             * since; counted as sending, it keeps the thread looking after
             * the watch (a stale send), so the queue drains while the rank
             * blocks outside MPI, in PMIx_Connect during a spawn */
            *sending |= mca_btl_ofi_context_sending(module->contexts + i);
        }
        if (steps > 0) {
            stepped_in = true;
            mca_btl_ofi_count(module, MCA_BTL_OFI_CNT_STEP_IN, (uint64_t) steps);
        }
    }
    return stepped_in;
}
