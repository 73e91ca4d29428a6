/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * Atomics for providers that move RMA but refuse fi_atomic (net in
 * libfabric 1.17).  Without BTL atomics osc/rdma would not take our
 * fi_write/fi_read either and would run every one-sided operation as active
 * messages of its own; with these, only the atomic travels as a message:
 * the origin sends a request, the target's progress applies it to its own
 * memory with a CPU compare-and-swap loop and answers with the old value,
 * and the answer completes the operation.  A target applies every atomic
 * with CPU instructions, so they are atomic with respect to each other and
 * to osc/rdma's own CPU atomics on that memory.
 *
 * The target checks each request against the regions it registered: the
 * key must be live, the bytes inside its region and remote-writable, else
 * the origin gets an error completion.
 */

#include "opal_config.h"

#include <string.h>

#include "opal/util/proc.h"

#include "btl_ofi.h"

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
/* Kept only once atomics are applied here: before that (module open)  */
/* only our own free lists register, and no peer targets them.         */

void mca_btl_ofi_regions_add(mca_btl_ofi_module_t *module, mca_btl_ofi_reg_t *reg)
{
    if (!module->emulate_atomics) {
        return;
    }
    OPAL_THREAD_LOCK(&module->lock);
    (void) opal_hash_table_set_value_uint64(&module->regions, reg->handle.rkey, reg);
    OPAL_THREAD_UNLOCK(&module->lock);
}

void mca_btl_ofi_regions_remove(mca_btl_ofi_module_t *module, mca_btl_ofi_reg_t *reg)
{
    void *found = NULL;

    if (!module->emulate_atomics) {
        return;
    }
    OPAL_THREAD_LOCK(&module->lock);
    if (OPAL_SUCCESS == opal_hash_table_get_value_uint64(&module->regions, reg->handle.rkey, &found)
        && found == reg) {
        (void) opal_hash_table_remove_value_uint64(&module->regions, reg->handle.rkey);
    }
    OPAL_THREAD_UNLOCK(&module->lock);
}

static bool region_allows(mca_btl_ofi_module_t *module, uint64_t rkey, uint64_t address,
                          size_t size)
{
    mca_btl_ofi_reg_t *reg = NULL;
    bool ok = false;

    OPAL_THREAD_LOCK(&module->lock);
    if (OPAL_SUCCESS == opal_hash_table_get_value_uint64(&module->regions, rkey, (void **) &reg)) {
        uintptr_t base = (uintptr_t) reg->base.base, bound = (uintptr_t) reg->base.bound;
        ok = (reg->base.access_flags
              & (MCA_RCACHE_ACCESS_REMOTE_WRITE | MCA_RCACHE_ACCESS_REMOTE_ATOMIC))
             && address >= base && address + size - 1 <= bound && address + size > address;
    }
    OPAL_THREAD_UNLOCK(&module->lock);
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
    mca_btl_ofi_frag_t *frag = mca_btl_ofi_am_frag_alloc(module, endpoint, sizeof(*reply));
    int rc;

    if (NULL == frag) {
        MCA_BTL_OFI_VERBOSE(1, "no fragment for an atomic reply to %s",
                            OPAL_NAME_PRINT(endpoint->proc->proc_name));
        return;
    }
    memcpy(frag->segment.seg_addr.pval, reply, sizeof(*reply));
    rc = mca_btl_ofi_am_send_internal(module, frag, MCA_BTL_OFI_KIND_ATOMIC_REPLY);
    if (rc < 0) {
        MCA_BTL_OFI_VERBOSE(1, "an atomic reply to %s failed: %d",
                            OPAL_NAME_PRINT(endpoint->proc->proc_name), rc);
    }
}

void mca_btl_ofi_emu_serve(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint,
                           const void *payload, size_t len)
{
    emu_request_t req;
    emu_reply_t reply = { .status = OPAL_SUCCESS };
    enum fi_datatype dt;
    size_t size;

    if (NULL == endpoint || len != sizeof(req)) {
        MCA_BTL_OFI_VERBOSE(1, "dropped a malformed atomic request (%zu bytes)", len);
        return;
    }
    memcpy(&req, payload, sizeof(req));
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

void mca_btl_ofi_emu_answered(const void *payload, size_t len)
{
    emu_reply_t reply;
    mca_btl_ofi_comp_t *comp;

    if (len != sizeof(reply)) {
        MCA_BTL_OFI_VERBOSE(1, "dropped a malformed atomic reply (%zu bytes)", len);
        return;
    }
    memcpy(&reply, payload, sizeof(reply));
    comp = (mca_btl_ofi_comp_t *) (uintptr_t) reply.request;
    comp->operands[2] = reply.result;
    mca_btl_ofi_rdma_complete(comp, reply.status);
}

int mca_btl_ofi_emu_post(mca_btl_ofi_comp_t *comp, enum fi_op op, enum fi_datatype dt,
                         uint64_t remote_address, uint64_t rkey)
{
    mca_btl_ofi_module_t *module = comp->module;
    mca_btl_ofi_frag_t *frag =
        mca_btl_ofi_am_frag_alloc(module, comp->endpoint, sizeof(emu_request_t));
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
    rc = mca_btl_ofi_am_send_internal(module, frag, MCA_BTL_OFI_KIND_ATOMIC_REQUEST);
    return (rc < 0) ? rc : OPAL_SUCCESS;
}

/** What osc/rdma may ask once atomics are emulated. */
void mca_btl_ofi_emu_enable(mca_btl_ofi_module_t *module)
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
    module->emulate_atomics = true;
    module->super.btl_atomic_flags = MCA_BTL_ATOMIC_SUPPORTS_ADD | MCA_BTL_ATOMIC_SUPPORTS_AND
                                     | MCA_BTL_ATOMIC_SUPPORTS_OR | MCA_BTL_ATOMIC_SUPPORTS_XOR
                                     | MCA_BTL_ATOMIC_SUPPORTS_LAND | MCA_BTL_ATOMIC_SUPPORTS_LOR
                                     | MCA_BTL_ATOMIC_SUPPORTS_LXOR | MCA_BTL_ATOMIC_SUPPORTS_SWAP
                                     | MCA_BTL_ATOMIC_SUPPORTS_CSWAP | MCA_BTL_ATOMIC_SUPPORTS_32BIT
                                     | MCA_BTL_ATOMIC_SUPPORTS_FLOAT | MCA_BTL_ATOMIC_SUPPORTS_GLOB;
    module->super.btl_flags |= MCA_BTL_FLAGS_ATOMIC_OPS | MCA_BTL_FLAGS_ATOMIC_FOPS;
    MCA_BTL_OFI_VERBOSE(1, "%s: the provider has no atomics: applying them at the target",
                        module->device_name);
}
