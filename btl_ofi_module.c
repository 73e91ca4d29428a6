/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

#include "opal_config.h"

#include <string.h>
#include <strings.h>

#include "opal/mca/common/ofi/common_ofi.h"
#include "opal/mca/pmix/pmix-internal.h"
#include "opal/util/printf.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_ofi.h"
#include "btl_ofi_modex.h"

#define BTL_OFI_COMP_PAYLOAD (3 * sizeof(uint64_t))

static void endpoint_construct(mca_btl_ofi_endpoint_t *ep)
{
    ep->proc = NULL;
    ep->addr = FI_ADDR_UNSPEC;
    ep->module = NULL;
    ep->outstanding = 0;
    ep->reachable = false;
}
OBJ_CLASS_INSTANCE(mca_btl_ofi_endpoint_t, opal_list_item_t, endpoint_construct, NULL);
OBJ_CLASS_INSTANCE(mca_btl_ofi_comp_t, opal_free_list_item_t, NULL, NULL);
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

static int register_region(void *reg_data, void *base, size_t size,
                           mca_rcache_base_registration_t *rcache_reg)
{
    mca_btl_ofi_module_t *module = reg_data;
    mca_btl_ofi_reg_t *reg = (mca_btl_ofi_reg_t *) rcache_reg;
    uint64_t key = 0;
    int rc;

    if (!module->prov_key) {
        key = opal_atomic_fetch_add_64((opal_atomic_int64_t *) &module->next_key, 1);
    }
    rc = fi_mr_reg(module->domain, base, size, access_for(reg->base.access_flags), 0, key, 0,
                   &reg->mr, NULL);
    if (0 != rc) {
        MCA_BTL_OFI_VERBOSE(1, "fi_mr_reg(%p, %zu) failed on %s: %s", base, size,
                            module->device_name, fi_strerror(-rc));
        reg->mr = NULL;
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    if (module->mr_endpoint) {
        rc = fi_mr_bind(reg->mr, &module->ep->fid, 0);
        if (0 == rc) {
            rc = fi_mr_enable(reg->mr);
        }
        if (0 != rc) {
            MCA_BTL_OFI_VERBOSE(1, "binding a region to the endpoint failed: %s", fi_strerror(-rc));
            fi_close(&reg->mr->fid);
            reg->mr = NULL;
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
    }
    reg->module = module;
    reg->desc = fi_mr_desc(reg->mr);
    reg->handle.rkey = fi_mr_key(reg->mr);
    reg->handle.base_addr = module->virt_addr ? 0 : (uint64_t) (uintptr_t) base;
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
        rc = fi_close(&reg->mr->fid);
        reg->mr = NULL;
        if (0 != rc) {
            MCA_BTL_OFI_VERBOSE(1, "closing a region failed: %s", fi_strerror(-rc));
            return OPAL_ERROR;
        }
    }
    return OPAL_SUCCESS;
}

static mca_btl_base_registration_handle_t *
mca_btl_ofi_register_mem(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint, void *base,
                         size_t size, uint32_t flags)
{
    mca_btl_ofi_module_t *module = (mca_btl_ofi_module_t *) btl;
    int access = flags & MCA_BTL_REG_FLAG_ACCESS_ANY;
    mca_btl_ofi_reg_t *reg = NULL;
    int rc;

    (void) endpoint;
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
        return &reg->handle;
    }
    rc = module->rcache->rcache_register(module->rcache, base, size, 0, access,
                                         (mca_rcache_base_registration_t **) &reg);
    if (OPAL_SUCCESS != rc || NULL == reg) {
        return NULL;
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

    if (module->bypass_cache) {
        rc = deregister_region(module, &reg->base);
        free(reg);
        return rc;
    }
    rc = module->rcache->rcache_deregister(module->rcache, &reg->base);
    trim_registration_cache(module);
    return rc;
}

static int open_rcache(mca_btl_ofi_module_t *module)
{
    mca_rcache_base_resources_t resources;
    char *name = NULL;

    /* also built when user registrations bypass it: our own free lists
     * register through it on FI_MR_LOCAL providers */
    if (0 > opal_asprintf(&name, "btl-ofi.%d.%s", module->module_index, module->device_name)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    resources.cache_name = name;
    resources.reg_data = module;
    resources.sizeof_reg = sizeof(mca_btl_ofi_reg_t);
    resources.register_mem = register_region;
    resources.deregister_mem = deregister_region;
    module->rcache = mca_rcache_base_module_create("grdma", module, &resources);
    free(name);
    if (NULL == module->rcache) {
        opal_show_help("help-mpi-btl-ofi.txt", "rcache failed", true, opal_process_info.nodename,
                       module->device_name);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    return OPAL_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Peers                                                               */

static uint64_t proc_key(const opal_proc_t *proc)
{
    uint64_t key;
    memcpy(&key, &proc->proc_name, sizeof(key));
    return key;
}

static void show_unreachable(mca_btl_ofi_module_t *module, opal_proc_t *proc, const char *why)
{
    opal_show_help("help-mpi-btl-ofi.txt", "peer unreachable", true, opal_process_info.nodename,
                   OPAL_NAME_PRINT(proc->proc_name), module->device_name, why);
}

static mca_btl_ofi_endpoint_t *create_endpoint(mca_btl_ofi_module_t *module, opal_proc_t *proc)
{
    mca_btl_ofi_endpoint_t *endpoint = NULL;
    const void *name;
    const char *why = NULL;
    void *blob = NULL;
    size_t size = 0, len;
    fi_addr_t addr = FI_ADDR_UNSPEC;
    int rc;

    OPAL_MODEX_RECV(rc, &mca_btl_ofi_component.super.btl_version, &proc->proc_name, &blob, &size);
    if (OPAL_SUCCESS != rc) {
        MCA_BTL_OFI_VERBOSE(10, "no endpoint data from %s", OPAL_NAME_PRINT(proc->proc_name));
        return NULL;
    }
    if (0
        != mca_btl_ofi_modex_parse(blob, size, mca_btl_ofi_component.provider_name,
                                   module->module_index, &name, &len, &why)) {
        show_unreachable(module, proc, why);
        goto out;
    }
    rc = fi_av_insert(module->av, name, 1, &addr, 0, NULL);
    if (1 != rc) {
        show_unreachable(module, proc, rc < 0 ? fi_strerror(-rc) : "fi_av_insert inserted nothing");
        goto out;
    }
    if (module->is_scalable_ep) {
        addr = fi_rx_addr(addr, 0, module->rx_ctx_bits);
    }
    endpoint = OBJ_NEW(mca_btl_ofi_endpoint_t);
    if (NULL == endpoint) {
        (void) fi_av_remove(module->av, &addr, 1, 0);
        goto out;
    }
    endpoint->proc = proc;
    endpoint->addr = addr;
    endpoint->module = module;
    endpoint->reachable = true;

out:
    free(blob);
    return endpoint;
}

static int mca_btl_ofi_add_procs(mca_btl_base_module_t *btl, size_t nprocs, opal_proc_t **procs,
                                 mca_btl_base_endpoint_t **peers, opal_bitmap_t *reachable)
{
    mca_btl_ofi_module_t *module = (mca_btl_ofi_module_t *) btl;

    OPAL_THREAD_LOCK(&module->lock);
    for (size_t i = 0; i < nprocs; ++i) {
        mca_btl_ofi_endpoint_t *endpoint = NULL;
        uint64_t key = proc_key(procs[i]);

        if (OPAL_SUCCESS
            != opal_hash_table_get_value_uint64(&module->peers, key, (void **) &endpoint)) {
            endpoint = create_endpoint(module, procs[i]);
            if (NULL == endpoint) {
                peers[i] = NULL;
                continue;
            }
            opal_list_append(&module->endpoints, &endpoint->super);
            opal_hash_table_set_value_uint64(&module->peers, key, endpoint);
        }
        peers[i] = endpoint;
        if (NULL != reachable) {
            (void) opal_bitmap_set_bit(reachable, (int) i);
        }
    }
    OPAL_THREAD_UNLOCK(&module->lock);
    return OPAL_SUCCESS;
}

static int mca_btl_ofi_del_procs(mca_btl_base_module_t *btl, size_t nprocs, opal_proc_t **procs,
                                 mca_btl_base_endpoint_t **peers)
{
    mca_btl_ofi_module_t *module = (mca_btl_ofi_module_t *) btl;

    OPAL_THREAD_LOCK(&module->lock);
    for (size_t i = 0; i < nprocs; ++i) {
        mca_btl_ofi_endpoint_t *endpoint = NULL;
        uint64_t key = proc_key(procs[i]);

        if (OPAL_SUCCESS
            != opal_hash_table_get_value_uint64(&module->peers, key, (void **) &endpoint)) {
            continue;
        }
        if (NULL != peers && NULL != peers[i] && peers[i] != endpoint) {
            continue;
        }
        (void) opal_hash_table_remove_value_uint64(&module->peers, key);
        opal_list_remove_item(&module->endpoints, &endpoint->super);
        /* operations still in flight name this address; leave it in the AV
         * until the module closes rather than racing them */
        OBJ_RELEASE(endpoint);
    }
    OPAL_THREAD_UNLOCK(&module->lock);
    return OPAL_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Contexts                                                            */

static int context_lists_init(mca_btl_ofi_module_t *module, mca_btl_ofi_context_t *context)
{
    int rc;

    OBJ_CONSTRUCT(&context->comps, opal_free_list_t);
    OBJ_CONSTRUCT(&context->small_frags.list, opal_free_list_t);
    OBJ_CONSTRUCT(&context->send_frags.list, opal_free_list_t);
    OBJ_CONSTRUCT(&context->recv_frags.list, opal_free_list_t);
    context->lists_ready = true;

    /* the payload holds atomic operands and results, which the provider
     * reads and writes after the call returns; registered when the
     * provider insists on local registration */
    rc = opal_free_list_init(&context->comps, sizeof(mca_btl_ofi_comp_t), opal_cache_line_size,
                             OBJ_CLASS(mca_btl_ofi_comp_t), BTL_OFI_COMP_PAYLOAD, sizeof(uint64_t),
                             128, -1, 128, NULL,
                             module->mr_local ? MCA_RCACHE_ACCESS_LOCAL_WRITE : 0,
                             module->mr_local ? module->rcache : NULL, NULL, NULL);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    if (module->two_sided) {
        rc = mca_btl_ofi_am_context_init(module, context);
    }
    return rc;
}

static void context_close(mca_btl_ofi_module_t *module, mca_btl_ofi_context_t *context)
{
    /* endpoint objects first, then the CQ they were bound to */
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

static void context_release(mca_btl_ofi_context_t *context)
{
    if (NULL != context->cq) {
        fi_close(&context->cq->fid);
        context->cq = NULL;
    }
    if (context->lists_ready) {
        mca_btl_ofi_am_context_fini(context);
        OBJ_DESTRUCT(&context->comps);
        OBJ_DESTRUCT(&context->small_frags.list);
        OBJ_DESTRUCT(&context->send_frags.list);
        OBJ_DESTRUCT(&context->recv_frags.list);
        context->lists_ready = false;
    }
    OBJ_DESTRUCT(&context->pending_sends);
    OBJ_DESTRUCT(&context->unposted_recvs);
    OBJ_DESTRUCT(&context->lock);
}

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
    int rc;

    if (OPAL_SUCCESS != open_cq(module, context)) {
        return OPAL_ERROR;
    }
    rc = fi_ep_bind(module->ep, &context->cq->fid, FI_TRANSMIT | FI_RECV);
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
    int rc;

    if (OPAL_SUCCESS != open_cq(module, context)) {
        return OPAL_ERROR;
    }
    rc = fi_tx_context(module->ep, context->index, info->tx_attr, &context->tx, context);
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

static int open_endpoint(mca_btl_ofi_module_t *module)
{
    struct fi_av_attr av_attr = { .type = FI_AV_MAP };
    int n = usable_contexts(module);
    int rc;

    /* Every write, read and non-fetching atomic names delivery-complete; a
     * send only needs its buffer back.  shm (libfabric 1.17) moves every
     * message of 4 KiB or less sent under delivery-complete through its
     * segmentation buffers, one transfer per peer at a time, and refuses RMA
     * to that peer meanwhile, so its sends ask for transmit-complete.  Not
     * for every provider: tcp;ofi_rxm across hosts then hung in rma_sync. */
    if (0 == strcmp(module->info->fabric_attr->prov_name, "shm")) {
        module->info->tx_attr->op_flags &= ~FI_DELIVERY_COMPLETE;
        module->info->tx_attr->op_flags |= FI_TRANSMIT_COMPLETE;
    }

    module->is_scalable_ep = n > 1;
    if (module->is_scalable_ep) {
        int bits = 0;
        while ((1 << bits) < n) {
            ++bits;
        }
        av_attr.rx_ctx_bits = bits;
        module->rx_ctx_bits = bits;
        module->info->ep_attr->tx_ctx_cnt = n;
        module->info->ep_attr->rx_ctx_cnt = n;
    }
    rc = fi_av_open(module->domain, &av_attr, &module->av, NULL);
    if (0 != rc) {
        mca_btl_ofi_show_fi_error("fi_av_open", module->device_name, rc);
        return OPAL_ERROR;
    }
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
        module->num_contexts = i + 1;
        rc = module->is_scalable_ep ? open_scalable_context(module, context)
                                    : open_plain_context(module, context);
        if (OPAL_SUCCESS != rc) {
            return rc;
        }
    }
    rc = fi_enable(module->ep);
    if (0 != rc) {
        mca_btl_ofi_show_fi_error("fi_enable", module->device_name, rc);
        return OPAL_ERROR;
    }
    return OPAL_SUCCESS;
}

static int publish_name(mca_btl_ofi_module_t *module)
{
    size_t len = 0;
    int rc = fi_getname(&module->ep->fid, NULL, &len);

    if (-FI_ETOOSMALL != rc && 0 != rc) {
        mca_btl_ofi_show_fi_error("fi_getname", module->device_name, rc);
        return OPAL_ERROR;
    }
    module->ep_name = calloc(1, len);
    if (NULL == module->ep_name) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    rc = fi_getname(&module->ep->fid, module->ep_name, &len);
    if (0 != rc) {
        mca_btl_ofi_show_fi_error("fi_getname", module->device_name, rc);
        return OPAL_ERROR;
    }
    module->ep_name_len = len;
    return OPAL_SUCCESS;
}

static void describe_module(mca_btl_ofi_module_t *module)
{
    int mr_mode = module->info->domain_attr->mr_mode;
    const char *prov = module->info->fabric_attr->prov_name;

    module->virt_addr = (FI_MR_BASIC == mr_mode) || (mr_mode & FI_MR_VIRT_ADDR);
    module->prov_key = (FI_MR_BASIC == mr_mode) || (mr_mode & FI_MR_PROV_KEY);
    module->mr_endpoint =
        (FI_MR_BASIC != mr_mode && FI_MR_SCALABLE != mr_mode) && (mr_mode & FI_MR_ENDPOINT);
    module->mr_local =
        (FI_MR_BASIC != mr_mode && FI_MR_SCALABLE != mr_mode) && (mr_mode & FI_MR_LOCAL);
    /* efa keeps its own registration cache; a second one on top only
     * delays invalidation */
    module->bypass_cache = (0 == strncasecmp(prov, "efa", 3));
    module->two_sided = mca_btl_ofi_component.two_sided;
    module->inject_size = module->info->tx_attr->inject_size;
    module->use_inject = !mca_btl_ofi_component.disable_inject && module->inject_size > 0;
    /* fi_inject sends report no completion, so they escape the send window
     * (see mca_btl_ofi_am_setup_module): sockets, the provider that needs
     * the window, sends everything with fi_send */
    module->send_inject = module->use_inject && 0 != strcasecmp(prov, "sockets");
    module->next_key = 1;
}

/* ------------------------------------------------------------------ */

int mca_btl_ofi_module_open(mca_btl_ofi_module_t **module_out, struct fi_info *info, int index)
{
    mca_btl_ofi_module_t *module;
    int rc;

    module = malloc(sizeof(*module));
    if (NULL == module) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    memcpy(module, &mca_btl_ofi_module_template, sizeof(*module));
    module->module_index = index;
    OBJ_CONSTRUCT(&module->lock, opal_mutex_t);
    OBJ_CONSTRUCT(&module->endpoints, opal_list_t);
    OBJ_CONSTRUCT(&module->peers, opal_hash_table_t);
    OBJ_CONSTRUCT(&module->regions, opal_hash_table_t);

    module->info = fi_dupinfo(info);
    if (NULL == module->info) {
        rc = OPAL_ERR_OUT_OF_RESOURCE;
        goto fail;
    }
    module->device_name = strdup(info->domain_attr->name ? info->domain_attr->name : "?");
    describe_module(module);

    rc = opal_hash_table_init(&module->peers, 256);
    if (OPAL_SUCCESS == rc) {
        rc = opal_hash_table_init(&module->regions, 256);
    }
    if (OPAL_SUCCESS != rc) {
        goto fail;
    }
    /* the rcache installs memory hooks, which must happen before the
     * provider starts threads of its own */
    rc = open_rcache(module);
    if (OPAL_SUCCESS != rc) {
        goto fail;
    }
    rc = opal_common_ofi_export_memory_monitor();
    if (0 != rc && -FI_ENOSYS != rc) {
        MCA_BTL_OFI_VERBOSE(10, "libfabric memory monitor not installed: %s", fi_strerror(-rc));
    }

    rc = fi_fabric(module->info->fabric_attr, &module->fabric, NULL);
    if (0 != rc) {
        mca_btl_ofi_show_fi_error("fi_fabric", module->device_name, rc);
        rc = OPAL_ERROR;
        goto fail;
    }
    rc = fi_domain(module->fabric, module->info, &module->domain, NULL);
    if (0 != rc) {
        mca_btl_ofi_show_fi_error("fi_domain", module->device_name, rc);
        rc = OPAL_ERROR;
        goto fail;
    }
    rc = open_endpoint(module);
    if (OPAL_SUCCESS != rc) {
        goto fail;
    }
    rc = publish_name(module);
    if (OPAL_SUCCESS != rc) {
        goto fail;
    }
    for (int i = 0; i < module->num_contexts; ++i) {
        rc = context_lists_init(module, module->contexts + i);
        if (OPAL_SUCCESS != rc) {
            goto fail;
        }
    }
    mca_btl_ofi_probe_module_atomics(module);
    if (module->two_sided) {
        mca_btl_ofi_am_setup_module(module);
        if (mca_btl_ofi_component.emulate_atomics
            || 0 == (module->super.btl_atomic_flags & MCA_BTL_ATOMIC_SUPPORTS_ADD)) {
            mca_btl_ofi_emu_enable(module);
        }
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
    MCA_BTL_OFI_VERBOSE(1, "module %d on %s: %d context(s)%s, mr_mode 0x%x, inject %zu", index,
                        module->device_name, module->num_contexts,
                        module->is_scalable_ep ? " (scalable endpoint)" : "",
                        (unsigned) module->info->domain_attr->mr_mode, module->inject_size);
    *module_out = module;
    return OPAL_SUCCESS;

fail:
    mca_btl_ofi_module_finalize(&module->super);
    return rc;
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

int mca_btl_ofi_module_finalize(mca_btl_base_module_t *btl)
{
    mca_btl_ofi_module_t *module = (mca_btl_ofi_module_t *) btl;
    mca_btl_ofi_endpoint_t *endpoint, *next;

    /* reverse order of mca_btl_ofi_module_open */
    for (int i = 0; i < module->num_contexts; ++i) {
        context_close(module, module->contexts + i);
    }
    if (NULL != module->ep) {
        fi_close(&module->ep->fid);
        module->ep = NULL;
    }
    /* waiting fragments belong to the free lists of any context: forget
     * them all before the first list goes */
    for (int i = 0; i < module->num_contexts; ++i) {
        while (NULL != opal_list_remove_first(&module->contexts[i].pending_sends)) {
        }
        while (NULL != opal_list_remove_first(&module->contexts[i].unposted_recvs)) {
        }
        module->contexts[i].pending_count = 0;
        module->contexts[i].unposted_count = 0;
    }
    for (int i = 0; i < module->num_contexts; ++i) {
        context_release(module->contexts + i);
    }
    free(module->contexts);
    module->contexts = NULL;
    module->num_contexts = 0;
    if (NULL != module->av) {
        fi_close(&module->av->fid);
    }
    if (NULL != module->rcache) {
        mca_rcache_base_module_destroy(module->rcache);
        module->rcache = NULL;
    }
    if (NULL != module->domain) {
        fi_close(&module->domain->fid);
    }
    if (NULL != module->fabric) {
        fi_close(&module->fabric->fid);
    }
    OPAL_LIST_FOREACH_SAFE(endpoint, next, &module->endpoints, mca_btl_ofi_endpoint_t) {
        opal_list_remove_item(&module->endpoints, &endpoint->super);
        OBJ_RELEASE(endpoint);
    }
    OBJ_DESTRUCT(&module->endpoints);
    OBJ_DESTRUCT(&module->peers);
    OBJ_DESTRUCT(&module->regions);
    OBJ_DESTRUCT(&module->lock);
    if (NULL != module->info) {
        fi_freeinfo(module->info);
    }
    free(module->ep_name);
    free(module->device_name);

    forget_module(module);
    free(module);
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
        .btl_registration_handle_size = sizeof(mca_btl_base_registration_handle_t),
    },
};
