/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * One-sided operations, their completions and flush.  Every operation takes
 * a completion object from the calling thread's context, posts one
 * libfabric call through post_rma(), and on any failure hands the object
 * back and returns an OPAL error code: osc/rdma retries on
 * OPAL_ERR_OUT_OF_RESOURCE and reports anything else.
 */

#include "opal_config.h"

#include <string.h>

#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_ofi.h"

/** EAGAIN retries, each after a round of progress, before we give up. */
#define BTL_OFI_POST_RETRIES 8

/* ------------------------------------------------------------------ */
/* Atomics: the operations and datatypes the provider confirmed.       */

static const struct {
    mca_btl_base_atomic_op_t btl_op;
    enum fi_op fi_op;
    uint32_t support_flag;
} atomic_ops[] = {
    { MCA_BTL_ATOMIC_ADD, FI_SUM, MCA_BTL_ATOMIC_SUPPORTS_ADD },
    { MCA_BTL_ATOMIC_AND, FI_BAND, MCA_BTL_ATOMIC_SUPPORTS_AND },
    { MCA_BTL_ATOMIC_OR, FI_BOR, MCA_BTL_ATOMIC_SUPPORTS_OR },
    { MCA_BTL_ATOMIC_XOR, FI_BXOR, MCA_BTL_ATOMIC_SUPPORTS_XOR },
    { MCA_BTL_ATOMIC_LAND, FI_LAND, MCA_BTL_ATOMIC_SUPPORTS_LAND },
    { MCA_BTL_ATOMIC_LOR, FI_LOR, MCA_BTL_ATOMIC_SUPPORTS_LOR },
    { MCA_BTL_ATOMIC_LXOR, FI_LXOR, MCA_BTL_ATOMIC_SUPPORTS_LXOR },
    { MCA_BTL_ATOMIC_SWAP, FI_ATOMIC_WRITE, MCA_BTL_ATOMIC_SUPPORTS_SWAP },
};

/*
 * MIN and MAX are not in the table on purpose.  osc/rdma passes only the
 * width and "float" to the BTL, never the signedness, so no single choice
 * is right: unsigned comparison gets MAX(-5, 3) = -5 for MPI_INT64_T (what
 * upstream does), signed comparison gets MIN(0, 0xffffffff) = 0xffffffff
 * for MPI_UINT32_T.  Answering OPAL_ERR_NOT_SUPPORTED sends osc/rdma to its
 * get-op-put path, which applies the MPI operation with the real datatype
 * and is right for both.
 */
#define BTL_OFI_NUM_ATOMIC_OPS (sizeof(atomic_ops) / sizeof(atomic_ops[0]))

static inline int fi_op_for(mca_btl_base_atomic_op_t op)
{
    for (size_t i = 0; i < BTL_OFI_NUM_ATOMIC_OPS; ++i) {
        if (atomic_ops[i].btl_op == op) {
            return atomic_ops[i].fi_op;
        }
    }
    return -1;
}

/* Addition, the bit operations, the logical operations and swap give the
 * same bits for signed and unsigned integers, so one type serves both. */
static inline enum fi_datatype datatype_for(int flags)
{
    if (flags & MCA_BTL_ATOMIC_FLAG_FLOAT) {
        return (flags & MCA_BTL_ATOMIC_FLAG_32BIT) ? FI_FLOAT : FI_DOUBLE;
    }
    return (flags & MCA_BTL_ATOMIC_FLAG_32BIT) ? FI_INT32 : FI_INT64;
}

static bool query_atomic(struct fid_domain *domain, enum fi_datatype dt, enum fi_op op,
                         uint64_t flags)
{
    struct fi_atomic_attr attr;
    return 0 == fi_query_atomic(domain, dt, op, &attr, flags) && attr.count >= 1;
}

void mca_btl_ofi_probe_module_atomics(mca_btl_ofi_module_t *module)
{
    static const enum fi_datatype types[] = { FI_INT64, FI_INT32, FI_DOUBLE, FI_FLOAT };
    uint32_t supports = 0;
    bool all32 = true, float_add;

    memset(module->atomic_fetch_ok, 0, sizeof(module->atomic_fetch_ok));
    memset(module->atomic_post_ok, 0, sizeof(module->atomic_post_ok));
    for (size_t i = 0; i < BTL_OFI_NUM_ATOMIC_OPS; ++i) {
        enum fi_op op = atomic_ops[i].fi_op;
        for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); ++t) {
            if (query_atomic(module->domain, types[t], op, FI_FETCH_ATOMIC)) {
                module->atomic_fetch_ok[op] |= 1u << types[t];
            }
            if (query_atomic(module->domain, types[t], op, 0)) {
                module->atomic_post_ok[op] |= 1u << types[t];
            }
        }
        /* advertised when both the plain and the fetching 64-bit form work */
        if ((module->atomic_fetch_ok[op] & (1u << FI_INT64))
            && (FI_ATOMIC_WRITE == op || (module->atomic_post_ok[op] & (1u << FI_INT64)))) {
            supports |= atomic_ops[i].support_flag;
            if (!(module->atomic_fetch_ok[op] & (1u << FI_INT32))) {
                all32 = false;
            }
        }
    }
    if (query_atomic(module->domain, FI_INT64, FI_CSWAP, FI_COMPARE_ATOMIC)) {
        module->atomic_fetch_ok[FI_CSWAP] |= 1u << FI_INT64;
        supports |= MCA_BTL_ATOMIC_SUPPORTS_CSWAP;
        if (query_atomic(module->domain, FI_INT32, FI_CSWAP, FI_COMPARE_ATOMIC)) {
            module->atomic_fetch_ok[FI_CSWAP] |= 1u << FI_INT32;
        } else {
            all32 = false;
        }
    }
    if (supports && all32) {
        supports |= MCA_BTL_ATOMIC_SUPPORTS_32BIT;
    }
    float_add = (module->atomic_fetch_ok[FI_SUM] & (1u << FI_DOUBLE))
                && (module->atomic_post_ok[FI_SUM] & (1u << FI_DOUBLE))
                && (module->atomic_fetch_ok[FI_SUM] & (1u << FI_FLOAT));
    if (float_add) {
        supports |= MCA_BTL_ATOMIC_SUPPORTS_FLOAT;
    }
    /* every atomic goes through the NIC, so they are atomic with respect to
     * each other across all peers */
    if (supports) {
        supports |= MCA_BTL_ATOMIC_SUPPORTS_GLOB;
    }
    module->super.btl_atomic_flags = supports;
    if (0 == (supports & MCA_BTL_ATOMIC_SUPPORTS_ADD)) {
        module->super.btl_flags &= ~(MCA_BTL_FLAGS_ATOMIC_OPS | MCA_BTL_FLAGS_ATOMIC_FOPS);
    }
    MCA_BTL_OFI_VERBOSE(10, "%s: atomic support flags 0x%x", module->device_name, supports);
}

static inline bool atomic_confirmed(const uint32_t *table, enum fi_op op, enum fi_datatype dt)
{
    return 0 != (table[op] & (1u << dt));
}

/* ------------------------------------------------------------------ */
/* Completions                                                         */

static inline void endpoint_op_done(mca_btl_ofi_comp_t *comp)
{
    (void) mca_btl_ofi_add64(&comp->context->outstanding, -1);
    (void) mca_btl_ofi_add64(&comp->endpoint->outstanding, -1);
}

void mca_btl_ofi_rdma_complete(mca_btl_ofi_comp_t *comp, int status)
{
    mca_btl_base_rdma_completion_fn_t cbfunc = comp->cbfunc;
    mca_btl_ofi_module_t *module = comp->module;
    mca_btl_ofi_endpoint_t *endpoint = comp->endpoint;
    void *local_address = comp->local_address;
    mca_btl_base_registration_handle_t *local_handle = comp->local_handle;
    void *cbcontext = comp->cbcontext, *cbdata = comp->cbdata;

    if (OPAL_SUCCESS == status && comp->result_size > 0) {
        memcpy(local_address, &comp->operands[2], comp->result_size);
    }
    endpoint_op_done(comp);
    opal_free_list_return(&comp->context->comps, &comp->super);
    if (OPAL_SUCCESS != status) {
        mca_btl_ofi_count(module, MCA_BTL_OFI_CNT_ERROR, 1);
    }
    if (NULL != cbfunc) {
        cbfunc(&module->super, endpoint, local_address, local_handle, cbcontext, cbdata, status);
    }
}

/* ------------------------------------------------------------------ */
/* Posting                                                             */

static inline mca_btl_ofi_comp_t *comp_get(mca_btl_ofi_module_t *module,
                                           mca_btl_ofi_context_t *context,
                                           mca_btl_ofi_endpoint_t *endpoint, mca_btl_ofi_op_t type)
{
    mca_btl_ofi_comp_t *comp;

    if (OPAL_UNLIKELY(context->outstanding >= mca_btl_ofi_component.progress_threshold)) {
        mca_btl_ofi_context_poll(context);
    }
    comp = (mca_btl_ofi_comp_t *) opal_free_list_get(&context->comps);
    if (OPAL_UNLIKELY(NULL == comp)) {
        return NULL;
    }
    comp->ctx.type = type;
    comp->module = module;
    comp->context = context;
    comp->endpoint = endpoint;
    comp->operands = (uint64_t *) comp->super.ptr;
    comp->operand_desc = (NULL != comp->super.registration)
                             ? ((mca_btl_ofi_reg_t *) comp->super.registration)->desc
                             : NULL;
    comp->result_size = 0;
    return comp;
}

static inline void comp_set_callback(mca_btl_ofi_comp_t *comp, void *local_address,
                                     mca_btl_base_registration_handle_t *local_handle,
                                     mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                                     void *cbdata)
{
    comp->local_address = local_address;
    comp->local_handle = local_handle;
    comp->cbfunc = cbfunc;
    comp->cbcontext = cbcontext;
    comp->cbdata = cbdata;
}

/** What a post function does; one of them per libfabric call. */
typedef ssize_t (*post_fn_t)(mca_btl_ofi_comp_t *comp, void *arg);

/**
 * Post through @p post, retrying EAGAIN after progress a bounded number
 * of times.  On success the operation is counted as outstanding; on
 * failure the completion goes back to its list.
 */
static inline int post_rma(mca_btl_ofi_comp_t *comp, post_fn_t post, void *arg)
{
    mca_btl_ofi_context_t *context = comp->context;
    ssize_t rc;

    /* counted first: the completion may be reaped by another thread before
     * post() even returns */
    (void) mca_btl_ofi_add64(&context->outstanding, 1);
    (void) mca_btl_ofi_add64(&comp->endpoint->outstanding, 1);
    for (int attempt = 0;; ++attempt) {
        rc = post(comp, arg);
        if (OPAL_LIKELY(0 == rc)) {
            return OPAL_SUCCESS;
        }
        if (-FI_EAGAIN != rc || attempt >= BTL_OFI_POST_RETRIES) {
            break;
        }
        mca_btl_ofi_count(comp->module, MCA_BTL_OFI_CNT_RETRY, 1);
        mca_btl_ofi_context_poll(context);
    }
    endpoint_op_done(comp);
    opal_free_list_return(&context->comps, &comp->super);
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

static ssize_t post_write(mca_btl_ofi_comp_t *comp, void *arg)
{
    rma_args_t *a = arg;
    rma_msg_t m;

    rma_msg_fill(&m, comp, a);
    /* the buffer is free on return of an injected write; either way the
     * completion is reported once the data is delivered */
    return fi_writemsg(comp->context->tx, &m.msg,
                       (a->inject ? FI_INJECT : 0) | FI_COMPLETION | FI_DELIVERY_COMPLETE);
}

/* Named too: under the endpoint's default (transmit-complete, for sends)
 * shm may serve a read by the origin's own copy, which checks no key: a
 * stale key would read whatever the address holds now. */
static ssize_t post_read(mca_btl_ofi_comp_t *comp, void *arg)
{
    rma_msg_t m;

    rma_msg_fill(&m, comp, arg);
    return fi_readmsg(comp->context->tx, &m.msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
}

static inline int check_endpoint(mca_btl_ofi_endpoint_t *endpoint)
{
    return (NULL != endpoint && endpoint->reachable) ? OPAL_SUCCESS : OPAL_ERR_UNREACH;
}

/**
 * The part of a put or a get after its checks: a completion, the remote
 * address and key, one post, and the MPI_T counters.  @p args holds the
 * local buffer, size and inject choice already.
 */
static int start_rma(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint,
                     mca_btl_ofi_op_t type, rma_args_t *args,
                     mca_btl_base_registration_handle_t *local_handle,
                     mca_btl_base_registration_handle_t *remote_handle, uint64_t remote_address,
                     mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata)
{
    bool is_put = (MCA_BTL_OFI_OP_PUT == type);
    mca_btl_ofi_comp_t *comp;
    int rc;

    comp = comp_get(module, mca_btl_ofi_thread_context(module), endpoint, type);
    if (OPAL_UNLIKELY(NULL == comp)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    comp_set_callback(comp, args->local, local_handle, cbfunc, cbcontext, cbdata);
    args->desc = mca_btl_ofi_local_desc(local_handle);
    args->raddr = mca_btl_ofi_remote_addr(remote_handle, remote_address);
    args->rkey = remote_handle->rkey;
    rc = post_rma(comp, is_put ? post_write : post_read, args);
    if (OPAL_LIKELY(OPAL_SUCCESS == rc)) {
        mca_btl_ofi_count(module, is_put ? MCA_BTL_OFI_CNT_PUT : MCA_BTL_OFI_CNT_GET, 1);
        mca_btl_ofi_count(module, is_put ? MCA_BTL_OFI_CNT_PUT_BYTES : MCA_BTL_OFI_CNT_GET_BYTES,
                          args->size);
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
    if (OPAL_UNLIKELY(OPAL_SUCCESS != check_endpoint(endpoint))) {
        return OPAL_ERR_UNREACH;
    }
    if (OPAL_UNLIKELY(size > btl->btl_put_limit)) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    args.inject = module->use_inject && size <= module->inject_size;
    if (OPAL_UNLIKELY(module->mr_local && NULL == local_handle && !args.inject)) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    return start_rma(module, endpoint, MCA_BTL_OFI_OP_PUT, &args, local_handle, remote_handle,
                     remote_address, cbfunc, cbcontext, cbdata);
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
    if (OPAL_UNLIKELY(OPAL_SUCCESS != check_endpoint(endpoint))) {
        return OPAL_ERR_UNREACH;
    }
    if (OPAL_UNLIKELY(size > btl->btl_get_limit)) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    if (OPAL_UNLIKELY(module->mr_local && NULL == local_handle)) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    return start_rma(module, endpoint, MCA_BTL_OFI_OP_GET, &args, local_handle, remote_handle,
                     remote_address, cbfunc, cbcontext, cbdata);
}

/* ------------------------------------------------------------------ */
/* Atomics                                                             */

typedef struct {
    enum fi_op op;
    enum fi_datatype dt;
    uint64_t raddr;
    uint64_t rkey;
    uint64_t address; /**< the target's virtual address */
} atomic_args_t;

/* Writes and atomics that fetch nothing name FI_DELIVERY_COMPLETE on every
 * call: net (libfabric 1.17) ignores the endpoint's default op_flags for
 * fi_write, and our MPI suite then read stale data after a flush. */
static ssize_t post_atomic(mca_btl_ofi_comp_t *comp, void *arg)
{
    atomic_args_t *a = arg;
    struct fi_ioc ioc = { .addr = comp->operands, .count = 1 };
    struct fi_rma_ioc rma_ioc = { .addr = a->raddr, .count = 1, .key = a->rkey };
    struct fi_msg_atomic msg = {
        .msg_iov = &ioc,
        .desc = &comp->operand_desc,
        .iov_count = 1,
        .addr = comp->endpoint->addr,
        .rma_iov = &rma_ioc,
        .rma_iov_count = 1,
        .datatype = a->dt,
        .op = a->op,
        .context = &comp->ctx.fi_ctx,
    };

    return fi_atomicmsg(comp->context->tx, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
}

static ssize_t post_fetch_atomic(mca_btl_ofi_comp_t *comp, void *arg)
{
    atomic_args_t *a = arg;
    return fi_fetch_atomic(comp->context->tx, comp->operands, 1, comp->operand_desc,
                           comp->operands + 2, comp->operand_desc, comp->endpoint->addr, a->raddr,
                           a->rkey, a->dt, a->op, &comp->ctx.fi_ctx);
}

static ssize_t post_compare_atomic(mca_btl_ofi_comp_t *comp, void *arg)
{
    atomic_args_t *a = arg;
    return fi_compare_atomic(comp->context->tx, comp->operands, 1, comp->operand_desc,
                             comp->operands + 1, comp->operand_desc, comp->operands + 2,
                             comp->operand_desc, comp->endpoint->addr, a->raddr, a->rkey, a->dt,
                             a->op, &comp->ctx.fi_ctx);
}

/* The target applies it (mca_btl_ofi_emu_enable); a refusal for want of a
 * fragment is the provider's EAGAIN to post_rma. */
static ssize_t post_emulated_atomic(mca_btl_ofi_comp_t *comp, void *arg)
{
    atomic_args_t *a = arg;
    int rc = mca_btl_ofi_emu_post(comp, a->op, a->dt, a->address, a->rkey);

    if (OPAL_SUCCESS == rc) {
        return 0;
    }
    return (OPAL_ERR_OUT_OF_RESOURCE == rc) ? -FI_EAGAIN : -FI_EIO;
}

/** Store a 64-bit BTL operand in the width the datatype needs. */
static inline void store_operand(uint64_t *slot, uint64_t value, enum fi_datatype dt)
{
    *slot = 0;
    if (4 == mca_btl_ofi_datatype_size(dt)) {
        uint32_t narrow = (uint32_t) value;
        memcpy(slot, &narrow, sizeof(narrow));
    } else {
        *slot = value;
    }
}

static int start_atomic(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint,
                        mca_btl_ofi_op_t type, post_fn_t post, atomic_args_t *args,
                        const uint64_t operands[2], void *local_address,
                        mca_btl_base_registration_handle_t *local_handle,
                        mca_btl_base_registration_handle_t *remote_handle, uint64_t remote_address,
                        mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata)
{
    mca_btl_ofi_comp_t *comp;
    int rc;

    if (OPAL_UNLIKELY(OPAL_SUCCESS != check_endpoint(endpoint))) {
        return OPAL_ERR_UNREACH;
    }
    comp = comp_get(module, mca_btl_ofi_thread_context(module), endpoint, type);
    if (OPAL_UNLIKELY(NULL == comp)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    comp_set_callback(comp, local_address, local_handle, cbfunc, cbcontext, cbdata);
    store_operand(comp->operands, operands[0], args->dt);
    store_operand(comp->operands + 1, operands[1], args->dt);
    comp->operands[2] = 0;
    comp->result_size = (MCA_BTL_OFI_OP_AOP == type) ? 0 : mca_btl_ofi_datatype_size(args->dt);
    args->raddr = mca_btl_ofi_remote_addr(remote_handle, remote_address);
    args->rkey = remote_handle->rkey;
    args->address = remote_address;
    rc = post_rma(comp, module->emulate_atomics ? post_emulated_atomic : post, args);
    if (OPAL_LIKELY(OPAL_SUCCESS == rc)) {
        mca_btl_ofi_count(module, MCA_BTL_OFI_CNT_ATOMIC, 1);
    }
    return rc;
}

int mca_btl_ofi_aop(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                    uint64_t remote_address, mca_btl_base_registration_handle_t *remote_handle,
                    mca_btl_base_atomic_op_t op, uint64_t operand, int flags, int order,
                    mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata)
{
    mca_btl_ofi_module_t *module = (mca_btl_ofi_module_t *) btl;
    atomic_args_t args = { .dt = datatype_for(flags) };
    uint64_t operands[2] = { operand, 0 };
    int fop = fi_op_for(op);

    (void) order;
    if (fop < 0 || !atomic_confirmed(module->atomic_post_ok, (enum fi_op) fop, args.dt)) {
        return OPAL_ERR_NOT_SUPPORTED;
    }
    args.op = (enum fi_op) fop;
    return start_atomic(module, endpoint, MCA_BTL_OFI_OP_AOP, post_atomic, &args, operands, NULL,
                        NULL, remote_handle, remote_address, cbfunc, cbcontext, cbdata);
}

int mca_btl_ofi_afop(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                     void *local_address, uint64_t remote_address,
                     mca_btl_base_registration_handle_t *local_handle,
                     mca_btl_base_registration_handle_t *remote_handle, mca_btl_base_atomic_op_t op,
                     uint64_t operand, int flags, int order,
                     mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata)
{
    mca_btl_ofi_module_t *module = (mca_btl_ofi_module_t *) btl;
    atomic_args_t args = { .dt = datatype_for(flags) };
    uint64_t operands[2] = { operand, 0 };
    int fop = fi_op_for(op);

    (void) order;
    if (fop < 0 || !atomic_confirmed(module->atomic_fetch_ok, (enum fi_op) fop, args.dt)) {
        return OPAL_ERR_NOT_SUPPORTED;
    }
    args.op = (enum fi_op) fop;
    return start_atomic(module, endpoint, MCA_BTL_OFI_OP_AFOP, post_fetch_atomic, &args, operands,
                        local_address, local_handle, remote_handle, remote_address, cbfunc,
                        cbcontext, cbdata);
}

int mca_btl_ofi_acswap(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                       void *local_address, uint64_t remote_address,
                       mca_btl_base_registration_handle_t *local_handle,
                       mca_btl_base_registration_handle_t *remote_handle, uint64_t compare,
                       uint64_t value, int flags, int order,
                       mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata)
{
    mca_btl_ofi_module_t *module = (mca_btl_ofi_module_t *) btl;
    atomic_args_t args = { .op = FI_CSWAP, .dt = datatype_for(flags & ~MCA_BTL_ATOMIC_FLAG_FLOAT) };
    uint64_t operands[2] = { value, compare };

    (void) order;
    if (!atomic_confirmed(module->atomic_fetch_ok, FI_CSWAP, args.dt)) {
        return OPAL_ERR_NOT_SUPPORTED;
    }
    return start_atomic(module, endpoint, MCA_BTL_OFI_OP_CSWAP, post_compare_atomic, &args,
                        operands, local_address, local_handle, remote_handle, remote_address,
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

static void progress_module(mca_btl_ofi_module_t *module)
{
    for (int i = 0; i < module->num_contexts; ++i) {
        (void) mca_btl_ofi_context_progress(module->contexts + i);
    }
}

int mca_btl_ofi_flush(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint)
{
    mca_btl_ofi_module_t *module = (mca_btl_ofi_module_t *) btl;

    mca_btl_ofi_count(module, MCA_BTL_OFI_CNT_FLUSH, 1);
    if (NULL != endpoint) {
        while (endpoint->outstanding > 0) {
            progress_module(module);
        }
    } else {
        while (module_outstanding(module) > 0) {
            progress_module(module);
        }
    }
    opal_atomic_mb();
    return OPAL_SUCCESS;
}
