/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * Atomics: which operations and datatypes the provider confirms, posting
 * them through btl_ofi_rdma.c's one posting path, and applying them at the
 * target for providers that move RMA but refuse fi_atomic (net in
 * libfabric 1.17).
 *
 * Without BTL atomics osc/rdma would not take our fi_write/fi_read either
 * and would run every one-sided operation as active messages of its own;
 * with target-applied atomics only the atomic travels as a message: the
 * origin sends a request, the target's progress applies it to its own
 * memory with a CPU compare-and-swap loop and answers with the old value,
 * and the answer completes the operation.  A target applies every atomic
 * with CPU instructions, so they are atomic with respect to each other and
 * to osc/rdma's own CPU atomics on that memory.  The two message kinds are
 * entries this file fills in frag.c's table of message handlers.
 *
 * The target checks each request against the regions it registered: the
 * key must be live, the bytes inside its region and remote-writable, else
 * the origin gets an error completion.
 */

#include "opal_config.h"

#include <string.h>

#include "btl_ofi.h"

#include <rdma/fi_ext.h>

/* ------------------------------------------------------------------ */
/* What the provider confirms                                          */

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

static void probe_provider_atomics(mca_btl_ofi_module_t *module)
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

/** What an origin asks of a target. */
typedef struct {
    uint64_t request; /**< the origin's completion object, echoed back */
    uint64_t address; /**< target virtual address */
    uint64_t rkey;    /**< key of the region holding it */
    uint64_t operand;
    uint64_t compare;
    uint8_t op; /**< enum fi_op */
    uint8_t dt; /**< enum fi_datatype */
    uint8_t pad[6];
} emu_request_t;

/** What the target answers. */
typedef struct {
    uint64_t request; /**< as in the request */
    uint64_t result;  /**< the value before the operation */
    int32_t status;   /**< OPAL_SUCCESS or an OPAL error */
    uint32_t pad;
} emu_reply_t;

/* ------------------------------------------------------------------ */
/* Registered regions, so that a target can check what it is asked.   */
/* Kept only while atomics are applied here: before that (module open) */
/* only our own free lists register, and no peer targets them.         */

void mca_btl_ofi_regions_add(mca_btl_ofi_module_t *module, mca_btl_ofi_reg_t *reg)
{
    if (!module->emulate_atomics) {
        return;
    }
    mca_btl_ofi_lock(&module->lock);
    (void) opal_hash_table_set_value_uint64(&module->regions, reg->handle.rkey, reg);
    mca_btl_ofi_unlock(&module->lock);
}

void mca_btl_ofi_regions_remove(mca_btl_ofi_module_t *module, mca_btl_ofi_reg_t *reg)
{
    void *found = NULL;

    if (!module->emulate_atomics) {
        return;
    }
    mca_btl_ofi_lock(&module->lock);
    if (OPAL_SUCCESS == opal_hash_table_get_value_uint64(&module->regions, reg->handle.rkey, &found)
        && found == reg) {
        (void) opal_hash_table_remove_value_uint64(&module->regions, reg->handle.rkey);
    }
    mca_btl_ofi_unlock(&module->lock);
}

static bool region_allows(mca_btl_ofi_module_t *module, uint64_t rkey, uint64_t address,
                          size_t size)
{
    mca_btl_ofi_reg_t *reg = NULL;
    bool ok = false;

    mca_btl_ofi_lock(&module->lock);
    if (OPAL_SUCCESS == opal_hash_table_get_value_uint64(&module->regions, rkey, (void **) &reg)) {
        uintptr_t base = (uintptr_t) reg->base.base, bound = (uintptr_t) reg->base.bound;
        ok = (reg->base.access_flags
              & (MCA_RCACHE_ACCESS_REMOTE_WRITE | MCA_RCACHE_ACCESS_REMOTE_ATOMIC))
             && address >= base && address + size - 1 <= bound && address + size > address;
    }
    mca_btl_ofi_unlock(&module->lock);
    return ok;
}

/* ------------------------------------------------------------------ */
/* The operations, on values of the datatype's width.                 */

static uint64_t add_values(enum fi_datatype dt, uint64_t a, uint64_t b)
{
    if (FI_DOUBLE == dt) {
        double x, y;
        memcpy(&x, &a, sizeof(x));
        memcpy(&y, &b, sizeof(y));
        x += y;
        memcpy(&a, &x, sizeof(x));
        return a;
    }
    if (FI_FLOAT == dt) {
        float x, y;
        uint32_t a32 = (uint32_t) a, b32 = (uint32_t) b;
        memcpy(&x, &a32, sizeof(x));
        memcpy(&y, &b32, sizeof(y));
        x += y;
        memcpy(&a32, &x, sizeof(x));
        return a32;
    }
    return a + b;
}

/** The new value of a location holding @p old; @p ok false for an op we do not know. */
static uint64_t combine(enum fi_op op, enum fi_datatype dt, uint64_t old, uint64_t operand,
                        uint64_t compare, bool *ok)
{
    *ok = true;
    switch (op) {
    case FI_SUM:
        return add_values(dt, old, operand);
    case FI_BAND:
        return old & operand;
    case FI_BOR:
        return old | operand;
    case FI_BXOR:
        return old ^ operand;
    case FI_LAND:
        return (0 != old) && (0 != operand);
    case FI_LOR:
        return (0 != old) || (0 != operand);
    case FI_LXOR:
        return (0 != old) != (0 != operand);
    case FI_ATOMIC_WRITE:
        return operand;
    case FI_CSWAP:
        return (old == compare) ? operand : old;
    default:
        *ok = false;
        return old;
    }
}

static bool float_type(enum fi_datatype dt)
{
    return FI_FLOAT == dt || FI_DOUBLE == dt;
}

/** Apply one request to local memory; returns the old value. */
static int apply(const emu_request_t *req, uint64_t *result)
{
    enum fi_op op = (enum fi_op) req->op;
    enum fi_datatype dt = (enum fi_datatype) req->dt;
    bool ok = true;

    /* floats only add, swap and compare bits */
    if (float_type(dt) && FI_SUM != op && FI_ATOMIC_WRITE != op && FI_CSWAP != op) {
        return OPAL_ERR_NOT_SUPPORTED;
    }
    if (4 == mca_btl_ofi_datatype_size(dt)) {
        opal_atomic_int32_t *where = (opal_atomic_int32_t *) (uintptr_t) req->address;
        int32_t old = *where, next;
        do {
            next = (int32_t) (uint32_t) combine(op, dt, (uint32_t) old, (uint32_t) req->operand,
                                                (uint32_t) req->compare, &ok);
        } while (ok && !opal_atomic_compare_exchange_strong_32(where, &old, next));
        *result = (uint32_t) old;
    } else {
        opal_atomic_int64_t *where = (opal_atomic_int64_t *) (uintptr_t) req->address;
        int64_t old = *where, next;
        do {
            next = (int64_t) combine(op, dt, (uint64_t) old, req->operand, req->compare, &ok);
        } while (ok && !opal_atomic_compare_exchange_strong_64(where, &old, next));
        *result = (uint64_t) old;
    }
    return ok ? OPAL_SUCCESS : OPAL_ERR_NOT_SUPPORTED;
}

/* ------------------------------------------------------------------ */
/* Target side                                                         */

static void send_reply(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint,
                       const emu_reply_t *reply)
{
    mca_btl_ofi_frag_t *frag = mca_btl_ofi_frag_alloc_internal(module, endpoint, sizeof(*reply));
    int rc;

    if (NULL == frag) {
        MCA_BTL_OFI_VERBOSE(1, "no fragment for an atomic reply to %s",
                            OPAL_NAME_PRINT(endpoint->proc->proc_name));
        return;
    }
    memcpy(frag->segment.seg_addr.pval, reply, sizeof(*reply));
    rc = mca_btl_ofi_frag_send_internal(module, frag, MCA_BTL_OFI_KIND_ATOMIC_REPLY);
    if (rc < 0) {
        MCA_BTL_OFI_VERBOSE(1, "an atomic reply to %s failed: %d",
                            OPAL_NAME_PRINT(endpoint->proc->proc_name), rc);
    }
}

static void serve_request(mca_btl_ofi_module_t *module, const mca_btl_ofi_am_hdr_t *hdr, size_t len)
{
    mca_btl_ofi_endpoint_t *endpoint = mca_btl_ofi_endpoint_of_sender(module, hdr);
    emu_request_t req;
    emu_reply_t reply = { .status = OPAL_SUCCESS };
    enum fi_datatype dt;
    size_t size;

    if (NULL == endpoint || len != sizeof(req)) {
        MCA_BTL_OFI_VERBOSE(1, "dropped a malformed atomic request (%zu bytes)", len);
        return;
    }
    memcpy(&req, hdr + 1, sizeof(req));
    reply.request = req.request;
    dt = (enum fi_datatype) req.dt;
    size = mca_btl_ofi_datatype_size(dt);
    if (!(FI_INT32 == dt || FI_INT64 == dt || float_type(dt)) || 0 != req.address % size) {
        reply.status = OPAL_ERR_BAD_PARAM;
    } else if (!region_allows(module, req.rkey, req.address, size)) {
        MCA_BTL_OFI_VERBOSE(1, "refused an atomic from %s at 0x%" PRIx64 ": no such region",
                            OPAL_NAME_PRINT(endpoint->proc->proc_name), req.address);
        reply.status = OPAL_ERR_PERM;
    } else {
        reply.status = apply(&req, &reply.result);
    }
    send_reply(module, endpoint, &reply);
}

/* ------------------------------------------------------------------ */
/* Origin side                                                         */

/* The answer completes the operation as a CQ entry would have. */
static void take_reply(mca_btl_ofi_module_t *module, const mca_btl_ofi_am_hdr_t *hdr, size_t len)
{
    emu_reply_t reply;
    mca_btl_ofi_comp_t *comp;

    (void) module;
    if (len != sizeof(reply)) {
        MCA_BTL_OFI_VERBOSE(1, "dropped a malformed atomic reply (%zu bytes)", len);
        return;
    }
    memcpy(&reply, hdr + 1, sizeof(reply));
    comp = (mca_btl_ofi_comp_t *) (uintptr_t) reply.request;
    comp->operands[2] = reply.result;
    (void) comp->ctx.complete(&comp->ctx, 0, reply.status, true);
}

static int send_request(mca_btl_ofi_comp_t *comp, enum fi_op op, enum fi_datatype dt,
                        uint64_t remote_address, uint64_t rkey)
{
    mca_btl_ofi_module_t *module = comp->module;
    mca_btl_ofi_frag_t *frag =
        mca_btl_ofi_frag_alloc_internal(module, comp->endpoint, sizeof(emu_request_t));
    emu_request_t req = {
        .request = (uint64_t) (uintptr_t) comp,
        .address = remote_address,
        .rkey = rkey,
        .operand = comp->operands[0],
        .compare = comp->operands[1],
        .op = (uint8_t) op,
        .dt = (uint8_t) dt,
    };
    int rc;

    if (NULL == frag) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    memcpy(frag->segment.seg_addr.pval, &req, sizeof(req));
    rc = mca_btl_ofi_frag_send_internal(module, frag, MCA_BTL_OFI_KIND_ATOMIC_REQUEST);
    return (rc < 0) ? rc : OPAL_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Posting                                                             */

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
        .addr = comp->addr,
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
                           comp->operands + 2, comp->operand_desc, comp->addr, a->raddr, a->rkey,
                           a->dt, a->op, &comp->ctx.fi_ctx);
}

static ssize_t post_compare_atomic(mca_btl_ofi_comp_t *comp, void *arg)
{
    atomic_args_t *a = arg;
    return fi_compare_atomic(comp->context->tx, comp->operands, 1, comp->operand_desc,
                             comp->operands + 1, comp->operand_desc, comp->operands + 2,
                             comp->operand_desc, comp->addr, a->raddr, a->rkey, a->dt, a->op,
                             &comp->ctx.fi_ctx);
}

/* The target applies it (apply_at_target); a refusal for want of a
 * fragment is the provider's EAGAIN to mca_btl_ofi_post. */
static ssize_t post_emulated_atomic(mca_btl_ofi_comp_t *comp, void *arg)
{
    atomic_args_t *a = arg;
    int rc = send_request(comp, a->op, a->dt, a->address, a->rkey);

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

/* The operands in the completion object's payload, which the provider
 * reads and writes after the call returns. */
static void load_operands(mca_btl_ofi_comp_t *comp, mca_btl_ofi_post_fn_t post,
                          const atomic_args_t *args, const uint64_t operands[2])
{
    store_operand(comp->operands, operands[0], args->dt);
    store_operand(comp->operands + 1, operands[1], args->dt);
    comp->operands[2] = 0;
    comp->result_size = (post_atomic == post) ? 0 : mca_btl_ofi_datatype_size(args->dt);
}

/*
 * A same-host peer's atomic goes through the lead's shm module: shm and
 * the network provider both have the target's CPU apply atomics with
 * atomic instructions, so the two stay atomic with each other, and shm
 * serves it without the network provider's loopback.  shm addresses the
 * target's memory by virtual address, with the key of the region's copy
 * on its domain.
 */
static int start_same_host_atomic(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint,
                                  mca_btl_ofi_post_fn_t post, atomic_args_t *args,
                                  const uint64_t operands[2], void *local_address,
                                  mca_btl_base_registration_handle_t *remote_handle,
                                  uint64_t remote_address, mca_btl_base_rdma_completion_fn_t cbfunc,
                                  void *cbcontext, void *cbdata)
{
    mca_btl_ofi_comp_t *comp =
        mca_btl_ofi_comp_get_same_host(module, endpoint, local_address, cbfunc, cbcontext, cbdata);
    int rc;

    if (OPAL_UNLIKELY(NULL == comp)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    load_operands(comp, post, args, operands);
    args->raddr = remote_address;
    args->rkey = remote_handle->rail_keys[module->num_rails - 1];
    args->address = remote_address;
    rc = mca_btl_ofi_post(comp, post, args);
    if (OPAL_LIKELY(OPAL_SUCCESS == rc)) {
        mca_btl_ofi_app_count(module, MCA_BTL_OFI_CNT_ATOMIC, 1);
        mca_btl_ofi_app_count(module, MCA_BTL_OFI_CNT_LOCAL_ATOMIC, 1);
    }
    return rc;
}

/*
 * An atomic that comes without a registration, at an address of our own:
 * osc/rdma gives none for memory it reaches directly (its own rank's
 * window, and with MPI_Win_allocate its node's shared segment) when our
 * atomics are atomic with the CPU's (MCA_BTL_ATOMIC_SUPPORTS_GLOB),
 * meaning the CPU to serve it.  In a job across hosts it still asks us
 * first (5.0's compare-and-swap with our patch, 4.1's atomics), and a
 * refusal sends it to a copy-compare-copy under a lock that the other
 * ranks' network swaps never take, so two ranks could win one spin lock.
 * The CPU applies it here with atomic instructions, as the provider does
 * at the target, and it completes on return as a same-host copy does.
 */
static int apply_in_place(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint,
                          const atomic_args_t *args, const uint64_t operands[2], bool fetch,
                          void *local_address, uint64_t remote_address,
                          mca_btl_base_registration_handle_t *local_handle,
                          mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata)
{
    const emu_request_t req = {
        .address = remote_address,
        .operand = operands[0],
        .compare = operands[1],
        .op = (uint8_t) args->op,
        .dt = (uint8_t) args->dt,
    };
    size_t size = mca_btl_ofi_datatype_size(args->dt);
    uint64_t old = 0, result;
    int rc;

    if (0 == (module->super.btl_atomic_flags & MCA_BTL_ATOMIC_SUPPORTS_GLOB)
        || 0 != remote_address % size) {
        return OPAL_ERR_BAD_PARAM;
    }
    rc = apply(&req, &old);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    if (fetch) {
        /* in the width the caller's buffer has, as comp_complete copies */
        store_operand(&result, old, args->dt);
        memcpy(local_address, &result, size);
    }
    mca_btl_ofi_app_count(module, MCA_BTL_OFI_CNT_ATOMIC, 1);
    mca_btl_ofi_app_count(module, MCA_BTL_OFI_CNT_IN_PLACE_ATOMIC, 1);
    if (NULL != cbfunc) {
        cbfunc(&module->super, endpoint, local_address, local_handle, cbcontext, cbdata,
               OPAL_SUCCESS);
    }
    return OPAL_SUCCESS;
}

static int start_atomic(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint,
                        mca_btl_ofi_post_fn_t post, atomic_args_t *args, const uint64_t operands[2],
                        void *local_address, mca_btl_base_registration_handle_t *local_handle,
                        mca_btl_base_registration_handle_t *remote_handle, uint64_t remote_address,
                        mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata)
{
    mca_btl_ofi_comp_t *comp;
    int rc;

    if (OPAL_UNLIKELY(OPAL_SUCCESS != mca_btl_ofi_check_endpoint(endpoint))) {
        return OPAL_ERR_UNREACH;
    }
    if (OPAL_UNLIKELY(NULL == remote_handle)) {
        return apply_in_place(module, endpoint, args, operands, post_atomic != post, local_address,
                              remote_address, local_handle, cbfunc, cbcontext, cbdata);
    }
    if (NULL != endpoint->same_host.ep && NULL != module->same_host) {
        return start_same_host_atomic(module, endpoint, post, args, operands, local_address,
                                      remote_handle, remote_address, cbfunc, cbcontext, cbdata);
    }
    if (OPAL_UNLIKELY(module->num_rails > 1 && 0 == (endpoint->rails.up & 1))) {
        return mca_btl_ofi_atomic_rail_check(module, endpoint, OPAL_ERR_UNREACH);
    }
    comp = mca_btl_ofi_comp_get(module, endpoint, local_address, local_handle, cbfunc, cbcontext,
                                cbdata);
    if (OPAL_UNLIKELY(NULL == comp)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    load_operands(comp, post, args, operands);
    args->raddr = mca_btl_ofi_remote_addr(remote_handle, remote_address);
    args->rkey = remote_handle->rkey;
    args->address = remote_address;
    if (OPAL_UNLIKELY(module->num_rails > 1)) {
        mca_btl_ofi_rail_watch(comp, 0, args->raddr, args->rkey,
                               mca_btl_ofi_datatype_size(args->dt));
    }
    rc = module->emulate_atomics ? mca_btl_ofi_post_as_message(comp, post_emulated_atomic, args)
                                 : mca_btl_ofi_post(comp, post, args);
    if (OPAL_LIKELY(OPAL_SUCCESS == rc)) {
        mca_btl_ofi_app_count(module, MCA_BTL_OFI_CNT_ATOMIC, 1);
    }
    if (OPAL_UNLIKELY(module->num_rails > 1)) {
        if (OPAL_SUCCESS != rc) {
            mca_btl_ofi_rail_unwatch(endpoint, 0);
        }
        rc = mca_btl_ofi_atomic_rail_check(module, endpoint, rc);
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
    return start_atomic(module, endpoint, post_atomic, &args, operands, NULL, NULL, remote_handle,
                        remote_address, cbfunc, cbcontext, cbdata);
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
    return start_atomic(module, endpoint, post_fetch_atomic, &args, operands, local_address,
                        local_handle, remote_handle, remote_address, cbfunc, cbcontext, cbdata);
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
    return start_atomic(module, endpoint, post_compare_atomic, &args, operands, local_address,
                        local_handle, remote_handle, remote_address, cbfunc, cbcontext, cbdata);
}

/* ------------------------------------------------------------------ */
/* Setup                                                               */

/** What osc/rdma may ask once atomics are applied at the target. */
static int apply_at_target(mca_btl_ofi_module_t *module)
{
    static const enum fi_op ops[] = { FI_SUM,  FI_BAND, FI_BOR,          FI_BXOR,
                                      FI_LAND, FI_LOR,  FI_ATOMIC_WRITE, FI_LXOR };
    uint32_t ints = (1u << FI_INT32) | (1u << FI_INT64);
    uint32_t all = ints | (1u << FI_FLOAT) | (1u << FI_DOUBLE);

    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); ++i) {
        uint32_t types = (FI_SUM == ops[i] || FI_ATOMIC_WRITE == ops[i]) ? all : ints;
        module->atomic_fetch_ok[ops[i]] = types;
        module->atomic_post_ok[ops[i]] = types;
    }
    module->atomic_fetch_ok[FI_CSWAP] = ints;
    OBJ_CONSTRUCT(&module->regions, opal_hash_table_t);
    if (OPAL_SUCCESS != opal_hash_table_init(&module->regions, 256)) {
        OBJ_DESTRUCT(&module->regions);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    /* a request is served by the target alone, even from the progress
     * thread; the answer completes the origin's operation, which calls
     * osc/rdma */
    mca_btl_ofi_msg_handlers[MCA_BTL_OFI_KIND_ATOMIC_REQUEST] =
        (mca_btl_ofi_msg_handler_t){ serve_request, false };
    mca_btl_ofi_msg_handlers[MCA_BTL_OFI_KIND_ATOMIC_REPLY] =
        (mca_btl_ofi_msg_handler_t){ take_reply, true };
    module->emulate_atomics = true;
    module->super.btl_atomic_flags = MCA_BTL_ATOMIC_SUPPORTS_ADD | MCA_BTL_ATOMIC_SUPPORTS_AND
                                     | MCA_BTL_ATOMIC_SUPPORTS_OR | MCA_BTL_ATOMIC_SUPPORTS_XOR
                                     | MCA_BTL_ATOMIC_SUPPORTS_LAND | MCA_BTL_ATOMIC_SUPPORTS_LOR
                                     | MCA_BTL_ATOMIC_SUPPORTS_LXOR | MCA_BTL_ATOMIC_SUPPORTS_SWAP
                                     | MCA_BTL_ATOMIC_SUPPORTS_CSWAP | MCA_BTL_ATOMIC_SUPPORTS_32BIT
                                     | MCA_BTL_ATOMIC_SUPPORTS_FLOAT;
    module->super.btl_flags |= MCA_BTL_FLAGS_ATOMIC_OPS | MCA_BTL_FLAGS_ATOMIC_FOPS;
    MCA_BTL_OFI_VERBOSE(1, "%s: the provider has no atomics: applying them at the target",
                        module->device_name);
    return OPAL_SUCCESS;
}

/*
 * Whether the provider carries RMA and atomics on the device or emulates
 * them in software.  Only efa answers (fi_getopt with its
 * FI_OPT_EFA_EMULATED_* options, from libfabric 2.x's headers on); the
 * answer is reported, the choice of path stays fi_query_atomic's.
 */
static void report_emulation(mca_btl_ofi_module_t *module)
{
#if FI_MAJOR_VERSION >= 2
    static const struct {
        int option;
        const char *what;
    } options[] = {
        { FI_OPT_EFA_EMULATED_READ, "RMA read" },
        { FI_OPT_EFA_EMULATED_WRITE, "RMA write" },
        { FI_OPT_EFA_EMULATED_ATOMICS, "atomics" },
    };

    if (!mca_btl_ofi_list_names("efa", module->info->fabric_attr->prov_name)) {
        return;
    }
    for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); ++i) {
        bool emulated = false;
        size_t len = sizeof(emulated);
        int rc = fi_getopt(&module->ep->fid, FI_OPT_ENDPOINT, options[i].option, &emulated, &len);
        if (0 != rc) {
            MCA_BTL_OFI_VERBOSE(1, "%s: fi_getopt cannot say whether %s is emulated: %s",
                                module->device_name, options[i].what, fi_strerror(-rc));
            continue;
        }
        MCA_BTL_OFI_VERBOSE(1, "%s: %s %s (fi_getopt)", module->device_name, options[i].what,
                            emulated ? "emulated by the provider" : "offloaded to the device");
    }
#else
    (void) module;
#endif
}

/*
 * The providers whose atomics the target's CPU applies with atomic
 * instructions: libfabric's software atomics (prov/util's ofi_atomic
 * handlers, __atomic builtins), which sockets, shm and every ofi_rxm
 * layering use.  Not a NIC's atomics.
 */
#define BTL_OFI_CPU_ATOMIC_PROVIDERS "sockets,shm,ofi_rxm"

/*
 * MCA_BTL_ATOMIC_SUPPORTS_GLOB: our atomics are atomic with respect to the
 * CPU's.  It lets osc/rdma, in a job that spans nodes, take a window's lock
 * words of its own node with CPU atomics and reach same-node peers' memory
 * of an MPI_Win_allocate window with loads and stores, instead of sending
 * every operation through the provider to the node leader's endpoint (on
 * tcp;ofi_rxm a loopback TCP connection; about 100 times slower per ARMCI
 * strided put, docs/clients.md).  True when the target's CPU applies
 * every atomic: ours (apply_at_target's compare-and-swap loop) or a
 * provider of BTL_OFI_CPU_ATOMIC_PROVIDERS.  osc/rdma (4.1 to 5.0.x) reads
 * the flag in btl_flags, although btl.h defines it among the atomic flags,
 * so it is set in both (nothing else of btl_flags uses 0x20000000).
 */
static void advertise_cpu_coherence(mca_btl_ofi_module_t *module)
{
    bool cpu = module->emulate_atomics
               || mca_btl_ofi_list_names(BTL_OFI_CPU_ATOMIC_PROVIDERS,
                                         module->info->fabric_attr->prov_name);

    if (!cpu || 0 == (module->super.btl_atomic_flags & MCA_BTL_ATOMIC_SUPPORTS_ADD)) {
        return;
    }
    module->super.btl_atomic_flags |= MCA_BTL_ATOMIC_SUPPORTS_GLOB;
    module->super.btl_flags |= MCA_BTL_ATOMIC_SUPPORTS_GLOB;
    MCA_BTL_OFI_VERBOSE(10, "%s: atomics are applied by the target's CPU: global atomicity",
                        module->device_name);
}

/* Target-applied atomics travel as messages, so they need two-sided
 * traffic; without it a provider without atomics gets none.  A provider
 * that does not offer FI_ATOMIC (efa-direct) is not asked what it has. */
int mca_btl_ofi_atomics_setup(mca_btl_ofi_module_t *module)
{
    if (module->provider_atomics) {
        probe_provider_atomics(module);
    } else {
        memset(module->atomic_fetch_ok, 0, sizeof(module->atomic_fetch_ok));
        memset(module->atomic_post_ok, 0, sizeof(module->atomic_post_ok));
        module->super.btl_atomic_flags = 0;
        module->super.btl_flags &= ~(MCA_BTL_FLAGS_ATOMIC_OPS | MCA_BTL_FLAGS_ATOMIC_FOPS);
        MCA_BTL_OFI_VERBOSE(10, "%s: atomic support flags 0x0 (the provider offers no FI_ATOMIC)",
                            module->device_name);
    }
    report_emulation(module);
    if (module->two_sided
        && (mca_btl_ofi_component.emulate_atomics
            || 0 == (module->super.btl_atomic_flags & MCA_BTL_ATOMIC_SUPPORTS_ADD))) {
        int rc = apply_at_target(module);
        if (OPAL_SUCCESS != rc) {
            return rc;
        }
    }
    advertise_cpu_coherence(module);
    return OPAL_SUCCESS;
}

/* Registrations the cache still holds are released after this (module
 * finalize): they must find no table. */
void mca_btl_ofi_atomics_teardown(mca_btl_ofi_module_t *module)
{
    if (module->emulate_atomics) {
        module->emulate_atomics = false;
        OBJ_DESTRUCT(&module->regions);
    }
}
