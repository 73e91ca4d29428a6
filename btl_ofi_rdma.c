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

#include <string.h>

#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_ofi.h"

/** EAGAIN retries, each after a round of progress, before we give up. */
#define BTL_OFI_POST_RETRIES 8

#define BTL_OFI_COMP_PAYLOAD (3 * sizeof(uint64_t))

OBJ_CLASS_INSTANCE(mca_btl_ofi_comp_t, opal_free_list_item_t, NULL, NULL);

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
                             module->mr_local ? module->rcache : NULL, NULL, NULL);
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
    mca_btl_ofi_app_add64(&comp->endpoint->outstanding, -1);
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
    if (OPAL_SUCCESS != status) {
        MCA_BTL_OFI_VERBOSE(1, "operation to %s failed",
                            NULL != endpoint->proc ? OPAL_NAME_PRINT(endpoint->proc->proc_name)
                                                   : "?");
    }
    if (OPAL_SUCCESS == status && comp->result_size > 0) {
        memcpy(local_address, &comp->operands[2], comp->result_size);
    }
    endpoint_op_done(comp);
    comp_return(comp->context, comp);
    if (OPAL_SUCCESS != status) {
        mca_btl_ofi_count(module, MCA_BTL_OFI_CNT_ERROR, 1);
    }
    if (NULL != cbfunc) {
        cbfunc(&module->super, endpoint, local_address, local_handle, cbcontext, cbdata, status);
    }
    return true;
}

/* ------------------------------------------------------------------ */
/* Posting                                                             */

mca_btl_ofi_comp_t *mca_btl_ofi_comp_get(mca_btl_ofi_module_t *module,
                                         mca_btl_ofi_endpoint_t *endpoint, void *local_address,
                                         mca_btl_base_registration_handle_t *local_handle,
                                         mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                                         void *cbdata)
{
    mca_btl_ofi_context_t *context = mca_btl_ofi_thread_context(module);
    mca_btl_ofi_comp_t *comp;

    if (OPAL_UNLIKELY(context->outstanding >= mca_btl_ofi_component.progress_threshold)) {
        mca_btl_ofi_context_poll(context);
    }
    comp = (mca_btl_ofi_comp_t *) (mca_btl_ofi_app_threaded()
                                       ? opal_free_list_get_mt(&context->comps)
                                       : opal_free_list_get_st(&context->comps));
    if (OPAL_UNLIKELY(NULL == comp)) {
        return NULL;
    }
    comp->ctx.complete = comp_complete;
    comp->module = module;
    comp->context = context;
    comp->endpoint = endpoint;
    comp->operands = (uint64_t *) comp->super.ptr;
    comp->operand_desc = (NULL != comp->super.registration)
                             ? ((mca_btl_ofi_reg_t *) comp->super.registration)->desc
                             : NULL;
    comp->result_size = 0;
    comp->local_address = local_address;
    comp->local_handle = local_handle;
    comp->cbfunc = cbfunc;
    comp->cbcontext = cbcontext;
    comp->cbdata = cbdata;
    return comp;
}

/**
 * Post through @p post, retrying EAGAIN after progress a bounded number
 * of times.  On success the operation is counted as outstanding; on
 * failure the completion goes back to its list.
 */
int mca_btl_ofi_post(mca_btl_ofi_comp_t *comp, mca_btl_ofi_post_fn_t post, void *arg)
{
    mca_btl_ofi_context_t *context = comp->context;
    mca_btl_ofi_endpoint_t *endpoint = comp->endpoint;
    ssize_t rc;

    /* counted first: the completion may be reaped by another thread before
     * post() even returns */
    mca_btl_ofi_app_add64(&context->outstanding, 1);
    mca_btl_ofi_app_add64(&comp->endpoint->outstanding, 1);
    for (int attempt = 0;; ++attempt) {
        rc = post(comp, arg);
        if (OPAL_LIKELY(0 == rc)) {
            mca_btl_ofi_sockets_posted(endpoint);
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
        .addr = comp->endpoint->addr,
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
    comp = mca_btl_ofi_comp_get(module, endpoint, args->local, local_handle, cbfunc, cbcontext,
                                cbdata);
    if (OPAL_UNLIKELY(NULL == comp)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    args->desc = mca_btl_ofi_local_desc(local_handle);
    args->raddr = mca_btl_ofi_remote_addr(remote_handle, remote_address);
    args->rkey = remote_handle->rkey;
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

static int64_t module_outstanding(mca_btl_ofi_module_t *module)
{
    int64_t total = 0;
    for (int i = 0; i < module->num_contexts; ++i) {
        total += module->contexts[i].outstanding;
    }
    return total;
}

int mca_btl_ofi_flush(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint)
{
    mca_btl_ofi_module_t *module = (mca_btl_ofi_module_t *) btl;

    mca_btl_ofi_app_count(module, MCA_BTL_OFI_CNT_FLUSH, 1);
    if (NULL != endpoint) {
        while (endpoint->outstanding > 0) {
            (void) mca_btl_ofi_progress_module(module);
        }
    } else {
        while (module_outstanding(module) > 0) {
            (void) mca_btl_ofi_progress_module(module);
        }
    }
    opal_atomic_mb();
    return OPAL_SUCCESS;
}
