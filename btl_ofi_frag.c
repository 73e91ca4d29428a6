/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * Two-sided fragments and the active-message path.  Fragments carry a
 * small header (sender rank, active-message tag, message kind) in front
 * of up to max_send_size bytes and land in receive buffers pre-posted on
 * context 0, which is where peers address their messages.  A received
 * message goes to the handler its kind names in mca_btl_ofi_msg_handlers:
 * ob1's active messages are ours, the other kinds belong to whoever
 * filled them in.  Sends the provider refuses for now, and receive
 * buffers it will not take back yet, wait on the context's lists for the
 * context's work hook (frag_work) to post them.
 */

#include "opal_config.h"

#include <string.h>

#include "opal/datatype/opal_convertor.h"
#include "opal/util/proc.h"

/* for layer_above_ready() only: see there */
#include "ompi/communicator/communicator.h"
#include "ompi/runtime/mpiruntime.h"

#include "btl_ofi.h"

#define BTL_OFI_SEND_RETRIES 8

static bool send_complete(mca_btl_ofi_ctx_hdr_t *hdr, size_t len, int status, bool may_call_up);
static bool recv_complete(mca_btl_ofi_ctx_hdr_t *hdr, size_t len, int status, bool may_call_up);
static int frag_work(mca_btl_ofi_context_t *context, mca_btl_ofi_event_t *failed, int max);

static inline mca_btl_ofi_frag_t *frag_of(mca_btl_ofi_ctx_hdr_t *hdr)
{
    return (mca_btl_ofi_frag_t *) ((char *) hdr - offsetof(mca_btl_ofi_frag_t, ctx));
}

static void frag_construct(mca_btl_ofi_frag_t *frag)
{
    frag->base.des_segments = &frag->segment;
    frag->base.des_segment_count = 1;
    frag->base.des_cbfunc = NULL;
    frag->base.des_cbdata = NULL;
    frag->base.des_context = NULL;
    frag->base.des_flags = 0;
    frag->base.order = MCA_BTL_NO_ORDER;
    frag->endpoint = NULL;
}
OBJ_CLASS_INSTANCE(mca_btl_ofi_frag_t, mca_btl_base_descriptor_t, frag_construct, NULL);

static int frag_init(opal_free_list_item_t *item, void *arg)
{
    mca_btl_ofi_frag_t *frag = (mca_btl_ofi_frag_t *) item;
    mca_btl_ofi_frag_list_t *owner = arg;

    frag->module = owner->module;
    frag->context = owner->context;
    frag->list = owner;
    frag->ctx.complete = owner->complete;
    frag->hdr = (mca_btl_ofi_am_hdr_t *) item->ptr;
    /* the header goes on the wire whole, padding included */
    memset(frag->hdr, 0, sizeof(*frag->hdr));
    frag->desc =
        (NULL != item->registration) ? ((mca_btl_ofi_reg_t *) item->registration)->desc : NULL;
    frag->segment.seg_addr.pval = frag->hdr + 1;
    frag->segment.seg_len = 0;
    return OPAL_SUCCESS;
}

static int init_frag_list(mca_btl_ofi_module_t *module, mca_btl_ofi_context_t *context,
                          mca_btl_ofi_frag_list_t *owner, mca_btl_ofi_complete_fn_t complete,
                          size_t payload, int initial, int max)
{
    owner->module = module;
    owner->context = context;
    owner->complete = complete;
    owner->payload = payload;
    return opal_free_list_init(
        &owner->list, sizeof(mca_btl_ofi_frag_t), opal_cache_line_size,
        OBJ_CLASS(mca_btl_ofi_frag_t), sizeof(mca_btl_ofi_am_hdr_t) + payload, opal_cache_line_size,
        initial, max, initial, NULL, module->mr_local ? MCA_RCACHE_ACCESS_LOCAL_WRITE : 0,
        module->mr_local ? module->rcache : NULL, frag_init, owner);
}

static inline void frag_return(mca_btl_ofi_frag_t *frag)
{
    mca_btl_ofi_list_return(&frag->list->list, &frag->base.super);
}

static int post_recv(mca_btl_ofi_context_t *context, mca_btl_ofi_frag_t *frag)
{
    size_t size = sizeof(mca_btl_ofi_am_hdr_t) + mca_btl_ofi_component.max_send_size;
    ssize_t rc;

    rc = fi_recv(context->rx, frag->hdr, size, frag->desc, FI_ADDR_UNSPEC, &frag->ctx.fi_ctx);
    if (-FI_EAGAIN == rc) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    if (0 != rc) {
        MCA_BTL_OFI_VERBOSE(1, "fi_recv failed: %s", fi_strerror((int) -rc));
        return OPAL_ERROR;
    }
    return OPAL_SUCCESS;
}

/* A provider queues only so many receives (shm 1024, tcp;ofi_rxm 2048 in
 * libfabric 1.17): rd_num above that is cut to what it takes. */
static int receives_to_post(mca_btl_ofi_module_t *module)
{
    size_t queue = module->info->rx_attr->size;
    int wanted = mca_btl_ofi_component.rd_num;

    if (queue > 0 && (size_t) wanted > queue) {
        MCA_BTL_OFI_VERBOSE(1, "%s queues at most %zu receives: posting %zu of btl_ofi_rd_num %d",
                            module->device_name, queue, queue, wanted);
        return (int) queue;
    }
    return wanted;
}

static int post_receive_buffers(mca_btl_ofi_context_t *context, int count)
{
    for (int i = 0; i < count; ++i) {
        mca_btl_ofi_frag_t *frag =
            (mca_btl_ofi_frag_t *) mca_btl_ofi_list_get(&context->recv_frags.list);
        int rc;

        if (NULL == frag) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
        rc = (0 == context->unposted_count) ? post_recv(context, frag) : OPAL_ERR_OUT_OF_RESOURCE;
        if (OPAL_ERR_OUT_OF_RESOURCE == rc) {
            /* the queue is shorter than it claimed: progress posts the
             * rest when there is room */
            opal_list_append(&context->unposted_recvs, &frag->base.super.super);
            ++context->unposted_count;
        } else if (OPAL_SUCCESS != rc) {
            frag_return(frag);
            return rc;
        }
    }
    if (context->unposted_count > 0) {
        MCA_BTL_OFI_VERBOSE(1, "the provider took %d of %d receive buffers for now",
                            count - context->unposted_count, count);
    }
    return OPAL_SUCCESS;
}

/* A peer's receive queue is as long as ours (same provider): an eighth of
 * it per sending context leaves room for several senders and for the
 * buffers posted on it. */
static int64_t send_window_for(mca_btl_ofi_module_t *module)
{
    size_t queue = module->info->rx_attr->size;

    if (0 == queue) {
        return INT64_MAX;
    }
    return (queue / 8 < 16) ? 16 : (int64_t) (queue / 8);
}

int mca_btl_ofi_frag_context_init(mca_btl_ofi_module_t *module, mca_btl_ofi_context_t *context)
{
    size_t max_send = mca_btl_ofi_component.max_send_size;
    int rc;

    OBJ_CONSTRUCT(&context->small_frags.list, opal_free_list_t);
    OBJ_CONSTRUCT(&context->send_frags.list, opal_free_list_t);
    OBJ_CONSTRUCT(&context->recv_frags.list, opal_free_list_t);
    context->frags_ready = true;
    context->work = frag_work;
    context->sends_in_flight = 0;
    context->send_window = send_window_for(module);
    rc = init_frag_list(module, context, &context->small_frags, send_complete,
                        MCA_BTL_OFI_SMALL_FRAG_PAYLOAD, 64, -1);
    if (OPAL_SUCCESS == rc) {
        rc =
            init_frag_list(module, context, &context->send_frags, send_complete, max_send, 16, 512);
    }
    /* peers address their messages to context 0 */
    if (OPAL_SUCCESS == rc && 0 == context->index) {
        int count = receives_to_post(module);
        rc = init_frag_list(module, context, &context->recv_frags, recv_complete, max_send, count,
                            count);
    }
    if (OPAL_SUCCESS != rc) {
        mca_btl_ofi_frag_context_fini(context);
    }
    return rc;
}

void mca_btl_ofi_frag_context_fini(mca_btl_ofi_context_t *context)
{
    if (context->frags_ready) {
        OBJ_DESTRUCT(&context->small_frags.list);
        OBJ_DESTRUCT(&context->send_frags.list);
        OBJ_DESTRUCT(&context->recv_frags.list);
        context->frags_ready = false;
    }
    context->work = NULL;
}

int mca_btl_ofi_frag_post_receives(mca_btl_ofi_module_t *module)
{
    mca_btl_ofi_context_t *context = module->contexts;

    return post_receive_buffers(context, (int) context->recv_frags.list.fl_num_allocated);
}

/* Waiting fragments belong to the free lists of any context: forget them
 * all, once the endpoint is closed, before the first list goes. */
void mca_btl_ofi_frag_drop_waiting(mca_btl_ofi_module_t *module)
{
    for (int i = 0; i < module->num_contexts; ++i) {
        mca_btl_ofi_context_t *context = module->contexts + i;
        while (NULL != opal_list_remove_first(&context->pending_sends)) {
        }
        while (NULL != opal_list_remove_first(&context->unposted_recvs)) {
        }
        context->pending_count = 0;
        context->unposted_count = 0;
    }
}

/* ------------------------------------------------------------------ */

/*
 * Whether the layer above can take a message now.  ompi_mpi_init()
 * registers MPI_COMM_WORLD (communicator index 0) before the PMIx fence
 * of its modex and hands it to the PML (add_comm) only after that fence,
 * calling opal_progress() while it waits.  ob1 queues a message for a
 * communicator it does not know, but it finds MPI_COMM_WORLD and
 * dereferences its PML part, still NULL: a message that arrives in that
 * window kills the rank.  Open MPI counts on the fence after add_comm to
 * keep peers from sending that early; Slurm 22.05's fence without data
 * (its tree collective) releases a node before the others have entered it,
 * so under srun a peer can leave MPI_Init and send while this rank waits
 * in the fence before.  Until add_comm, received messages of the layer
 * above wait in the context's parked ring (recv_complete declines them)
 * and go up in order on the first progress call after it.  Nothing waits
 * for them in that window: the fence is PMIx traffic, not ours.
 *
 * Read only in MPI_Init (before it, e.g. under MPI Sessions, and after it
 * nothing is held), through weak references: the component links
 * libopen-pal alone, and a process without libmpi sees them NULL.
 */
#pragma weak ompi_mpi_state
#pragma weak ompi_mpi_comm_world

static bool layer_above_ready(void)
{
    static volatile bool ready = false; /* from add_comm on, for good */

    if (OPAL_LIKELY(ready)) {
        return true;
    }
    if (NULL == &ompi_mpi_state || NULL == &ompi_mpi_comm_world) {
        ready = true; /* no libmpi: nobody registers MPI_COMM_WORLD */
        return true;
    }
    if (OMPI_MPI_STATE_INIT_STARTED == ompi_mpi_state) {
        ready = NULL != ompi_mpi_comm_world.comm.c_pml_comm;
        return ready;
    }
    ready = ompi_mpi_state >= OMPI_MPI_STATE_INIT_COMPLETED;
    return true;
}

/* The layer above's messages: to the callback registered for the tag. */
static void deliver_am(mca_btl_ofi_module_t *module, const mca_btl_ofi_am_hdr_t *hdr, size_t len)
{
    mca_btl_base_tag_t tag = hdr->tag;
    const mca_btl_active_message_callback_t *reg = mca_btl_base_active_message_trigger + tag;
    mca_btl_base_segment_t segment = { .seg_addr.pval = (void *) (hdr + 1), .seg_len = len };

    mca_btl_ofi_count(module, MCA_BTL_OFI_CNT_RECV, 1);
    mca_btl_ofi_count(module, MCA_BTL_OFI_CNT_RECV_BYTES, len);
    if (OPAL_LIKELY(NULL != reg->cbfunc)) {
        mca_btl_ofi_compat_deliver(&module->super, reg, tag,
                                   mca_btl_ofi_endpoint_of_sender(module, hdr), &segment);
    } else {
        MCA_BTL_OFI_VERBOSE(1, "dropped a message with unregistered tag %d", tag);
    }
}

mca_btl_ofi_msg_handler_t mca_btl_ofi_msg_handlers[MCA_BTL_OFI_KIND_MAX] = {
    [MCA_BTL_OFI_KIND_AM] = { deliver_am, true },
    [MCA_BTL_OFI_KIND_LEAVING] = { mca_btl_ofi_peer_leaving, false },
};

static const mca_btl_ofi_msg_handler_t *handler_of(const mca_btl_ofi_frag_t *frag)
{
    uint8_t kind = frag->hdr->kind;

    if (OPAL_LIKELY(kind < MCA_BTL_OFI_KIND_MAX && NULL != mca_btl_ofi_msg_handlers[kind].fn)) {
        return mca_btl_ofi_msg_handlers + kind;
    }
    return NULL;
}

/*
 * A message handed over without a callback did not arrive: nothing above
 * learns it, and the peer would wait for it for good.  Seen when a
 * process of another job (spawned, connected) dies: its runtime ends that
 * job, not ours.  The layer above is told the peer is lost, once; ob1 then
 * ends the job (with ULFM, it marks the peer failed).
 */
static void report_lost_message(mca_btl_ofi_frag_t *frag, int status)
{
    mca_btl_ofi_module_t *module = frag->module;
    mca_btl_ofi_endpoint_t *endpoint = frag->endpoint;

    if (NULL == endpoint || !endpoint->addr.reachable) {
        return;
    }
    endpoint->addr.reachable = false;
    opal_show_help("help-mpi-btl-ofi.txt", "message lost", true, opal_process_info.nodename,
                   OPAL_NAME_PRINT(endpoint->proc->proc_name), opal_strerror(status));
    if (NULL != module->error_cb) {
        module->error_cb(&module->super, MCA_BTL_ERROR_FLAGS_FATAL, endpoint->proc,
                         "btl/ofi: a message to the peer was lost");
    }
}

static void send_done(mca_btl_ofi_frag_t *frag, int status)
{
    mca_btl_base_descriptor_t *des = &frag->base;
    uint32_t flags = des->des_flags;

    if (OPAL_SUCCESS != status) {
        mca_btl_ofi_count(frag->module, MCA_BTL_OFI_CNT_ERROR, 1);
    }
    /* a queued send always reports its completion */
    if (NULL != des->des_cbfunc) {
        des->des_cbfunc(&frag->module->super, frag->endpoint, des, status);
    } else if (OPAL_SUCCESS != status) {
        report_lost_message(frag, status);
    }
    if (flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP) {
        frag_return(frag);
    }
}

/* A receive buffer is never dropped: losing them one by one would end with
 * none posted and the peer's messages stuck in the provider. */
static void repost_or_park(mca_btl_ofi_frag_t *frag)
{
    mca_btl_ofi_context_t *context = frag->context;
    int rc;

    mca_btl_ofi_ctx_lock(&context->lock);
    rc = (0 == context->unposted_count) ? post_recv(context, frag) : OPAL_ERR_OUT_OF_RESOURCE;
    if (OPAL_SUCCESS != rc) {
        opal_list_append(&context->unposted_recvs, &frag->base.super.super);
        ++context->unposted_count;
    }
    mca_btl_ofi_ctx_unlock(&context->lock);
}

static void repost_receives(mca_btl_ofi_context_t *context)
{
    MCA_BTL_OFI_ASSERT_CTX_LOCKED(&context->lock);
    while (context->unposted_count > 0) {
        mca_btl_ofi_frag_t *frag =
            (mca_btl_ofi_frag_t *) opal_list_get_first(&context->unposted_recvs);
        if (OPAL_SUCCESS != post_recv(context, frag)) {
            return;
        }
        opal_list_remove_first(&context->unposted_recvs);
        --context->unposted_count;
    }
}

/* Also the end of a send that failed for good in frag_work, which left
 * its place in the window for this to give back. */
static bool send_complete(mca_btl_ofi_ctx_hdr_t *hdr, size_t len, int status, bool may_call_up)
{
    mca_btl_ofi_frag_t *frag = frag_of(hdr);

    (void) len;
    /* the callbacks of our own kinds are ours: they run anywhere */
    if (!may_call_up && NULL != frag->base.des_cbfunc && MCA_BTL_OFI_KIND_AM == frag->hdr->kind) {
        return false;
    }
    (void) mca_btl_ofi_add64(&frag->tx_context->sends_in_flight, -1);
    if (OPAL_SUCCESS == status && NULL != frag->endpoint) {
        frag->endpoint->addr.send_confirmed = true;
    }
    send_done(frag, status);
    return true;
}

static bool recv_complete(mca_btl_ofi_ctx_hdr_t *hdr, size_t len, int status, bool may_call_up)
{
    mca_btl_ofi_frag_t *frag = frag_of(hdr);

    if (OPAL_SUCCESS == status && len >= sizeof(mca_btl_ofi_am_hdr_t)) {
        const mca_btl_ofi_msg_handler_t *handler = handler_of(frag);
        if (NULL == handler) {
            MCA_BTL_OFI_VERBOSE(1, "dropped a message of unknown kind %d", frag->hdr->kind);
        } else if (handler->calls_up && (!may_call_up || !layer_above_ready())) {
            return false;
        } else {
            handler->fn(frag->module, frag->hdr, len - sizeof(mca_btl_ofi_am_hdr_t));
        }
    }
    repost_or_park(frag);
    return true;
}

/* ------------------------------------------------------------------ */
/* The BTL send interface                                              */

static mca_btl_ofi_frag_t *frag_alloc(mca_btl_ofi_module_t *module,
                                      mca_btl_ofi_endpoint_t *endpoint, size_t size, uint32_t flags)
{
    mca_btl_ofi_context_t *context = mca_btl_ofi_thread_context(module);
    mca_btl_ofi_frag_list_t *list;
    mca_btl_ofi_frag_t *frag;

    mca_btl_ofi_context_entered(context);
    if (OPAL_UNLIKELY(size > mca_btl_ofi_component.max_send_size)) {
        return NULL;
    }
    /* no progress here: ob1 is in the middle of building its request, and
     * a callback run now could find it half made */
    list = (size <= MCA_BTL_OFI_SMALL_FRAG_PAYLOAD) ? &context->small_frags : &context->send_frags;
    frag = (mca_btl_ofi_frag_t *) mca_btl_ofi_list_get(&list->list);
    if (OPAL_UNLIKELY(NULL == frag)) {
        return NULL;
    }
    frag->endpoint = endpoint;
    frag->segment.seg_len = size;
    frag->base.des_flags = flags;
    frag->base.des_cbfunc = NULL;
    frag->base.des_cbdata = NULL;
    frag->base.order = MCA_BTL_NO_ORDER;
    return frag;
}

static mca_btl_base_descriptor_t *mca_btl_ofi_alloc(mca_btl_base_module_t *btl,
                                                    mca_btl_base_endpoint_t *endpoint,
                                                    uint8_t order, size_t size, uint32_t flags)
{
    mca_btl_ofi_frag_t *frag = frag_alloc((mca_btl_ofi_module_t *) btl, endpoint, size, flags);

    (void) order;
    return (NULL == frag) ? NULL : &frag->base;
}

static int mca_btl_ofi_free(mca_btl_base_module_t *btl, mca_btl_base_descriptor_t *des)
{
    mca_btl_ofi_frag_t *frag = (mca_btl_ofi_frag_t *) des;

    (void) btl;
    frag_return(frag);
    return OPAL_SUCCESS;
}

/** Pack up to @p size of the convertor's next bytes at @p dest; returns bytes packed. */
static size_t pack_payload(opal_convertor_t *convertor, void *dest, size_t size)
{
    struct iovec iov = { .iov_base = dest, .iov_len = size };
    uint32_t iov_count = 1;
    size_t packed = size;

    if (0 == size) {
        return 0;
    }
    (void) opal_convertor_pack(convertor, &iov, &iov_count, &packed);
    return packed;
}

static mca_btl_base_descriptor_t *mca_btl_ofi_prepare_src(mca_btl_base_module_t *btl,
                                                          mca_btl_base_endpoint_t *endpoint,
                                                          opal_convertor_t *convertor,
                                                          uint8_t order, size_t reserve,
                                                          size_t *size, uint32_t flags)
{
    size_t max = mca_btl_ofi_component.max_send_size;
    mca_btl_ofi_frag_t *frag;

    (void) order;
    if (reserve > max) {
        return NULL;
    }
    if (reserve + *size > max) {
        *size = max - reserve;
    }
    frag = frag_alloc((mca_btl_ofi_module_t *) btl, endpoint, reserve + *size, flags);
    if (NULL == frag) {
        return NULL;
    }
    *size = pack_payload(convertor, (char *) frag->segment.seg_addr.pval + reserve, *size);
    frag->segment.seg_len = reserve + *size;
    return &frag->base;
}

/*
 * A send completes once its buffer is free again (FI_TRANSMIT_COMPLETE),
 * whatever the endpoint's default, which is delivery-complete for the
 * writes' sake: a delivery-complete send on tcp;ofi_rxm waits for the
 * receiver's provider to acknowledge it, and a receiver that took the
 * message and went on to block outside MPI (the children of a spawn, from
 * their connect's broadcast into PMIx_Connect) never does, so the sender
 * waited for good.  ob1 needs only the buffer back.
 */
static ssize_t post_send(mca_btl_ofi_frag_t *frag, mca_btl_ofi_context_t *context, bool inject)
{
    size_t len = sizeof(mca_btl_ofi_am_hdr_t) + frag->segment.seg_len;
    struct iovec iov = { .iov_base = frag->hdr, .iov_len = len };
    struct fi_msg msg = { .msg_iov = &iov,
                          .desc = &frag->desc,
                          .iov_count = 1,
                          .addr = frag->endpoint->addr.fi,
                          .context = &frag->ctx.fi_ctx };

    if (inject) {
        return fi_inject(context->tx, frag->hdr, len, frag->endpoint->addr.fi);
    }
    return fi_sendmsg(context->tx, &msg, FI_COMPLETION | FI_TRANSMIT_COMPLETE);
}

static void count_sent(mca_btl_ofi_module_t *module, mca_btl_ofi_frag_t *frag)
{
    mca_btl_ofi_count(module, MCA_BTL_OFI_CNT_SEND, 1);
    mca_btl_ofi_count(module, MCA_BTL_OFI_CNT_SEND_BYTES, frag->segment.seg_len);
}

static void report_send_error(mca_btl_ofi_module_t *module, mca_btl_ofi_frag_t *frag, ssize_t rc)
{
    MCA_BTL_OFI_VERBOSE(1, "sending to %s failed: %s",
                        OPAL_NAME_PRINT(frag->endpoint->proc->proc_name), fi_strerror((int) -rc));
    mca_btl_ofi_count(module, MCA_BTL_OFI_CNT_ERROR, 1);
}

/**
 * Reserve a place in the send window (an injected send needs none: it
 * reports no completion).  The window bounds what a receiver has to take
 * unexpected from one sender: sockets (libfabric 1.17) counts buffered
 * unexpected messages against its receive queue, and once that is full it
 * leaves the rest of a burst in the connection for good (p2p_flood hung in
 * about one run of 60 with no bound, never in 600 with bursts of 48).
 */
static inline bool window_open(mca_btl_ofi_context_t *context, bool inject)
{
    if (inject) {
        return true;
    }
    if (context->sends_in_flight >= context->send_window) {
        return false;
    }
    (void) mca_btl_ofi_add64(&context->sends_in_flight, 1);
    return true;
}

/* Until one send to the peer has completed, its connection may not exist,
 * and an injected send would hide, as done, a message that waits for it:
 * the progress thread watches only sends in flight. */
static inline bool can_inject(const mca_btl_ofi_module_t *module, const mca_btl_ofi_frag_t *frag)
{
    size_t len = sizeof(mca_btl_ofi_am_hdr_t) + frag->segment.seg_len;

    return module->send_inject && len <= module->inject_size && NULL != frag->endpoint
           && frag->endpoint->addr.send_confirmed;
}

/**
 * Send a filled fragment.  When the provider's queue is full the fragment
 * waits in the context's pending list and goes out from progress: ob1 5.0
 * cannot retry every control message it hands us (a refused ACK comes back
 * from its pending list with a wrong length), so a send we accept is never
 * refused later.  With INJECT_ONLY (sendi with nobody else to progress) a
 * fragment that cannot go out by inject now is not posted or queued: it
 * comes back OPAL_ERR_RESOURCE_BUSY.  Returns 1 when the fragment went out
 * by inject and is complete, 0 when it is in flight or pending, an OPAL
 * error otherwise.
 */
static int send_frag(mca_btl_ofi_module_t *module, mca_btl_ofi_frag_t *frag, mca_btl_base_tag_t tag,
                     mca_btl_ofi_msg_kind_t kind, bool may_inject, bool inject_only)
{
    mca_btl_ofi_context_t *context = mca_btl_ofi_thread_context(module);
    bool inject = may_inject && can_inject(module, frag);
    ssize_t rc = -FI_EAGAIN;

    if (OPAL_UNLIKELY(NULL == frag->endpoint || !frag->endpoint->addr.reachable)) {
        return OPAL_ERR_UNREACH;
    }
    if (inject_only && !inject) {
        return OPAL_ERR_RESOURCE_BUSY;
    }
    frag->hdr->src_jobid = OPAL_PROC_MY_NAME.jobid;
    frag->hdr->src_vpid = OPAL_PROC_MY_NAME.vpid;
    frag->hdr->tag = tag;
    frag->hdr->kind = (uint8_t) kind;
    frag->tx_context = context;

    /* behind fragments already waiting, to keep the order */
    if (OPAL_LIKELY(0 == context->pending_count && window_open(context, inject))) {
        for (int attempt = 0; attempt < BTL_OFI_SEND_RETRIES; ++attempt) {
            mca_btl_ofi_post_begin(context);
            rc = post_send(frag, context, inject);
            mca_btl_ofi_post_end(context);
            if (-FI_EAGAIN != rc) {
                break;
            }
            mca_btl_ofi_count(module, MCA_BTL_OFI_CNT_RETRY, 1);
            mca_btl_ofi_context_poll(context);
        }
        if (0 != rc && !inject) {
            (void) mca_btl_ofi_add64(&context->sends_in_flight, -1);
        }
    }
    if (OPAL_LIKELY(0 == rc)) {
        count_sent(module, frag);
        mca_btl_ofi_sockets_posted(frag->endpoint);
        mca_btl_ofi_progress_sent();
        return inject ? 1 : 0;
    }
    if (-FI_EAGAIN != rc) {
        report_send_error(module, frag, rc);
        return OPAL_ERROR;
    }
    if (inject_only) {
        return OPAL_ERR_RESOURCE_BUSY;
    }
    /* counted when accepted: ob1 may report the send done before it leaves */
    count_sent(module, frag);
    frag->post_errors = 0;
    mca_btl_ofi_ctx_lock(&context->lock);
    opal_list_append(&context->pending_sends, &frag->base.super.super);
    ++context->pending_count;
    mca_btl_ofi_ctx_unlock(&context->lock);
    mca_btl_ofi_progress_sent();
    return 0;
}

/* A fragment on the pending list was accepted from ob1 already, and ob1
 * ignores the status of most control-message completions: failing it at the
 * first error would leave the peer waiting for good.  A post that failed
 * (not EAGAIN) is therefore tried again on later progress calls, and only
 * after this many failures is the fragment completed with an error. */
#define BTL_OFI_PENDING_POST_ERRORS 8

static void pending_pop(mca_btl_ofi_context_t *context)
{
    opal_list_remove_first(&context->pending_sends);
    --context->pending_count;
}

static int drain_pending(mca_btl_ofi_context_t *context, mca_btl_ofi_event_t *failed,
                         int max_failed)
{
    int nfailed = 0;

    MCA_BTL_OFI_ASSERT_CTX_LOCKED(&context->lock);
    while (context->pending_count > 0 && nfailed < max_failed && window_open(context, false)) {
        mca_btl_ofi_frag_t *frag =
            (mca_btl_ofi_frag_t *) opal_list_get_first(&context->pending_sends);
        ssize_t rc = post_send(frag, context, false);

        if (0 == rc) {
            pending_pop(context);
            mca_btl_ofi_sockets_posted(frag->endpoint);
            continue;
        }
        if (-FI_EAGAIN == rc) {
            (void) mca_btl_ofi_add64(&context->sends_in_flight, -1);
            mca_btl_ofi_count(frag->module, MCA_BTL_OFI_CNT_RETRY, 1);
            break;
        }
        /* counted as an error once, when it fails for good (send_done) */
        MCA_BTL_OFI_VERBOSE(1, "sending to %s failed (try %d of %d): %s",
                            OPAL_NAME_PRINT(frag->endpoint->proc->proc_name), frag->post_errors + 1,
                            BTL_OFI_PENDING_POST_ERRORS, fi_strerror((int) -rc));
        if (++frag->post_errors < BTL_OFI_PENDING_POST_ERRORS) {
            (void) mca_btl_ofi_add64(&context->sends_in_flight, -1);
            break; /* in order: nothing behind it goes first */
        }
        /* its window place goes back in send_complete */
        pending_pop(context);
        failed[nfailed++] = (mca_btl_ofi_event_t){ &frag->ctx, 0, OPAL_ERROR };
    }
    return nfailed;
}

/* The context's work hook: runs from progress with the context lock held. */
static int frag_work(mca_btl_ofi_context_t *context, mca_btl_ofi_event_t *failed, int max)
{
    if (context->unposted_count > 0) {
        repost_receives(context);
    }
    if (context->pending_count > 0) {
        return drain_pending(context, failed, max);
    }
    return 0;
}

static int mca_btl_ofi_send(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                            mca_btl_base_descriptor_t *des, mca_btl_base_tag_t tag)
{
    mca_btl_ofi_frag_t *frag = (mca_btl_ofi_frag_t *) des;
    bool may_inject = !(des->des_flags & MCA_BTL_DES_SEND_ALWAYS_CALLBACK);
    int rc;

    frag->endpoint = endpoint;
    rc = send_frag((mca_btl_ofi_module_t *) btl, frag, tag, MCA_BTL_OFI_KIND_AM, may_inject, false);
    if (1 == rc && (des->des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP)) {
        frag_return(frag);
    }
    return rc;
}

static int mca_btl_ofi_sendi(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                             opal_convertor_t *convertor, void *header, size_t header_size,
                             size_t payload_size, uint8_t order, uint32_t flags,
                             mca_btl_base_tag_t tag, mca_btl_base_descriptor_t **descriptor)
{
    size_t total = header_size + payload_size;
    mca_btl_ofi_frag_t *frag;
    int rc;

    (void) order;
    frag = frag_alloc((mca_btl_ofi_module_t *) btl, endpoint, total,
                      flags | MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    if (NULL == frag) {
        if (NULL != descriptor) {
            *descriptor = NULL;
        }
        return OPAL_ERR_RESOURCE_BUSY;
    }
    memcpy(frag->segment.seg_addr.pval, header, header_size);
    if (payload_size > 0) {
        size_t packed = pack_payload(convertor, (char *) frag->segment.seg_addr.pval + header_size,
                                     payload_size);
        frag->segment.seg_len = header_size + packed;
    }
    /* sendi's success completes the request: with nobody to move a posted
     * send while the sender is away (a connect waits in PMIx_Connect right
     * after one), the peer would wait for it; ob1's send waits for ours */
    rc = send_frag((mca_btl_ofi_module_t *) btl, frag, tag, MCA_BTL_OFI_KIND_AM, true,
                   mca_btl_ofi_component.sends_need_caller);
    if (1 == rc) {
        frag_return(frag);
        return OPAL_SUCCESS;
    }
    if (OPAL_SUCCESS == rc) {
        return OPAL_SUCCESS; /* in flight or pending; freed by us on completion */
    }
    /* the data is packed already: hand the fragment over for ob1 to send */
    frag->base.des_flags = flags;
    if (NULL != descriptor) {
        *descriptor = &frag->base;
    } else {
        frag_return(frag);
    }
    return OPAL_ERR_RESOURCE_BUSY;
}

mca_btl_ofi_frag_t *mca_btl_ofi_frag_alloc_internal(mca_btl_ofi_module_t *module,
                                                    mca_btl_ofi_endpoint_t *endpoint, size_t size)
{
    return frag_alloc(module, endpoint, size, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
}

int mca_btl_ofi_frag_send_internal(mca_btl_ofi_module_t *module, mca_btl_ofi_frag_t *frag,
                                   mca_btl_ofi_msg_kind_t kind)
{
    bool may_inject = !(frag->base.des_flags & MCA_BTL_DES_SEND_ALWAYS_CALLBACK);
    int rc = send_frag(module, frag, 0, kind, may_inject, false);

    if (0 != rc) {
        frag_return(frag);
    }
    return rc;
}

void mca_btl_ofi_frag_setup_module(mca_btl_ofi_module_t *module)
{
    module->super.btl_alloc = mca_btl_ofi_alloc;
    module->super.btl_free = mca_btl_ofi_free;
    module->super.btl_prepare_src = mca_btl_ofi_prepare_src;
    module->super.btl_send = mca_btl_ofi_send;
    module->super.btl_sendi = mca_btl_ofi_sendi;
    module->super.btl_flags |= MCA_BTL_FLAGS_SEND;
}
