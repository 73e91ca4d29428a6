/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * Put, get, flush, and the one posting path every one-sided operation
 * (atomics included) goes through: a completion object from the calling
 * thread's context (mca_btl_ofi_comp_get), one libfabric call through
 * mca_btl_ofi_post(), and on any failure the object goes back and an OPAL
 * error code is returned: osc/rdma retries on OPAL_ERR_OUT_OF_RESOURCE
 * and reports anything else.  The completion object carries
 * comp_complete, which progress calls when the operation is done.
 */

#include "opal_config.h"

#include <sched.h>
#include <string.h>

#include "opal/runtime/opal_progress.h"
#include "opal/util/error.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_ofi.h"

/** EAGAIN retries, each after a round of progress, before we give up. */
#define BTL_OFI_POST_RETRIES 8

#define BTL_OFI_COMP_PAYLOAD (3 * sizeof(uint64_t))

OBJ_CLASS_INSTANCE(mca_btl_ofi_comp_t, opal_free_list_item_t, NULL, NULL);

static bool comp_complete(mca_btl_ofi_ctx_hdr_t *hdr, size_t len, int status, bool may_call_up);

/* What an item keeps for its life: its context, its callback and its
 * payload; comp_get_on fills in the rest for each operation. */
static int comp_init(opal_free_list_item_t *item, void *arg)
{
    mca_btl_ofi_comp_t *comp = (mca_btl_ofi_comp_t *) item;

    comp->context = arg;
    comp->ctx.complete = comp_complete;
    comp->operands = (uint64_t *) item->ptr;
    comp->operand_desc =
        (NULL != item->registration) ? ((mca_btl_ofi_reg_t *) item->registration)->desc : NULL;
    return OPAL_SUCCESS;
}

/* The payload holds atomic operands and results, which the provider reads
 * and writes after the call returns; registered when the provider insists
 * on local registration. */
int mca_btl_ofi_rdma_context_init(mca_btl_ofi_module_t *module, mca_btl_ofi_context_t *context)
{
    int rc;

    OBJ_CONSTRUCT(&context->comps, opal_free_list_t);
    context->comps_ready = true;
    rc = opal_free_list_init(&context->comps, sizeof(mca_btl_ofi_comp_t), opal_cache_line_size,
                             OBJ_CLASS(mca_btl_ofi_comp_t), BTL_OFI_COMP_PAYLOAD, sizeof(uint64_t),
                             128, -1, 128, NULL,
                             module->mr_local ? MCA_RCACHE_ACCESS_LOCAL_WRITE : 0,
                             module->mr_local ? module->rcache : NULL, comp_init, context);
    if (OPAL_SUCCESS != rc) {
        mca_btl_ofi_rdma_context_fini(context);
    }
    return rc;
}

void mca_btl_ofi_rdma_context_fini(mca_btl_ofi_context_t *context)
{
    if (context->comps_ready) {
        OBJ_DESTRUCT(&context->comps);
        context->comps_ready = false;
    }
}

/* ------------------------------------------------------------------ */
/* Completions                                                         */

static inline void comp_return(mca_btl_ofi_context_t *context, mca_btl_ofi_comp_t *comp)
{
    if (mca_btl_ofi_app_threaded()) {
        opal_free_list_return_mt(&context->comps, &comp->super);
    } else {
        opal_free_list_return_st(&context->comps, &comp->super);
    }
}

static inline void endpoint_op_done(mca_btl_ofi_comp_t *comp)
{
    mca_btl_ofi_app_add64(&comp->context->outstanding, -1);
    if (0 != comp->bytes) {
        mca_btl_ofi_app_add64(&comp->context->outstanding_bytes, -(int64_t) comp->bytes);
    }
    mca_btl_ofi_app_add64(&comp->endpoint->outstanding, -1);
    if (NULL != comp->rail_endpoint) {
        mca_btl_ofi_app_add64(&comp->rail_endpoint->outstanding, -1);
    }
}

static bool take_over(mca_btl_ofi_comp_t *comp, int status);
static void stripe_chunk_done(mca_btl_ofi_comp_t *stripe, int status);
static void unmovable_failed(mca_btl_ofi_comp_t *comp, int status);

/** comp->rail of an operation posted on the lead's same-host module */
#define BTL_OFI_SAME_HOST_RAIL (-1)

/* An atomic's result is 4 or 8 bytes: copies of a size the compiler knows
 * need no call */
static inline void copy_result(void *to, const uint64_t *result, size_t size)
{
    if (8 == size) {
        memcpy(to, result, 8);
    } else {
        memcpy(to, result, 4);
    }
}

static bool comp_complete(mca_btl_ofi_ctx_hdr_t *hdr, size_t len, int status, bool may_call_up)
{
    mca_btl_ofi_comp_t *comp =
        (mca_btl_ofi_comp_t *) ((char *) hdr - offsetof(mca_btl_ofi_comp_t, ctx));
    mca_btl_base_rdma_completion_fn_t cbfunc = comp->cbfunc;
    mca_btl_ofi_module_t *module = comp->module;
    mca_btl_ofi_endpoint_t *endpoint = comp->endpoint;
    void *local_address = comp->local_address;
    mca_btl_base_registration_handle_t *local_handle = comp->local_handle;
    void *cbcontext = comp->cbcontext, *cbdata = comp->cbdata;

    (void) len;
    if (!may_call_up) {
        return false;
    }
    if (OPAL_UNLIKELY(comp->watched)) {
        mca_btl_ofi_rail_unwatch(endpoint, comp->rail);
    }
    if (OPAL_UNLIKELY(OPAL_SUCCESS != status)
        && (module->num_rails > 1 || BTL_OFI_SAME_HOST_RAIL == comp->rail)) {
        if (comp->movable && take_over(comp, status)) {
            return true;
        }
        if (!comp->movable) {
            unmovable_failed(comp, status);
        }
    }
    if (OPAL_SUCCESS != status) {
        MCA_BTL_OFI_VERBOSE(1, "operation to %s failed",
                            NULL != endpoint->proc ? OPAL_NAME_PRINT(endpoint->proc->proc_name)
                                                   : "?");
    }
    if (OPAL_SUCCESS == status && comp->result_size > 0) {
        copy_result(local_address, comp->operands + 2, comp->result_size);
    }
    mca_btl_ofi_comp_t *stripe = comp->stripe;

    endpoint_op_done(comp);
    comp_return(comp->context, comp);
    if (OPAL_SUCCESS != status) {
        mca_btl_ofi_count(module, MCA_BTL_OFI_CNT_ERROR, 1);
    }
    if (NULL != stripe) {
        stripe_chunk_done(stripe, status);
    } else if (NULL != cbfunc) {
        cbfunc(&module->super, endpoint, local_address, local_handle, cbcontext, cbdata, status);
    }
    return true;
}

/* ------------------------------------------------------------------ */
/* Posting                                                             */

static mca_btl_ofi_comp_t *comp_get_on(mca_btl_ofi_module_t *module, mca_btl_ofi_context_t *context,
                                       mca_btl_ofi_endpoint_t *endpoint, void *local_address,
                                       mca_btl_base_registration_handle_t *local_handle,
                                       mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                                       void *cbdata)
{
    mca_btl_ofi_comp_t *comp;

    mca_btl_ofi_context_entered(context);
    if (OPAL_UNLIKELY(context->outstanding >= mca_btl_ofi_component.progress_threshold)) {
        mca_btl_ofi_context_poll(context);
    }
    comp = (mca_btl_ofi_comp_t *) (mca_btl_ofi_app_threaded()
                                       ? opal_free_list_get_mt(&context->comps)
                                       : opal_free_list_get_st(&context->comps));
    if (OPAL_UNLIKELY(NULL == comp)) {
        return NULL;
    }
    comp->module = module;
    comp->endpoint = endpoint;
    comp->addr = endpoint->addr.fi;
    comp->rail_endpoint = NULL;
    comp->rail = 0;
    comp->stripe = NULL;
    comp->movable = false;
    comp->watched = false;
    comp->result_size = 0;
    comp->bytes = 0;
    comp->local_address = local_address;
    comp->local_handle = local_handle;
    comp->cbfunc = cbfunc;
    comp->cbcontext = cbcontext;
    comp->cbdata = cbdata;
    return comp;
}

/* A completion for rail @p r of the lead: from the rail's context, posted
 * to the peer as the rail's module knows it. */
static mca_btl_ofi_comp_t *
comp_get_on_rail(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint, int r,
                 void *local_address, mca_btl_base_registration_handle_t *local_handle,
                 mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata)
{
    mca_btl_ofi_comp_t *comp =
        comp_get_on(module, mca_btl_ofi_thread_context(module->rails[r]), endpoint, local_address,
                    local_handle, cbfunc, cbcontext, cbdata);

    if (OPAL_LIKELY(NULL != comp)) {
        if (r > 0) {
            comp->rail_endpoint = endpoint->rails.ep[r];
            comp->addr = comp->rail_endpoint->addr.fi;
        }
        comp->rail = r;
    }
    return comp;
}

mca_btl_ofi_comp_t *mca_btl_ofi_comp_get(mca_btl_ofi_module_t *module,
                                         mca_btl_ofi_endpoint_t *endpoint, void *local_address,
                                         mca_btl_base_registration_handle_t *local_handle,
                                         mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                                         void *cbdata)
{
    return comp_get_on(module, mca_btl_ofi_thread_context(module), endpoint, local_address,
                       local_handle, cbfunc, cbcontext, cbdata);
}

/* The payload and its descriptor come from the same-host module's
 * context, so the provider finds them registered on its own domain; the
 * operation counts as outstanding on both endpoints, so a flush of the
 * lead's and the same-host module's stall watch both see it. */
mca_btl_ofi_comp_t *mca_btl_ofi_comp_get_same_host(mca_btl_ofi_module_t *module,
                                                   mca_btl_ofi_endpoint_t *endpoint,
                                                   void *local_address,
                                                   mca_btl_base_rdma_completion_fn_t cbfunc,
                                                   void *cbcontext, void *cbdata)
{
    mca_btl_ofi_module_t *shm = module->same_host;
    mca_btl_ofi_comp_t *comp = comp_get_on(module, mca_btl_ofi_thread_context(shm), endpoint,
                                           local_address, NULL, cbfunc, cbcontext, cbdata);

    if (OPAL_LIKELY(NULL != comp)) {
        comp->addr = endpoint->same_host.ep->addr.fi;
        comp->rail_endpoint = endpoint->same_host.ep;
        comp->rail = BTL_OFI_SAME_HOST_RAIL;
    }
    return comp;
}

/**
 * Post through @p post, retrying EAGAIN after progress a bounded number
 * of times, under the context lock when posts take it and @p post calls
 * the provider itself.  On success the operation is counted as
 * outstanding; on failure the completion goes back to its list.
 */
static int post_counted(mca_btl_ofi_comp_t *comp, mca_btl_ofi_post_fn_t post, void *arg, bool lock)
{
    mca_btl_ofi_context_t *context = comp->context;
    ssize_t rc;

    /* counted first: the completion may be reaped by another thread before
     * post() even returns */
    mca_btl_ofi_app_add64(&context->outstanding, 1);
    if (0 != comp->bytes) {
        mca_btl_ofi_app_add64(&context->outstanding_bytes, (int64_t) comp->bytes);
    }
    mca_btl_ofi_app_add64(&comp->endpoint->outstanding, 1);
    if (NULL != comp->rail_endpoint) {
        mca_btl_ofi_app_add64(&comp->rail_endpoint->outstanding, 1);
    }
    for (int attempt = 0;; ++attempt) {
        mca_btl_ofi_app_add64(&context->app_posting, 1);
        if (lock) {
            mca_btl_ofi_post_begin(context);
        }
        rc = post(comp, arg);
        if (lock) {
            mca_btl_ofi_post_end(context);
        }
        mca_btl_ofi_app_add64(&context->app_posting, -1);
        if (OPAL_LIKELY(0 == rc)) {
            /* the peer as the module it was posted on knows it: that
             * module's provider made the connection */
            mca_btl_ofi_sockets_posted(NULL != comp->rail_endpoint ? comp->rail_endpoint
                                                                   : comp->endpoint);
            return OPAL_SUCCESS;
        }
        if (-FI_EAGAIN != rc || attempt >= BTL_OFI_POST_RETRIES) {
            break;
        }
        mca_btl_ofi_count(comp->module, MCA_BTL_OFI_CNT_RETRY, 1);
        mca_btl_ofi_context_poll(context);
    }
    endpoint_op_done(comp);
    comp_return(context, comp);
    if (-FI_EAGAIN == rc) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    MCA_BTL_OFI_VERBOSE(1, "posting an operation failed: %s", fi_strerror((int) -rc));
    mca_btl_ofi_count(comp->module, MCA_BTL_OFI_CNT_ERROR, 1);
    return OPAL_ERROR;
}

int mca_btl_ofi_post(mca_btl_ofi_comp_t *comp, mca_btl_ofi_post_fn_t post, void *arg)
{
    return post_counted(comp, post, arg, true);
}

int mca_btl_ofi_post_as_message(mca_btl_ofi_comp_t *comp, mca_btl_ofi_post_fn_t post, void *arg)
{
    return post_counted(comp, post, arg, false);
}

typedef struct {
    void *local;
    size_t size;
    void *desc;
    uint64_t raddr;
    uint64_t rkey;
    bool inject;
} rma_args_t;

/** One contiguous RMA transfer as the *msg calls take it. */
typedef struct {
    struct iovec iov;
    struct fi_rma_iov riov;
    struct fi_msg_rma msg;
} rma_msg_t;

static void rma_msg_fill(rma_msg_t *m, mca_btl_ofi_comp_t *comp, rma_args_t *a)
{
    m->iov = (struct iovec){ .iov_base = a->local, .iov_len = a->size };
    m->riov = (struct fi_rma_iov){ .addr = a->raddr, .len = a->size, .key = a->rkey };
    m->msg = (struct fi_msg_rma){
        .msg_iov = &m->iov,
        .desc = &a->desc,
        .iov_count = 1,
        .addr = comp->addr,
        .rma_iov = &m->riov,
        .rma_iov_count = 1,
        .context = &comp->ctx.fi_ctx,
    };
}

/* What a write or a read names for MPI's remote completion: nothing where
 * the provider completes it at the origin (module->origin_rma). */
static inline uint64_t remote_completion(const mca_btl_ofi_comp_t *comp)
{
    return comp->module->origin_rma ? 0 : FI_DELIVERY_COMPLETE;
}

static ssize_t post_write(mca_btl_ofi_comp_t *comp, void *arg)
{
    rma_args_t *a = arg;
    rma_msg_t m;

    rma_msg_fill(&m, comp, a);
    /* the buffer is free on return of an injected write; either way the
     * completion is reported once the data is delivered */
    return fi_writemsg(comp->context->tx, &m.msg,
                       (a->inject ? FI_INJECT : 0) | FI_COMPLETION | remote_completion(comp));
}

/* Named per call like writes: the endpoint's default is transmit-complete
 * on shm (for sends).  Where the origin copies (origin_rma) the target's
 * key is not checked: MPI forbids access to a freed window anyway. */
static ssize_t post_read(mca_btl_ofi_comp_t *comp, void *arg)
{
    rma_msg_t m;

    rma_msg_fill(&m, comp, arg);
    return fi_readmsg(comp->context->tx, &m.msg, FI_COMPLETION | remote_completion(comp));
}

/* ------------------------------------------------------------------ */
/* Rails: the lead module's puts and gets on every NIC                 */

static void count_rma(mca_btl_ofi_module_t *module, bool is_put, size_t size)
{
    mca_btl_ofi_app_count(module, is_put ? MCA_BTL_OFI_CNT_PUT : MCA_BTL_OFI_CNT_GET, 1);
    mca_btl_ofi_app_count(module, is_put ? MCA_BTL_OFI_CNT_PUT_BYTES : MCA_BTL_OFI_CNT_GET_BYTES,
                          size);
}

/* The next rail in service for the peer, round-robin; -1 when none is. */
static int next_rail_up(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint)
{
    uint32_t up = (uint32_t) endpoint->rails.up;

    for (int i = 0; i < module->num_rails; ++i) {
        int r = (int) (endpoint->rails.next++ % (uint32_t) module->num_rails);

        if (up & (1u << r)) {
            return r;
        }
    }
    return -1;
}

static int rails_up_count(const mca_btl_ofi_module_t *module,
                          const mca_btl_ofi_endpoint_t *endpoint, int *which)
{
    uint32_t up = (uint32_t) endpoint->rails.up;
    int n = 0;

    for (int r = 0; r < module->num_rails; ++r) {
        if (up & (1u << r)) {
            which[n++] = r;
        }
    }
    return n;
}

static void *local_desc_on(mca_btl_base_registration_handle_t *handle, int rail)
{
    if (NULL == handle) {
        return NULL;
    }
    return ((mca_btl_ofi_reg_t *) ((char *) handle - offsetof(mca_btl_ofi_reg_t, handle)))
        ->rail_desc[rail];
}

/** What one piece of a put or get (all of it, or a chunk of a striped
 * one) needs to be posted, and posted again on another rail. */
typedef struct {
    bool is_put;
    bool inject;
    void *local;
    size_t size;
    mca_btl_base_registration_handle_t *local_handle;
    mca_btl_base_registration_handle_t *remote_handle;
    uint64_t remote_address;
    mca_btl_ofi_comp_t *stripe; /**< the whole operation of a chunk, else NULL */
    mca_btl_base_rdma_completion_fn_t cbfunc;
    void *cbcontext;
    void *cbdata;
} piece_t;

/* The completion remembers the piece, so that a failure can move it. */
static void comp_keep_piece(mca_btl_ofi_comp_t *comp, const piece_t *p)
{
    comp->movable = true;
    comp->stripe = p->stripe;
    comp->is_put = p->is_put;
    comp->size = p->size;
    comp->remote_handle = p->remote_handle;
    comp->remote_address = p->remote_address;
}

static piece_t piece_of_comp(const mca_btl_ofi_comp_t *comp)
{
    return (piece_t){ .is_put = comp->is_put,
                      .inject = false,
                      .local = comp->local_address,
                      .size = comp->size,
                      .local_handle = comp->local_handle,
                      .remote_handle = comp->remote_handle,
                      .remote_address = comp->remote_address,
                      .stripe = comp->stripe,
                      .cbfunc = comp->cbfunc,
                      .cbcontext = comp->cbcontext,
                      .cbdata = comp->cbdata };
}

/*
 * Piece @p p on rail @p r.  Its completion comes from the rail's context,
 * so the rail's progress reads it; it is counted outstanding on the lead's
 * endpoint (flush) and on the rail's (that module's stall watch).
 */
static int post_piece(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint, int r,
                      const piece_t *p)
{
    mca_btl_ofi_module_t *rail = module->rails[r];
    rma_args_t args = { .local = p->local, .size = p->size, .inject = p->inject };
    mca_btl_ofi_comp_t *comp;
    int rc;

    comp = comp_get_on_rail(module, endpoint, r, p->local, p->local_handle, p->cbfunc, p->cbcontext,
                            p->cbdata);
    if (OPAL_UNLIKELY(NULL == comp)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    comp_keep_piece(comp, p);
    args.desc = local_desc_on(p->local_handle, r);
    args.raddr = mca_btl_ofi_remote_addr(p->remote_handle, p->remote_address);
    args.rkey = (0 == r) ? p->remote_handle->rkey : p->remote_handle->rail_keys[r - 1];
    mca_btl_ofi_rail_watch(comp, r, args.raddr, args.rkey, p->size);
    comp->bytes = p->size;
    rc = mca_btl_ofi_post(comp, p->is_put ? post_write : post_read, &args);
    if (OPAL_LIKELY(OPAL_SUCCESS == rc)) {
        count_rma(rail, p->is_put, p->size);
    } else {
        mca_btl_ofi_rail_unwatch(endpoint, r);
    }
    return rc;
}

static int32_t chunks_done(mca_btl_ofi_comp_t *stripe, int32_t n)
{
    if (mca_btl_ofi_app_threaded()) {
        return opal_atomic_sub_fetch_32(&stripe->chunks_left, n);
    }
    stripe->chunks_left -= n;
    return stripe->chunks_left;
}

/* A chunk is done: the operation's one callback comes with the last. */
static void stripe_chunk_done(mca_btl_ofi_comp_t *stripe, int status)
{
    mca_btl_base_rdma_completion_fn_t cbfunc = stripe->cbfunc;
    mca_btl_ofi_module_t *module = stripe->module;
    mca_btl_ofi_endpoint_t *endpoint = stripe->endpoint;
    void *local_address = stripe->local_address;
    mca_btl_base_registration_handle_t *local_handle = stripe->local_handle;
    void *cbcontext = stripe->cbcontext, *cbdata = stripe->cbdata;

    if (OPAL_SUCCESS != status) {
        stripe->stripe_status = status; /* the operation failed if any chunk did */
    }
    if (chunks_done(stripe, 1) > 0) {
        return;
    }
    status = stripe->stripe_status;
    comp_return(stripe->context, stripe);
    if (NULL != cbfunc) {
        cbfunc(&module->super, endpoint, local_address, local_handle, cbcontext, cbdata, status);
    }
}

/* Rail @p r no longer reaches the peer: out of service for it, once. */
static void rail_down(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint, int r,
                      int status)
{
    int32_t bit = (int32_t) (1u << r), before;

    if (mca_btl_ofi_app_threaded()) {
        before = opal_atomic_fetch_and_32(&endpoint->rails.up, ~bit);
    } else {
        before = endpoint->rails.up;
        endpoint->rails.up &= ~bit;
    }
    if (0 == (before & bit)) {
        return;
    }
    mca_btl_ofi_count(module->rails[r], MCA_BTL_OFI_CNT_RAIL_DOWN, 1);
    MCA_BTL_OFI_VERBOSE(1, "rail %d (%s) to %s failed (%s): out of service for that peer", r,
                        module->rails[r]->device_name,
                        NULL != endpoint->proc ? OPAL_NAME_PRINT(endpoint->proc->proc_name) : "?",
                        opal_strerror(status));
    if (0 == (before & ~bit)) {
        opal_show_help("help-mpi-btl-ofi.txt", "no rail left", true, opal_process_info.nodename,
                       NULL != endpoint->proc ? OPAL_NAME_PRINT(endpoint->proc->proc_name) : "?",
                       opal_strerror(status), module->rails[r]->device_name);
        /* every NIC reported failing: the peer is lost for one-sided
         * traffic, and osc/rdma would drop the error (it ignores a put's or
         * get's status); the layer above ends the job, or with ULFM marks
         * the peer failed, instead of the job computing on wrong data or
         * waiting for operations the provider will never complete */
        if (NULL != module->error_cb) {
            module->error_cb(&module->super, MCA_BTL_ERROR_FLAGS_FATAL, endpoint->proc,
                             "btl/ofi: every NIC to the peer failed");
        }
    }
}

/*
 * Rail @p r is given up for the peer, for the whole job.  On rail 0 an
 * atomic failed, or the rail stopped serving the peer: an atomic cannot go
 * again elsewhere (it may have been applied before the error, and another
 * NIC's endpoint applies atomics apart from this one's), and osc/rdma
 * ignores an atomic's status (its locks are atomics too).  On another rail
 * pieces wait that the provider will neither complete nor fail
 * (rail_verdict).  Either way the layer above is told the peer is lost
 * rather than the job going on with a wrong value or a flush that never
 * returns.
 */
static void lose_rail(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint, int r,
                      int status)
{
    const char *peer = NULL != endpoint->proc ? OPAL_NAME_PRINT(endpoint->proc->proc_name) : "?";

    if (NULL != endpoint->rails.watch) {
        endpoint->rails.watch[r].lost = true; /* the stall watch has nothing left to find */
    }
    rail_down(module, endpoint, r, status);
    if (0 == endpoint->rails.up) {
        return; /* rail_down reported the peer lost */
    }
    /* literal topics, so that tests/params/help_topics.sh can match each
     * with its text and arguments */
    if (0 == r) {
        opal_show_help("help-mpi-btl-ofi.txt", "atomic rail lost", true, opal_process_info.nodename,
                       peer, opal_strerror(status), module->rails[r]->device_name);
    } else {
        opal_show_help("help-mpi-btl-ofi.txt", "rail silent", true, opal_process_info.nodename,
                       peer, opal_strerror(status), module->rails[r]->device_name);
    }
    if (NULL != module->error_cb) {
        module->error_cb(&module->super, MCA_BTL_ERROR_FLAGS_FATAL, endpoint->proc,
                         0 == r ? "btl/ofi: an atomic to the peer failed on its NIC"
                                : "btl/ofi: operations to the peer wait on a NIC that went silent");
    }
}

/* Like a lost rail 0: osc/rdma would go on with a wrong fetched value. */
static void same_host_atomic_lost(mca_btl_ofi_comp_t *comp, int status)
{
    mca_btl_ofi_module_t *module = comp->module;
    mca_btl_ofi_endpoint_t *endpoint = comp->endpoint;

    opal_show_help("help-mpi-btl-ofi.txt", "same-host atomic failed", true,
                   opal_process_info.nodename,
                   NULL != endpoint->proc ? OPAL_NAME_PRINT(endpoint->proc->proc_name) : "?",
                   opal_strerror(status));
    if (NULL != module->error_cb) {
        module->error_cb(&module->super, MCA_BTL_ERROR_FLAGS_FATAL, endpoint->proc,
                         "btl/ofi: an atomic to a same-host peer failed");
    }
}

/* An operation that cannot go on another rail failed: an atomic, or a
 * probe.  Atomics use rail 0 only, so one elsewhere is a probe, and its
 * failure costs only its rail. */
static void unmovable_failed(mca_btl_ofi_comp_t *comp, int status)
{
    if (BTL_OFI_SAME_HOST_RAIL == comp->rail) {
        same_host_atomic_lost(comp, status);
        return;
    }
    if (comp->rail > 0) {
        rail_down(comp->module, comp->endpoint, comp->rail, status);
        return;
    }
    lose_rail(comp->module, comp->endpoint, 0, status);
}

/*
 * How long a rail may refuse every post to a peer before it goes out of
 * service for that peer.  Refusals are normally a full queue that
 * progress drains within microseconds; but once the connection behind a
 * rail broke, rxm answers "try again" to every post while each
 * reconnection fails, and where nothing was in flight on that rail no
 * completion ever reports the failure.
 */
#define BTL_OFI_RAIL_REFUSAL_NS (2 * 1000000000LL)

/* Rail @p r refused a post to the peer: true once it has refused every
 * post for BTL_OFI_RAIL_REFUSAL_NS. */
static bool rail_refuses_for_good(mca_btl_ofi_endpoint_t *endpoint, int r)
{
    int64_t now = mca_btl_ofi_now_ns();

    if (0 == endpoint->rails.refused_since[r]) {
        endpoint->rails.refused_since[r] = now;
        return false;
    }
    return now - endpoint->rails.refused_since[r] >= BTL_OFI_RAIL_REFUSAL_NS;
}

/* Rail @p r did not take a post to the peer (@p rc): it goes out of
 * service where the post failed outright, or where it has refused every
 * post for BTL_OFI_RAIL_REFUSAL_NS while another rail serves the peer (the
 * last one is only ever busy: a target that computes with its progress
 * thread off stops taking data until it calls MPI again).  True when it
 * went. */
static bool rail_post_failed(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint, int r,
                             int rc)
{
    if (OPAL_ERR_OUT_OF_RESOURCE != rc) {
        rail_down(module, endpoint, r, rc);
        return true;
    }
    if (0 != (endpoint->rails.up & ~(1 << r)) && rail_refuses_for_good(endpoint, r)) {
        rail_down(module, endpoint, r, OPAL_ERR_UNREACH);
        return true;
    }
    return false;
}

/*
 * Piece @p p on rail @p r, or on another rail in service where @p r does
 * not take it (and may go out of service: rail_post_failed).
 * With @p must_post the piece is tried on the rails in service until one
 * takes it (a chunk whose siblings are in flight, a piece that failed: no
 * one above could post it again); otherwise OPAL_ERR_OUT_OF_RESOURCE once
 * each rail in service refused it, and osc/rdma tries again later.
 * *@p moved tells whether it went on another rail than @p r.
 */
static int post_piece_on_rails(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint,
                               int r, const piece_t *p, bool must_post, bool *moved)
{
    int refusals = 0, first = r;

    for (;;) {
        int rc = post_piece(module, endpoint, r, p);

        if (OPAL_LIKELY(OPAL_SUCCESS == rc)) {
            endpoint->rails.refused_since[r] = 0;
            *moved = (r != first);
            return rc;
        }
        if (!rail_post_failed(module, endpoint, r, rc) && !must_post
            && ++refusals >= module->num_rails) {
            return rc;
        }
        r = next_rail_up(module, endpoint);
        if (r < 0) {
            return OPAL_ERR_UNREACH; /* rail_down reported the peer lost */
        }
    }
}

/*
 * A piece failed on its rail: the rail is out of service for this peer
 * from now on, and the piece goes again on a rail still in service.  The
 * failed one is done with only once its replacement is counted, so a
 * flush never sees the peer idle in between.  False when no rail is left:
 * the caller reports the error.
 */
static bool take_over(mca_btl_ofi_comp_t *comp, int status)
{
    mca_btl_ofi_module_t *module = comp->module;
    mca_btl_ofi_endpoint_t *endpoint = comp->endpoint;
    piece_t piece = piece_of_comp(comp);
    bool moved;
    int r;

    rail_down(module, endpoint, comp->rail, status);
    r = next_rail_up(module, endpoint);
    if (r < 0 || OPAL_SUCCESS != post_piece_on_rails(module, endpoint, r, &piece, true, &moved)) {
        return false;
    }
    mca_btl_ofi_count(module->rails[comp->rail], MCA_BTL_OFI_CNT_REPOST, 1);
    endpoint_op_done(comp);
    comp_return(comp->context, comp);
    return true;
}

/*
 * Atomics use the lead's rail 0 only, and one cannot go on another rail
 * (unmovable_failed).  So where rail 0 is out of service for the peer, or has
 * refused every post to it for BTL_OFI_RAIL_REFUSAL_NS while another rail
 * serves it (a broken connection: osc/rdma would otherwise try again for
 * ever), the peer is lost to atomics, reported as for an atomic that
 * failed.  @p rc is what posting the atomic gave; returns what osc/rdma
 * gets.
 */
int mca_btl_ofi_atomic_rail_check(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint,
                                  int rc)
{
    bool rail0_up = 0 != (endpoint->rails.up & 1), others_up = 0 != (endpoint->rails.up & ~1);

    if (OPAL_SUCCESS == rc) {
        endpoint->rails.refused_since[0] = 0;
        return rc;
    }
    if (rail0_up
        && (OPAL_ERR_OUT_OF_RESOURCE != rc || !others_up || !rail_refuses_for_good(endpoint, 0))) {
        return rc;
    }
    lose_rail(module, endpoint, 0, OPAL_ERR_UNREACH);
    return OPAL_ERR_UNREACH;
}

/*
 * A rail that goes silent.  tcp;ofi_rxm 1.17 notices a reset connection
 * only when it sends on it: an operation whose request went out before the
 * reset waits for an answer that never comes, neither completed nor
 * failed (the hosts lane's rail_atomic_fail hung 2 runs in 5 on an atomic,
 * rail_failover 1 in 13 on a get piece of rail 1), and a flush waits for
 * it for ever.  So once a peer's operations on a rail have waited
 * BTL_OFI_RAIL_SILENCE_NS without any of them completing, the stall watch
 * posts one read there of at most the last operation's size at its
 * target: traffic on the connection, so a broken one fails the read and
 * the provider fails what waited on it with it (a piece then goes again on
 * another rail; on rail 0, which carries the atomics, the job ends with a
 * message: unmovable_failed), or refuses it (rail 0:
 * mca_btl_ofi_atomic_rail_check; another rail goes out of service once it
 * refused for BTL_OFI_RAIL_REFUSAL_NS).  On a healthy rail to a target that
 * merely computes the read completes, and the next probe waits as long
 * again.  The read changes nothing at the target.
 */
#define BTL_OFI_RAIL_SILENCE_NS (2 * 1000000000LL)

void mca_btl_ofi_rail_watch(mca_btl_ofi_comp_t *comp, int r, uint64_t raddr, uint64_t rkey,
                            size_t size)
{
    mca_btl_ofi_rail_watch_t *watch = comp->endpoint->rails.watch;

    if (OPAL_UNLIKELY(NULL == watch)) {
        return; /* attach_rails found no memory: rail 0 alone, unwatched */
    }
    watch += r;
    comp->watched = true;
    watch->probe_raddr = raddr;
    watch->probe_rkey = rkey;
    watch->probe_size = size < sizeof(uint64_t) ? size : sizeof(uint64_t);
    if (0 == watch->out) {
        watch->seen_ns = mca_btl_ofi_now_ns();
    }
    mca_btl_ofi_app_add64(&watch->out, 1);
}

void mca_btl_ofi_rail_unwatch(mca_btl_ofi_endpoint_t *endpoint, int r)
{
    mca_btl_ofi_rail_watch_t *watch = endpoint->rails.watch;

    if (OPAL_UNLIKELY(NULL == watch)) {
        return;
    }
    watch += r;
    mca_btl_ofi_app_add64(&watch->out, -1);
    watch->seen_ns = mca_btl_ofi_now_ns();
}

/* The probe's rail travels as its callback context. */
static void probe_done(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                       void *local_address, mca_btl_base_registration_handle_t *local_handle,
                       void *cbcontext, void *cbdata, int status)
{
    mca_btl_ofi_rail_watch_t *watch = &endpoint->rails.watch[(intptr_t) cbcontext];

    (void) btl;
    (void) local_address;
    (void) local_handle;
    (void) cbdata;
    watch->probe_out = false;
    /* an answer shows the peer alive; a failure was handled by
     * unmovable_failed, and whatever still waits there stays silent */
    if (OPAL_SUCCESS == status) {
        watch->seen_ns = mca_btl_ofi_now_ns();
    }
}

/* A probe that rail @p r refused: as an atomic refused there on rail 0,
 * as a piece refused there elsewhere. */
static void probe_refused(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint, int r,
                          int rc)
{
    if (0 == r) {
        (void) mca_btl_ofi_atomic_rail_check(module, endpoint, rc);
    } else {
        (void) rail_post_failed(module, endpoint, r, rc);
    }
}

static void post_probe(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint, int r)
{
    mca_btl_ofi_rail_watch_t *watch = &endpoint->rails.watch[r];
    rma_args_t args = { .size = watch->probe_size };
    mca_btl_ofi_comp_t *comp;
    int rc;

    comp =
        comp_get_on_rail(module, endpoint, r, NULL, NULL, probe_done, (void *) (intptr_t) r, NULL);
    if (OPAL_UNLIKELY(NULL == comp)) {
        return;
    }
    args.local = &comp->operands[2];
    args.desc = comp->operand_desc;
    args.raddr = watch->probe_raddr;
    args.rkey = watch->probe_rkey;
    watch->probe_out = true;
    watch->probe_ns = mca_btl_ofi_now_ns();
    rc = mca_btl_ofi_post(comp, post_read, &args);
    if (OPAL_SUCCESS != rc) {
        watch->probe_out = false;
        probe_refused(module, endpoint, r, rc);
    } else {
        MCA_BTL_OFI_VERBOSE(10,
                            "operations to %s waited %lld ms on rail %d without news: probing it",
                            OPAL_NAME_PRINT(endpoint->proc->proc_name),
                            (long long) (BTL_OFI_RAIL_SILENCE_NS / 1000000), r);
    }
}

/*
 * Operations on a rail that stay silent although it was probed: seen on
 * tcp;ofi_rxm 1.17 (1 run in 12 of rail_atomic_fail, a probe itself
 * unanswered) on the side whose connection the reset left looking healthy,
 * and what a NIC or link that drops everything gives.  A target whose
 * progress thread is on answers a read within milliseconds even while it
 * computes, so operations silent for BTL_OFI_RAIL_LOST_NS mean the rail is
 * gone; the wait is long because ranks that share CPUs have stalled for
 * 25 s on a TCP zero window here.  Where the thread is off, a target that
 * computes answers nothing until it calls MPI, which is legal: no verdict
 * then.
 */
#define BTL_OFI_RAIL_LOST_NS (60 * 1000000000LL)

static bool silent_too_long(const mca_btl_ofi_rail_watch_t *watch, int64_t now)
{
    return watch->out > 0 && now - watch->seen_ns >= BTL_OFI_RAIL_SILENCE_NS;
}

static bool silent_for_good(const mca_btl_ofi_rail_watch_t *watch, int64_t now)
{
    return now - watch->seen_ns >= BTL_OFI_RAIL_LOST_NS
           && MCA_BTL_OFI_PROGRESS_THREAD_OFF != mca_btl_ofi_component.progress_thread;
}

/* What the stall watch does for a peer on a rail: nothing, probe it, or
 * give it up for lost: its operations stayed silent although probed, or
 * (rail 0) still wait on it although it failed.  A rail other than 0 that
 * is out of service is still probed while pieces wait there: the probe is
 * what makes the provider fail them.  Pieces silent for good cannot go on
 * another rail either: libfabric cannot take an operation back, so a put
 * could still land later over data written since, and a get's bytes after
 * the buffer was handed back. */
typedef enum { RAIL_FINE, RAIL_PROBE, RAIL_LOST } rail_verdict_t;

static rail_verdict_t rail_verdict(const mca_btl_ofi_endpoint_t *endpoint, int r, int64_t now)
{
    const mca_btl_ofi_rail_watch_t *watch = &endpoint->rails.watch[r];

    if (watch->lost || !silent_too_long(watch, now)) {
        return RAIL_FINE;
    }
    if ((0 == r && 0 == (endpoint->rails.up & 1)) || silent_for_good(watch, now)) {
        return RAIL_LOST;
    }
    if (!watch->probe_out && now - watch->probe_ns >= BTL_OFI_RAIL_SILENCE_NS) {
        return RAIL_PROBE;
    }
    return RAIL_FINE;
}

/* The first peer and rail of the lead that need the stall watch, retained. */
static mca_btl_ofi_endpoint_t *find_silent_rail(mca_btl_ofi_module_t *lead, int64_t now, int *rail,
                                                rail_verdict_t *verdict)
{
    mca_btl_ofi_endpoint_t *endpoint;

    OPAL_LIST_FOREACH(endpoint, &lead->endpoints, mca_btl_ofi_endpoint_t) {
        for (int r = 0; NULL != endpoint->rails.watch && r < lead->num_rails; ++r) {
            *verdict = rail_verdict(endpoint, r, now);
            if (RAIL_FINE != *verdict) {
                *rail = r;
                OBJ_RETAIN(endpoint);
                return endpoint;
            }
        }
    }
    return NULL;
}

void mca_btl_ofi_probe_silent_rails(mca_btl_ofi_module_t *module, int64_t now)
{
    /* a rail's own stall watch sees the pieces posted on it; the peers
     * and their watches are the lead's */
    mca_btl_ofi_module_t *lead = module->lent ? mca_btl_ofi_component.modules[0] : module;
    mca_btl_ofi_endpoint_t *silent;
    rail_verdict_t verdict = RAIL_FINE;
    int r = 0;

    if (lead->num_rails < 2) {
        return; /* a rail closed early: no more rails */
    }
    if (!mca_btl_ofi_trylock(&lead->lock)) {
        return;
    }
    silent = find_silent_rail(lead, now, &r, &verdict);
    mca_btl_ofi_unlock(&lead->lock);
    if (NULL == silent) {
        return;
    }
    /* outside the lock: a lost rail calls the layer above */
    if (RAIL_PROBE == verdict) {
        post_probe(lead, silent, r);
    } else {
        lose_rail(lead, silent, r, OPAL_ERR_TIMEOUT);
    }
    OBJ_RELEASE(silent);
}

/* The counter of pieces that went on another rail than planned. */
static void count_moved(mca_btl_ofi_module_t *module, int r, bool moved)
{
    if (OPAL_UNLIKELY(moved)) {
        mca_btl_ofi_count(module->rails[r], MCA_BTL_OFI_CNT_REPOST, 1);
    }
}

/*
 * A put or get of the lead module.  Below btl_ofi_stripe_min it goes
 * whole on the next rail in service; from it, one chunk per rail in
 * service (mca_btl_ofi_stripe_cut), posted at once under one whole
 * operation that calls back when the last chunk is in.  Once a chunk is
 * in flight the others must go somewhere: a rail that refuses one hands
 * it to another (post_piece_on_rails), and only with no rail left does
 * the operation end in error.
 */
static int start_on_rails(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint,
                          bool is_put, rma_args_t *args,
                          mca_btl_base_registration_handle_t *local_handle,
                          mca_btl_base_registration_handle_t *remote_handle,
                          uint64_t remote_address, mca_btl_base_rdma_completion_fn_t cbfunc,
                          void *cbcontext, void *cbdata)
{
    size_t offsets[MCA_BTL_OFI_MAX_RAILS], lengths[MCA_BTL_OFI_MAX_RAILS];
    int which[MCA_BTL_OFI_MAX_RAILS];
    int up = rails_up_count(module, endpoint, which);
    piece_t piece = { .is_put = is_put,
                      .inject = args->inject,
                      .local = args->local,
                      .size = args->size,
                      .local_handle = local_handle,
                      .remote_handle = remote_handle,
                      .remote_address = remote_address,
                      .cbfunc = cbfunc,
                      .cbcontext = cbcontext,
                      .cbdata = cbdata };
    mca_btl_ofi_comp_t *stripe;
    bool moved;
    int chunks, rc, r;

    if (OPAL_UNLIKELY(0 == up)) {
        return OPAL_ERR_UNREACH;
    }
    chunks = mca_btl_ofi_stripe_cut(args->size, up, module->stripe_min, MCA_BTL_OFI_STRIPE_ALIGN,
                                    offsets, lengths);
    if (1 == chunks) {
        r = (1 == up) ? which[0] : next_rail_up(module, endpoint);
        r = (r < 0) ? which[0] : r;
        rc = post_piece_on_rails(module, endpoint, r, &piece, false, &moved);
        count_moved(module, r, OPAL_SUCCESS == rc && moved);
        return rc;
    }
    stripe = comp_get_on(module, mca_btl_ofi_thread_context(module), endpoint, args->local,
                         local_handle, cbfunc, cbcontext, cbdata);
    if (OPAL_UNLIKELY(NULL == stripe)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    /* the poster holds one count until every chunk is posted, so no chunk
     * completing early ends the operation */
    stripe->chunks_left = chunks + 1;
    stripe->stripe_status = OPAL_SUCCESS;
    piece.inject = false;
    piece.stripe = stripe;
    piece.cbfunc = NULL;
    piece.cbcontext = piece.cbdata = NULL;
    for (int i = 0; i < chunks; ++i) {
        piece.local = (char *) args->local + offsets[i];
        piece.size = lengths[i];
        piece.remote_address = remote_address + offsets[i];
        rc = post_piece_on_rails(module, endpoint, which[i], &piece, i > 0, &moved);
        if (OPAL_UNLIKELY(OPAL_SUCCESS != rc)) {
            if (0 == i) {
                comp_return(stripe->context, stripe);
                return rc; /* nothing in flight: osc/rdma may try again */
            }
            /* no rail left (the peer is reported lost): the chunks in
             * flight end the operation, with this error */
            stripe->stripe_status = rc;
            (void) chunks_done(stripe, chunks - i);
            break;
        }
        count_moved(module, which[i], moved);
    }
    stripe_chunk_done(stripe, OPAL_SUCCESS);
    return OPAL_SUCCESS;
}

/* A same-host peer's put or get as one copy (btl_ofi_copy.c), complete on
 * return: the callback runs here, as btl/sm's single-copy path does.
 * false when the copy was not made; then the provider carries it.  A copy
 * the kernel refuses (permissions, a peer gone, memory it cannot reach:
 * device memory) sends every later operation to that peer through the
 * provider, which reports any real error. */
static bool copied_rma(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint, bool is_put,
                       const rma_args_t *args, mca_btl_base_registration_handle_t *local_handle,
                       uint64_t remote_address, mca_btl_base_rdma_completion_fn_t cbfunc,
                       void *cbcontext, void *cbdata)
{
    uint32_t pid = endpoint->same_host.copy_pid;
    int err;

    if (0 == pid) {
        return false;
    }
    err = mca_btl_ofi_copy_with((pid_t) pid, is_put, args->local, remote_address, args->size);
    if (OPAL_UNLIKELY(0 != err)) {
        endpoint->same_host.copy_pid = 0;
        MCA_BTL_OFI_VERBOSE(1,
                            "%s of %zu bytes to %s could not be copied (%s): its puts and "
                            "gets go through the provider from now on",
                            is_put ? "a put" : "a get", args->size,
                            OPAL_NAME_PRINT(endpoint->proc->proc_name), strerror(err));
        return false;
    }
    count_rma(module, is_put, args->size);
    mca_btl_ofi_app_count(module, MCA_BTL_OFI_CNT_LOCAL_COPY, 1);
    if (NULL != cbfunc) {
        cbfunc(&module->super, endpoint, args->local, local_handle, cbcontext, cbdata,
               OPAL_SUCCESS);
    }
    return true;
}

/**
 * The part of a put or a get after its checks: a completion, the remote
 * address and key, one post, and the MPI_T counters.  @p args holds the
 * local buffer, size and inject choice already.
 */
static int start_rma(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint, bool is_put,
                     rma_args_t *args, mca_btl_base_registration_handle_t *local_handle,
                     mca_btl_base_registration_handle_t *remote_handle, uint64_t remote_address,
                     mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata)
{
    mca_btl_ofi_comp_t *comp;
    int rc;

    if (OPAL_UNLIKELY(NULL == remote_handle)) {
        return OPAL_ERR_BAD_PARAM; /* no registration for the target */
    }
    if (copied_rma(module, endpoint, is_put, args, local_handle, remote_address, cbfunc, cbcontext,
                   cbdata)) {
        return OPAL_SUCCESS;
    }
    if (module->num_rails > 1) {
        return start_on_rails(module, endpoint, is_put, args, local_handle, remote_handle,
                              remote_address, cbfunc, cbcontext, cbdata);
    }
    comp = mca_btl_ofi_comp_get(module, endpoint, args->local, local_handle, cbfunc, cbcontext,
                                cbdata);
    if (OPAL_UNLIKELY(NULL == comp)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    args->desc = mca_btl_ofi_local_desc(local_handle);
    args->raddr = mca_btl_ofi_remote_addr(remote_handle, remote_address);
    args->rkey = remote_handle->rkey;
    comp->bytes = args->size;
    rc = mca_btl_ofi_post(comp, is_put ? post_write : post_read, args);
    if (OPAL_LIKELY(OPAL_SUCCESS == rc)) {
        mca_btl_ofi_app_count(module, is_put ? MCA_BTL_OFI_CNT_PUT : MCA_BTL_OFI_CNT_GET, 1);
        mca_btl_ofi_app_count(
            module, is_put ? MCA_BTL_OFI_CNT_PUT_BYTES : MCA_BTL_OFI_CNT_GET_BYTES, args->size);
    }
    return rc;
}

int mca_btl_ofi_put(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                    void *local_address, uint64_t remote_address,
                    mca_btl_base_registration_handle_t *local_handle,
                    mca_btl_base_registration_handle_t *remote_handle, size_t size, int flags,
                    int order, mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                    void *cbdata)
{
    mca_btl_ofi_module_t *module = (mca_btl_ofi_module_t *) btl;
    rma_args_t args = { .local = local_address, .size = size };

    (void) flags;
    (void) order;
    if (OPAL_UNLIKELY(OPAL_SUCCESS != mca_btl_ofi_check_endpoint(endpoint))) {
        return OPAL_ERR_UNREACH;
    }
    if (OPAL_UNLIKELY(size > btl->btl_put_limit)) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    args.inject = module->use_inject && size <= module->inject_size;
    if (OPAL_UNLIKELY(module->mr_local && NULL == local_handle && !args.inject)) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    return start_rma(module, endpoint, true, &args, local_handle, remote_handle, remote_address,
                     cbfunc, cbcontext, cbdata);
}

int mca_btl_ofi_get(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                    void *local_address, uint64_t remote_address,
                    mca_btl_base_registration_handle_t *local_handle,
                    mca_btl_base_registration_handle_t *remote_handle, size_t size, int flags,
                    int order, mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                    void *cbdata)
{
    mca_btl_ofi_module_t *module = (mca_btl_ofi_module_t *) btl;
    rma_args_t args = { .local = local_address, .size = size, .inject = false };

    (void) flags;
    (void) order;
    if (OPAL_UNLIKELY(OPAL_SUCCESS != mca_btl_ofi_check_endpoint(endpoint))) {
        return OPAL_ERR_UNREACH;
    }
    if (OPAL_UNLIKELY(size > btl->btl_get_limit)) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    if (OPAL_UNLIKELY(module->mr_local && NULL == local_handle)) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    return start_rma(module, endpoint, false, &args, local_handle, remote_handle, remote_address,
                     cbfunc, cbcontext, cbdata);
}

/* ------------------------------------------------------------------ */
/* Flush                                                               */

static int64_t outstanding_on(const mca_btl_ofi_module_t *module)
{
    int64_t total = 0;

    for (int i = 0; i < module->num_contexts; ++i) {
        total += module->contexts[i].outstanding;
    }
    return total;
}

static int64_t module_outstanding(mca_btl_ofi_module_t *module)
{
    int64_t total = 0;

    for (int r = 0; r < module->num_rails; ++r) {
        total += outstanding_on(module->rails[r]);
    }
    if (NULL != module->same_host) {
        total += outstanding_on(module->same_host);
    }
    return total;
}

/* A flush covers every rail and the same-host module: the lead's
 * operations complete on all.  A pass that completed nothing yields the
 * core where Open MPI's own progress would (mpi_yield_when_idle, set when
 * ranks outnumber cores): osc/rdma waits in our flush rather than in
 * opal_progress, and an origin that spins there keeps its targets, which
 * must progress for its operations to complete, off the core for a whole
 * time slice. */
static void progress_rails(mca_btl_ofi_module_t *module)
{
    int events = 0;

    for (int r = 0; r < module->num_rails; ++r) {
        if (0 == r && mca_btl_ofi_network_pass_skipped(module)) {
            continue;
        }
        events += mca_btl_ofi_progress_module(module->rails[r]);
    }
    if (NULL != module->same_host) {
        events += mca_btl_ofi_progress_module(module->same_host);
    }
    if (0 == events) {
        if (opal_progress_yield_when_idle) {
            (void) sched_yield();
        } else {
            mca_btl_ofi_empty_pass_pause(module);
        }
    }
}

int mca_btl_ofi_flush(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint)
{
    mca_btl_ofi_module_t *module = (mca_btl_ofi_module_t *) btl;

    mca_btl_ofi_app_count(module, MCA_BTL_OFI_CNT_FLUSH, 1);
    if (NULL != endpoint) {
        while (endpoint->outstanding > 0) {
            progress_rails(module);
        }
    } else {
        while (module_outstanding(module) > 0) {
            progress_rails(module);
        }
    }
    /* another application thread may have run the completions: what they
     * stored (fetched values) must be seen by the caller, no more (a full
     * fence here cost every flush tens of cycles) */
    opal_atomic_rmb();
    return OPAL_SUCCESS;
}
