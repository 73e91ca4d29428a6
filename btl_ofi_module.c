/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * Memory registration and the module's life.  Registrations go through a
 * grdma registration cache (bounded by btl_ofi_mr_cache_max), or straight
 * to the provider when it caches them itself; module open runs the steps
 * of module_steps in order and finalize undoes them in reverse.
 */

#include "opal_config.h"

#include <string.h>
#include <strings.h>

#include "opal/mca/common/ofi/common_ofi.h"
#include "opal/util/printf.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_ofi.h"

OBJ_CLASS_INSTANCE(mca_btl_ofi_reg_t, mca_rcache_base_registration_t, NULL, NULL);

/* ------------------------------------------------------------------ */
/* Memory registration                                                 */

static uint64_t access_for(int32_t rcache_access)
{
    uint64_t access = FI_READ | FI_WRITE | FI_SEND | FI_RECV;

    if (rcache_access & MCA_RCACHE_ACCESS_REMOTE_READ) {
        access |= FI_REMOTE_READ;
    }
    if (rcache_access & (MCA_RCACHE_ACCESS_REMOTE_WRITE | MCA_RCACHE_ACCESS_REMOTE_ATOMIC)) {
        access |= FI_REMOTE_WRITE;
    }
    return access;
}

/* The key a new region of @p module asks for (the provider picks it with
 * FI_MR_PROV_KEY): a counter, so every region of a domain has its own. */
static uint64_t next_requested_key(mca_btl_ofi_module_t *module)
{
    return module->prov_key
               ? 0
               : (uint64_t) opal_atomic_fetch_add_64((opal_atomic_int64_t *) &module->next_key, 1);
}

/* One provider region of [base, base + size) on @p module's domain, bound
 * to its endpoint where the provider wants that. */
static int make_region(mca_btl_ofi_module_t *module, void *base, size_t size, uint64_t access,
                       struct fid_mr **mr_out)
{
    struct fid_mr *mr = NULL;
    int rc;

    rc = fi_mr_reg(module->domain, base, size, access, 0, next_requested_key(module), 0, &mr, NULL);
    if (0 != rc) {
        MCA_BTL_OFI_VERBOSE(1, "fi_mr_reg(%p, %zu) failed on %s: %s", base, size,
                            module->device_name, fi_strerror(-rc));
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    if (module->mr_endpoint) {
        rc = fi_mr_bind(mr, &module->ep->fid, 0);
        if (0 == rc) {
            rc = fi_mr_enable(mr);
        }
        if (0 != rc) {
            MCA_BTL_OFI_VERBOSE(1, "binding a region to the endpoint failed on %s: %s",
                                module->device_name, fi_strerror(-rc));
            fi_close(&mr->fid);
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
    }
    *mr_out = mr;
    return OPAL_SUCCESS;
}

/* A copy of a registration on another module's domain (a rail's, or the
 * same-host module's), if it was made. */
static void close_region_copy(struct fid_mr **mr, const char *where)
{
    if (NULL != *mr) {
        int rc = fi_close(&(*mr)->fid);

        if (0 != rc) {
            MCA_BTL_OFI_VERBOSE(1, "closing a region on %s failed: %s", where, fi_strerror(-rc));
        }
        *mr = NULL;
    }
}

static void close_rail_regions(mca_btl_ofi_reg_t *reg, int rails)
{
    for (int r = 1; r < rails; ++r) {
        close_region_copy(&reg->rail_mr[r], "a rail");
    }
}

/* The lead module's registrations are made on every rail too: a peer
 * addresses a chunk on rail r with the key of the copy on that NIC. */
static int register_on_rails(mca_btl_ofi_module_t *module, mca_btl_ofi_reg_t *reg, void *base,
                             size_t size, uint64_t access)
{
    reg->rail_desc[0] = reg->desc;
    for (int r = 1; r < module->num_rails; ++r) {
        reg->rail_mr[r] = NULL;
    }
    for (int r = 1; r < module->num_rails; ++r) {
        if (OPAL_SUCCESS != make_region(module->rails[r], base, size, access, &reg->rail_mr[r])) {
            close_rail_regions(reg, r);
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
        reg->rail_desc[r] = fi_mr_desc(reg->rail_mr[r]);
        reg->handle.rail_keys[r - 1] = fi_mr_key(reg->rail_mr[r]);
    }
    return OPAL_SUCCESS;
}

/* A same-host peer's atomics address the region through our shm module:
 * its key there follows the rails' keys in the handle. */
static int register_for_same_host(mca_btl_ofi_module_t *module, mca_btl_ofi_reg_t *reg, void *base,
                                  size_t size, uint64_t access)
{
    reg->same_host_mr = NULL;
    if (NULL == module->same_host) {
        return OPAL_SUCCESS;
    }
    if (OPAL_SUCCESS != make_region(module->same_host, base, size, access, &reg->same_host_mr)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    reg->handle.rail_keys[module->num_rails - 1] = fi_mr_key(reg->same_host_mr);
    return OPAL_SUCCESS;
}

static int register_region(void *reg_data, void *base, size_t size,
                           mca_rcache_base_registration_t *rcache_reg)
{
    mca_btl_ofi_module_t *module = reg_data;
    mca_btl_ofi_reg_t *reg = (mca_btl_ofi_reg_t *) rcache_reg;
    uint64_t access = access_for(reg->base.access_flags);

    reg->mr = NULL;
    if (OPAL_SUCCESS != make_region(module, base, size, access, &reg->mr)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    reg->module = module;
    reg->desc = fi_mr_desc(reg->mr);
    reg->handle.rkey = fi_mr_key(reg->mr);
    reg->handle.base_addr = module->virt_addr ? 0 : (uint64_t) (uintptr_t) base;
    if (OPAL_SUCCESS != register_on_rails(module, reg, base, size, access)) {
        fi_close(&reg->mr->fid);
        reg->mr = NULL;
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    if (OPAL_SUCCESS != register_for_same_host(module, reg, base, size, access)) {
        close_rail_regions(reg, module->num_rails);
        fi_close(&reg->mr->fid);
        reg->mr = NULL;
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    mca_btl_ofi_regions_add(module, reg);
    mca_btl_ofi_count(module, MCA_BTL_OFI_CNT_MR_REG, 1);
    return OPAL_SUCCESS;
}

static int deregister_region(void *reg_data, mca_rcache_base_registration_t *rcache_reg)
{
    mca_btl_ofi_reg_t *reg = (mca_btl_ofi_reg_t *) rcache_reg;

    if (NULL != reg->mr) {
        int rc;

        /* a peer's atomic must not find the key once the region goes */
        mca_btl_ofi_regions_remove((mca_btl_ofi_module_t *) reg_data, reg);
        mca_btl_ofi_count((mca_btl_ofi_module_t *) reg_data, MCA_BTL_OFI_CNT_MR_DEREG, 1);
        close_rail_regions(reg, ((mca_btl_ofi_module_t *) reg_data)->num_rails);
        close_region_copy(&reg->same_host_mr, "shm");
        rc = fi_close(&reg->mr->fid);
        reg->mr = NULL;
        if (0 != rc) {
            MCA_BTL_OFI_VERBOSE(1, "closing a region failed: %s", fi_strerror(-rc));
            return OPAL_ERROR;
        }
    }
    return OPAL_SUCCESS;
}

static mca_btl_ofi_reg_t *take_registration(mca_btl_ofi_module_t *module, void *base, size_t size,
                                            int access)
{
    mca_btl_ofi_reg_t *reg = NULL;
    int rc;

    if (module->bypass_cache) {
        reg = calloc(1, sizeof(*reg));
        if (NULL == reg) {
            return NULL;
        }
        reg->base.access_flags = access;
        reg->base.base = base;
        reg->base.bound = (unsigned char *) base + size - 1;
        if (OPAL_SUCCESS != register_region(module, base, size, &reg->base)) {
            free(reg);
            return NULL;
        }
        return reg;
    }
    rc = module->rcache->rcache_register(module->rcache, base, size, 0, access,
                                         (mca_rcache_base_registration_t **) &reg);
    return OPAL_SUCCESS == rc ? reg : NULL;
}

/* What peers may aim one-sided operations at: the progress thread runs
 * only while some is held.  The registration's own flags count, not the
 * caller's: grdma may hand back a cached one with more rights, and the
 * release sees only those. */
static bool exposes(const mca_btl_ofi_reg_t *reg)
{
    return 0
           != (reg->base.access_flags
               & (MCA_BTL_REG_FLAG_REMOTE_READ | MCA_BTL_REG_FLAG_REMOTE_WRITE
                  | MCA_BTL_REG_FLAG_REMOTE_ATOMIC));
}

static mca_btl_base_registration_handle_t *
mca_btl_ofi_register_mem(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint, void *base,
                         size_t size, uint32_t flags)
{
    mca_btl_ofi_reg_t *reg = take_registration((mca_btl_ofi_module_t *) btl, base, size,
                                               (int) (flags & MCA_BTL_REG_FLAG_ACCESS_ANY));

    (void) endpoint;
    if (NULL == reg) {
        return NULL;
    }
    if (exposes(reg)) {
        mca_btl_ofi_progress_expose(1, 0 != (flags & MCA_BTL_REG_FLAG_REMOTE_ATOMIC));
    }
    return &reg->handle;
}

static int64_t registrations_held(const mca_btl_ofi_module_t *module)
{
    return (int64_t) (module->counters[MCA_BTL_OFI_CNT_MR_REG]
                      - module->counters[MCA_BTL_OFI_CNT_MR_DEREG]);
}

/* Under leave-pinned, grdma keeps a released registration until its memory
 * is unmapped, with no bound of its own: memory that is never unmapped (a
 * free list that never shrinks, a heap block given back to malloc) would
 * stay pinned, one provider region each, for the whole run. */
static void trim_registration_cache(mca_btl_ofi_module_t *module)
{
    if (NULL == module->rcache->rcache_evict) {
        return;
    }
    while (registrations_held(module) > mca_btl_ofi_component.mr_cache_max
           && module->rcache->rcache_evict(module->rcache)) {
    }
}

static int mca_btl_ofi_deregister_mem(mca_btl_base_module_t *btl,
                                      mca_btl_base_registration_handle_t *handle)
{
    mca_btl_ofi_module_t *module = (mca_btl_ofi_module_t *) btl;
    mca_btl_ofi_reg_t *reg =
        (mca_btl_ofi_reg_t *) ((char *) handle - offsetof(mca_btl_ofi_reg_t, handle));
    int rc;

    if (exposes(reg)) {
        mca_btl_ofi_progress_expose(-1, false);
    }
    if (module->bypass_cache) {
        rc = deregister_region(module, &reg->base);
        free(reg);
        return rc;
    }
    rc = module->rcache->rcache_deregister(module->rcache, &reg->base);
    trim_registration_cache(module);
    return rc;
}

/* grdma hands out one cache per name: each module gets its own. */
static int open_rcache(mca_btl_ofi_module_t *module)
{
    mca_rcache_base_resources_t resources = {
        .reg_data = module,
        .sizeof_reg = sizeof(mca_btl_ofi_reg_t),
        .register_mem = register_region,
        .deregister_mem = deregister_region,
    };

    /* also built when user registrations bypass it: our own free lists
     * register through it on FI_MR_LOCAL providers */
    if (0 > opal_asprintf(&resources.cache_name, "btl-ofi.%d.%s", module->module_index,
                          module->device_name)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    module->rcache = mca_rcache_base_module_create("grdma", module, &resources);
    free(resources.cache_name);
    if (NULL == module->rcache) {
        opal_show_help("help-mpi-btl-ofi.txt", "rcache failed", true, opal_process_info.nodename,
                       module->device_name);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    return OPAL_SUCCESS;
}

/* Processes of one user may read and write each other's memory unless
 * Yama restricts ptrace (process_vm_writev needs the same permission). */
static bool cross_memory_attach_allowed(void)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    int scope = 0;

    if (NULL == f) {
        return true;
    }
    if (1 != fscanf(f, "%d", &scope)) {
        scope = 1;
    }
    fclose(f);
    return 0 == scope;
}

/*
 * shm (libfabric 1.17) copies a write or a read with process_vm_writev or
 * process_vm_readv inside the call, with no command for the target to
 * serve, when the domain has FI_MR_VIRT_ADDR and no RMA ordering and the
 * call asks for neither delivery-complete nor remote CQ data: the bytes
 * are in place when the call returns, which is all MPI's completion needs.
 * Without cross-memory attach shm queues the transfer for the target
 * instead and would report it complete too early, so then we keep
 * delivery-complete.  No other provider promises this; they all keep it.
 * Only shm of libfabric 1.x: with 2.1's, origin copies beside atomics left
 * wrong sums in rma_accumulate, rma_sync and rma_atomics (libfabric2 lane).
 */
static bool origin_completes_rma(const mca_btl_ofi_module_t *module)
{
    const struct fi_info *info = module->info;
    uint64_t rma_order = FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_WAR | FI_ORDER_WAW;

#if defined(FI_ORDER_RMA_RAR)
    rma_order |= FI_ORDER_RMA_RAR | FI_ORDER_RMA_RAW | FI_ORDER_RMA_WAR | FI_ORDER_RMA_WAW;
#endif
    return mca_btl_ofi_component.origin_rma && 0 == strcmp(info->fabric_attr->prov_name, "shm")
           && FI_VERSION_LT(info->fabric_attr->prov_version, MCA_BTL_OFI_RELEASE(2, 0))
           && module->virt_addr && 0 == (info->tx_attr->msg_order & rma_order)
           && cross_memory_attach_allowed();
}

/* Whether the job has ranks on other hosts: only then does a network
 * provider carry our same-host peers too (a one-node job takes shm, or
 * the provider the user asked for, whose own path then stays in use). */
static bool job_spans_hosts(void)
{
    uint32_t job_size = mca_btl_ofi_compat_job_size();

    return job_size > (uint32_t) opal_process_info.num_local_peers + 1;
}

/* btl_ofi_local_copy: shm copies by itself where it can (origin_rma). */
static bool copies_local_peers(const mca_btl_ofi_module_t *module)
{
    int mode = mca_btl_ofi_component.local_copy;

    if (0 == mode || mca_btl_ofi_on_shm(module)) {
        return false;
    }
    if (mode < 0 && !job_spans_hosts()) {
        return false;
    }
    return cross_memory_attach_allowed();
}

/* What was decided from the provider's fi_info, at verbose level 1. */
static void report_plan(const mca_btl_ofi_module_t *module, const mca_btl_ofi_plan_t *plan)
{
    uint32_t version = module->info->fabric_attr->prov_version;
    const char *local =
        plan->mr_local ? "local buffers registered (FI_MR_LOCAL)" : "local buffers not registered";
    const char *context = plan->context2 ? "FI_CONTEXT2: two context words per operation"
                                         : "one context word per operation";
    const char *atomics = plan->provider_atomics ? "the provider's where fi_query_atomic confirms"
                                                 : "none in the provider: applied at the target";
    const char *cache = plan->bypass_mr_cache ? "bypassed (the provider caches)" : "grdma";

    MCA_BTL_OFI_VERBOSE(1, "%s: %s%s %u.%u: %s; %s; atomics: %s; registration cache: %s",
                        module->device_name, module->info->fabric_attr->prov_name,
                        plan->efa_direct ? " (efa-direct)" : "", FI_MAJOR(version),
                        FI_MINOR(version), local, context, atomics, cache);
}

static void describe_module(mca_btl_ofi_module_t *module)
{
    const char *prov = module->info->fabric_attr->prov_name;
    mca_btl_ofi_plan_t plan;

    mca_btl_ofi_plan_info(module->info, &plan);
    report_plan(module, &plan);
    module->virt_addr = plan.virt_addr;
    module->prov_key = plan.prov_key;
    module->mr_endpoint = plan.mr_endpoint;
    module->mr_local = plan.mr_local;
    module->bypass_cache = plan.bypass_mr_cache;
    module->provider_atomics = plan.provider_atomics;
    /* a same-host module is asked for RMA and atomics only */
    module->two_sided = mca_btl_ofi_component.two_sided && 0 != (module->info->caps & FI_MSG);
    module->inject_size = module->info->tx_attr->inject_size;
    module->use_inject = !mca_btl_ofi_component.disable_inject && module->inject_size > 0;
    /* fi_inject sends report no completion, so they escape the send window
     * (window_open in btl_ofi_frag.c): sockets, the provider that needs the
     * window, sends everything with fi_send */
    module->send_inject = module->use_inject && 0 != strcasecmp(prov, "sockets");
    module->origin_rma = origin_completes_rma(module);
    module->local_copy = copies_local_peers(module);
    module->next_key = 1;
    module->num_rails = 1;
    module->rails[0] = module;
    module->lent = false;
    module->same_host = NULL;
    module->serves_same_host = false;
    module->on_stall = NULL;
    module->stripe_min = 0;
}

/* ------------------------------------------------------------------ */
/* Module open and finalize                                            */

static int info_init(mca_btl_ofi_module_t *module)
{
    module->device_name =
        strdup(NULL != module->info->domain_attr->name ? module->info->domain_attr->name : "?");
    if (NULL == module->device_name) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    describe_module(module);
    mca_btl_ofi_contexts_plan(module);
    return OPAL_SUCCESS;
}

static void info_fini(mca_btl_ofi_module_t *module)
{
    free(module->device_name);
    module->device_name = NULL;
}

/* The rcache installs memory hooks, which must happen before the provider
 * starts threads of its own: it opens before the fabric. */
static int rcache_open(mca_btl_ofi_module_t *module)
{
    int rc = open_rcache(module);

    if (OPAL_SUCCESS == rc) {
        rc = opal_common_ofi_export_memory_monitor();
        if (0 != rc && -FI_ENOSYS != rc) {
            MCA_BTL_OFI_VERBOSE(10, "libfabric memory monitor not installed: %s", fi_strerror(-rc));
        }
        rc = OPAL_SUCCESS;
    }
    return rc;
}

static void rcache_close(mca_btl_ofi_module_t *module)
{
    if (NULL != module->rcache) {
        mca_rcache_base_module_destroy(module->rcache);
        module->rcache = NULL;
    }
}

static int fabric_open(mca_btl_ofi_module_t *module)
{
    int rc = fi_fabric(module->info->fabric_attr, &module->fabric, NULL);

    if (0 != rc) {
        mca_btl_ofi_show_fi_error("fi_fabric", module->device_name, rc);
        module->fabric = NULL;
        return OPAL_ERROR;
    }
    return OPAL_SUCCESS;
}

static void fabric_close(mca_btl_ofi_module_t *module)
{
    if (NULL != module->fabric) {
        fi_close(&module->fabric->fid);
        module->fabric = NULL;
    }
}

static int domain_open(mca_btl_ofi_module_t *module)
{
    int rc = fi_domain(module->fabric, module->info, &module->domain, NULL);

    if (0 != rc) {
        mca_btl_ofi_show_fi_error("fi_domain", module->device_name, rc);
        module->domain = NULL;
        return OPAL_ERROR;
    }
    return OPAL_SUCCESS;
}

/* Regions live in the domain; the cache opened before it may still hold
 * some that its users released, so those go first. */
static void domain_close(mca_btl_ofi_module_t *module)
{
    if (NULL == module->domain) {
        return;
    }
    if (NULL != module->rcache && NULL != module->rcache->rcache_evict) {
        while (module->rcache->rcache_evict(module->rcache)) {
        }
    }
    fi_close(&module->domain->fid);
    module->domain = NULL;
}

static void lists_fini(mca_btl_ofi_module_t *module)
{
    for (int i = 0; i < module->num_contexts; ++i) {
        mca_btl_ofi_frag_context_fini(module->contexts + i);
        mca_btl_ofi_rdma_context_fini(module->contexts + i);
    }
}

/* Completion objects and fragments of every context; posted to nothing
 * yet, and freed only once the endpoint is closed. */
static int lists_init(mca_btl_ofi_module_t *module)
{
    int rc = OPAL_SUCCESS;

    for (int i = 0; OPAL_SUCCESS == rc && i < module->num_contexts; ++i) {
        rc = mca_btl_ofi_rdma_context_init(module, module->contexts + i);
        if (OPAL_SUCCESS == rc && module->two_sided) {
            rc = mca_btl_ofi_frag_context_init(module, module->contexts + i);
        }
    }
    if (OPAL_SUCCESS != rc) {
        lists_fini(module);
    }
    return rc;
}

/* Posted receives stay with the endpoint until it closes (the next step
 * back); only our lists of waiting fragments are emptied here. */
static void receives_forget(mca_btl_ofi_module_t *module)
{
    mca_btl_ofi_frag_drop_waiting(module);
}

static int receives_post(mca_btl_ofi_module_t *module)
{
    int rc = module->two_sided ? mca_btl_ofi_frag_post_receives(module) : OPAL_SUCCESS;

    if (OPAL_SUCCESS != rc) {
        receives_forget(module);
    }
    return rc;
}

static int capabilities_set(mca_btl_ofi_module_t *module)
{
    int rc = mca_btl_ofi_atomics_setup(module);

    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    if (module->two_sided) {
        mca_btl_ofi_frag_setup_module(module);
    } else {
        module->super.btl_flags &= ~(MCA_BTL_FLAGS_SEND | MCA_BTL_FLAGS_SEND_INPLACE);
    }
    if (MCA_BTL_OFI_MODE_TWO_SIDED == mca_btl_ofi_component.mode) {
        module->super.btl_flags &=
            ~(MCA_BTL_FLAGS_RDMA | MCA_BTL_FLAGS_ATOMIC_OPS | MCA_BTL_FLAGS_ATOMIC_FOPS);
        module->super.btl_atomic_flags = 0;
    }
    if (!module->mr_local) {
        /* no local registration needed: osc/rdma may hand us any buffer */
        module->super.btl_put_local_registration_threshold = SIZE_MAX;
        module->super.btl_get_local_registration_threshold = SIZE_MAX;
    } else {
        module->super.btl_put_local_registration_threshold =
            module->use_inject ? module->inject_size : 0;
        module->super.btl_get_local_registration_threshold = 0;
    }
    return OPAL_SUCCESS;
}

/**
 * The steps of a module's life, in the order they open.  Finalize, and
 * open when a step fails, close the opened steps in reverse order, each
 * undoing only its own work.
 */
static const struct {
    const char *name;
    int (*open)(mca_btl_ofi_module_t *module);
    void (*close)(mca_btl_ofi_module_t *module);
} module_steps[] = {
    { "info", info_init, info_fini },
    { "peers", mca_btl_ofi_peers_init, mca_btl_ofi_peers_fini },
    { "registration cache", rcache_open, rcache_close },
    { "fabric", fabric_open, fabric_close },
    { "domain", domain_open, domain_close },
    { "address vector", mca_btl_ofi_av_open, mca_btl_ofi_av_close },
    { "contexts", mca_btl_ofi_contexts_init, mca_btl_ofi_contexts_fini },
    { "free lists", lists_init, lists_fini },
    { "endpoint", mca_btl_ofi_contexts_open, mca_btl_ofi_contexts_close },
    { "endpoint name", mca_btl_ofi_name_init, mca_btl_ofi_name_fini },
    { "receive buffers", receives_post, receives_forget },
    { "capabilities", capabilities_set, mca_btl_ofi_atomics_teardown },
};
#define BTL_OFI_MODULE_STEPS ((int) (sizeof(module_steps) / sizeof(module_steps[0])))

static void close_steps(mca_btl_ofi_module_t *module, int opened)
{
    while (opened-- > 0) {
        module_steps[opened].close(module);
    }
}

int mca_btl_ofi_module_open(mca_btl_ofi_module_t **module_out, struct fi_info *info, int index)
{
    mca_btl_ofi_module_t *module;
    int rc = OPAL_SUCCESS, step;

    module = malloc(sizeof(*module));
    if (NULL == module) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    memcpy(module, &mca_btl_ofi_module_template, sizeof(*module));
    module->module_index = index;
    module->info = fi_dupinfo(info);
    if (NULL == module->info) {
        free(module);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    for (step = 0; step < BTL_OFI_MODULE_STEPS; ++step) {
        rc = module_steps[step].open(module);
        if (OPAL_SUCCESS != rc) {
            MCA_BTL_OFI_VERBOSE(1, "module %d: opening its %s failed (%d)", index,
                                module_steps[step].name, rc);
            close_steps(module, step);
            fi_freeinfo(module->info);
            free(module);
            return rc;
        }
    }
    MCA_BTL_OFI_VERBOSE(1, "module %d on %s: %d context(s)%s, mr_mode 0x%x, inject %zu%s%s", index,
                        module->device_name, module->num_contexts,
                        module->is_scalable_ep ? " (scalable endpoint)" : "",
                        (unsigned) module->info->domain_attr->mr_mode, module->inject_size,
                        module->origin_rma ? ", writes and reads complete at the origin" : "",
                        module->local_copy ? ", same-host peers' puts and gets copied" : "");
    *module_out = module;
    return OPAL_SUCCESS;
}

/* progress and the MPI_T counters walk the component's array: a closed
 * module must leave it */
static void forget_module(mca_btl_ofi_module_t *module)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;

    for (int i = 0; i < c->module_count; ++i) {
        if (c->modules[i] == module) {
            memmove(c->modules + i, c->modules + i + 1,
                    (c->module_count - i - 1) * sizeof(c->modules[0]));
            c->modules[--c->module_count] = NULL;
            return;
        }
    }
}

/* ------------------------------------------------------------------ */
/* Rails                                                               */

/*
 * Whether the handle keeps a slot for a same-host key, in every process
 * alike: osc/rdma lays out its per-node tables by the handle's size as
 * each process sees it, so a process with a same-host module and one
 * without (alone on its host, or in a job spawned by the other) must
 * still agree on it.  Only settings decide, never what the host holds.
 */
static bool same_host_slot_reserved(const mca_btl_ofi_module_t *lead)
{
    const mca_btl_ofi_component_t *c = &mca_btl_ofi_component;

    return MCA_BTL_OFI_MODE_TWO_SIDED != c->mode && 0 != c->local_atomics
           && lead->num_rails < MCA_BTL_OFI_MAX_RAILS;
}

/*
 * osc/rdma sends every one-sided operation of a window through the one
 * module it picks: the lowest btl_latency, the first on a tie, which is
 * modules[0].  So that module borrows the others as rails: their domains
 * get a copy of each of its registrations (one key per rail in the
 * handle), their endpoints reach the same peers, and their contexts carry
 * its chunks.  The others stay modules of their own for ob1.
 */
void mca_btl_ofi_rails_setup(mca_btl_ofi_module_t *lead)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;
    int want = (0 == c->rails) ? c->module_count : c->rails;

    if (want > c->module_count) {
        want = c->module_count;
    }
    if (want > MCA_BTL_OFI_MAX_RAILS) {
        want = MCA_BTL_OFI_MAX_RAILS;
    }
    for (int r = 1; r < want; ++r) {
        lead->rails[r] = c->modules[r];
        /* a rail's NIC moves the lead's RDMA: ob1 taking a share of a
         * message through the rail as well would load that NIC twice (3/4
         * of the bytes on one of 2 NICs, measured), and osc/rdma must not
         * pick it; the rail still sends ob1's messages */
        c->modules[r]->super.btl_flags &=
            ~(MCA_BTL_FLAGS_RDMA | MCA_BTL_FLAGS_ATOMIC_OPS | MCA_BTL_FLAGS_ATOMIC_FOPS
              | MCA_BTL_OFI_FLAGS_REMOTE_COMPLETION);
        c->modules[r]->lent = true;
        c->modules[r]->on_stall = mca_btl_ofi_probe_silent_rails;
    }
    lead->num_rails = want < 1 ? 1 : want;
    lead->stripe_min = (size_t) c->stripe_min;
    lead->super.btl_registration_handle_size =
        MCA_BTL_OFI_HANDLE_SIZE(lead->num_rails + (same_host_slot_reserved(lead) ? 1 : 0));
    if (lead->num_rails > 1) {
        lead->on_stall = mca_btl_ofi_probe_silent_rails;
        MCA_BTL_OFI_VERBOSE(1, "one-sided traffic of %s on %d rails, split from %zu bytes",
                            lead->device_name, lead->num_rails, lead->stripe_min);
    }
}

/* Every atomic the lead offers must work on shm too: an operation that
 * fell back to the network provider could overtake an earlier one to the
 * same peer that went through shm. */
static bool atomics_covered(const mca_btl_ofi_module_t *lead, const mca_btl_ofi_module_t *shm)
{
    for (int op = 0; op < MCA_BTL_OFI_ATOMIC_TABLE; ++op) {
        if (0 != (lead->atomic_fetch_ok[op] & ~shm->atomic_fetch_ok[op])
            || 0 != (lead->atomic_post_ok[op] & ~shm->atomic_post_ok[op])) {
            return false;
        }
    }
    return true;
}

bool mca_btl_ofi_same_host_setup(mca_btl_ofi_module_t *lead, mca_btl_ofi_module_t *shm)
{
    const char *why = NULL;

    if (!shm->virt_addr) {
        why = "it does not address memory by virtual address";
    } else if (shm->emulate_atomics || !atomics_covered(lead, shm)) {
        why = "its atomics do not cover the network provider's";
    } else if (!same_host_slot_reserved(lead)) {
        why = "the registration handle has no room for its key";
    }
    if (NULL != why) {
        MCA_BTL_OFI_VERBOSE(1, "same-host atomics stay on %s: shm is not usable (%s)",
                            lead->device_name, why);
        return false;
    }
    lead->same_host = shm;
    shm->serves_same_host = true;
    shm->lent = true;
    /* the layer above gets nothing from it: add_procs reaches no peer */
    shm->super.btl_flags = 0;
    shm->super.btl_atomic_flags = 0;
    MCA_BTL_OFI_VERBOSE(1, "atomics to same-host peers go through shm (%s)", shm->device_name);
    return true;
}

/* A rail going before its lead (Open MPI finalizes modules in the order
 * init gave them, the lead first, so only a failed start does this):
 * the lead stops using rails; copies of its regions on the rail's domain
 * stay until the lead goes, and that domain reports itself busy. */
static void leave_rails(mca_btl_ofi_module_t *module)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;
    mca_btl_ofi_module_t *lead = c->module_count > 0 ? c->modules[0] : NULL;

    if (NULL == lead || lead == module) {
        return;
    }
    if (lead->same_host == module) {
        MCA_BTL_OFI_VERBOSE(1, "%s closes before %s: same-host atomics through the network",
                            module->device_name, lead->device_name);
        lead->same_host = NULL;
        return;
    }
    for (int r = 1; r < lead->num_rails; ++r) {
        if (lead->rails[r] == module) {
            MCA_BTL_OFI_VERBOSE(1, "%s closes before %s: no more rails", module->device_name,
                                lead->device_name);
            lead->num_rails = 1;
            lead->on_stall = NULL;
            break;
        }
    }
}

/*
 * A closing module tells each peer of another job (spawned, connected)
 * that this process leaves: nothing else tells it under Open MPI 4.1, and
 * its address-vector entry for us would stay (btl_ofi_endpoint.c, "Peers
 * of other jobs that leave").  A peer that left first never takes the
 * message: the wait for the sends is bounded.  It serves, and does not
 * progress: the layer above is closing.
 */
#define GOODBYE_WAIT_NS (100 * 1000 * 1000)

static opal_atomic_int32_t goodbyes_in_flight = 0;

/* Runs from any progress (the kind is ours, not the layer above's). */
static void goodbye_sent(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                         mca_btl_base_descriptor_t *des, int status)
{
    (void) btl;
    (void) endpoint;
    (void) des;
    (void) status; /* a peer that has gone first fails it: nothing to do */
    (void) opal_atomic_add_fetch_32(&goodbyes_in_flight, -1);
}

static bool owed_goodbye(const mca_btl_ofi_endpoint_t *endpoint)
{
    return endpoint->proc->proc_name.jobid != OPAL_PROC_MY_NAME.jobid && endpoint->addr.reachable
           && !endpoint->addr.departed;
}

static void send_goodbye(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint)
{
    mca_btl_ofi_frag_t *frag = mca_btl_ofi_frag_alloc_internal(module, endpoint, 0);

    if (NULL == frag) {
        return;
    }
    /* sent, not injected: its completion says it left this process */
    frag->base.des_cbfunc = goodbye_sent;
    frag->base.des_flags |= MCA_BTL_DES_SEND_ALWAYS_CALLBACK;
    (void) opal_atomic_add_fetch_32(&goodbyes_in_flight, 1);
    if (0 != mca_btl_ofi_frag_send_internal(module, frag, MCA_BTL_OFI_KIND_LEAVING)) {
        (void) opal_atomic_add_fetch_32(&goodbyes_in_flight, -1);
    }
}

static void say_goodbye(mca_btl_ofi_module_t *module)
{
    mca_btl_ofi_endpoint_t *endpoint;
    int64_t deadline;
    int told = 0;

    if (!module->two_sided) {
        return;
    }
    /* nobody adds endpoints any more: the layer above is closing */
    OPAL_LIST_FOREACH(endpoint, &module->endpoints, mca_btl_ofi_endpoint_t) {
        if (owed_goodbye(endpoint)) {
            send_goodbye(module, endpoint);
            ++told;
        }
    }
    if (0 == told) {
        return;
    }
    deadline = mca_btl_ofi_now_ns() + GOODBYE_WAIT_NS;
    while (goodbyes_in_flight > 0 && mca_btl_ofi_now_ns() < deadline) {
        mca_btl_ofi_module_serve(module);
    }
    MCA_BTL_OFI_VERBOSE(10, "told %d peers of other jobs that we leave; %d sends unfinished", told,
                        (int) goodbyes_in_flight);
}

int mca_btl_ofi_module_finalize(mca_btl_base_module_t *btl)
{
    mca_btl_ofi_module_t *module = (mca_btl_ofi_module_t *) btl;

    leave_rails(module);

    /* the thread walks every module: it stops before the first goes */
    mca_btl_ofi_progress_thread_stop();
    say_goodbye(module);
    forget_module(module);
    close_steps(module, BTL_OFI_MODULE_STEPS);
    fi_freeinfo(module->info);
    free(module);
    return OPAL_SUCCESS;
}

static int mca_btl_ofi_register_error(mca_btl_base_module_t *btl,
                                      mca_btl_base_module_error_cb_fn_t cbfunc)
{
    ((mca_btl_ofi_module_t *) btl)->error_cb = cbfunc;
    return OPAL_SUCCESS;
}

static void mca_btl_ofi_dump(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                             int verbose)
{
    mca_btl_ofi_module_t *module = (mca_btl_ofi_module_t *) btl;

    (void) endpoint;
    (void) verbose;
    opal_output(0, "btl:ofi module %d on %s: %d contexts, %llu puts, %llu gets, %llu atomics",
                module->module_index, module->device_name, module->num_contexts,
                (unsigned long long) module->counters[MCA_BTL_OFI_CNT_PUT],
                (unsigned long long) module->counters[MCA_BTL_OFI_CNT_GET],
                (unsigned long long) module->counters[MCA_BTL_OFI_CNT_ATOMIC]);
}

mca_btl_ofi_module_t mca_btl_ofi_module_template = {
    .super = {
        .btl_component = &mca_btl_ofi_component.super,
        .btl_add_procs = mca_btl_ofi_add_procs,
        .btl_del_procs = mca_btl_ofi_del_procs,
        .btl_finalize = mca_btl_ofi_module_finalize,
        .btl_put = mca_btl_ofi_put,
        .btl_get = mca_btl_ofi_get,
        .btl_atomic_op = mca_btl_ofi_aop,
        .btl_atomic_fop = mca_btl_ofi_afop,
        .btl_atomic_cswap = mca_btl_ofi_acswap,
        .btl_flush = mca_btl_ofi_flush,
        .btl_register_mem = mca_btl_ofi_register_mem,
        .btl_deregister_mem = mca_btl_ofi_deregister_mem,
        .btl_dump = mca_btl_ofi_dump,
        .btl_register_error = mca_btl_ofi_register_error,
        .btl_registration_handle_size = sizeof(mca_btl_base_registration_handle_t),
    },
};
