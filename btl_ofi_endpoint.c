/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * Peers: the modex blob we publish and read, the address vector, and the
 * endpoints add_procs makes.  A peer whose blob is missing, foreign or
 * names another provider gets no endpoint, with a message saying why; the
 * layer above then uses another BTL for it.
 */

#include "opal_config.h"

#include <string.h>
#include <sys/socket.h>

#include "btl_ofi.h"

static void endpoint_construct(mca_btl_ofi_endpoint_t *ep)
{
    ep->proc = NULL;
    ep->module = NULL;
    ep->outstanding = 0;

    ep->addr.fi = FI_ADDR_UNSPEC;
    ep->addr.reachable = false;
    ep->addr.send_confirmed = false;
    ep->addr.departed = false;
    ep->addr.widen_socket = false;
    ep->addr.sock_name_len = 0;

    ep->wake.reachable = false;

    ep->rails.ep[0] = ep;
    for (int r = 1; r < MCA_BTL_OFI_MAX_RAILS; ++r) {
        ep->rails.ep[r] = NULL;
    }
    ep->rails.up = 1;
    ep->rails.next = 0;
    memset(ep->rails.refused_since, 0, sizeof(ep->rails.refused_since));
    ep->rails.watch = NULL;

    ep->same_host.shared = false;
    ep->same_host.copy_pid = 0;
    ep->same_host.ep = NULL;
}

static void endpoint_destruct(mca_btl_ofi_endpoint_t *ep)
{
    free(ep->rails.watch);
    ep->rails.watch = NULL;
    for (int r = 1; r < MCA_BTL_OFI_MAX_RAILS; ++r) {
        if (NULL != ep->rails.ep[r]) {
            OBJ_RELEASE(ep->rails.ep[r]);
            ep->rails.ep[r] = NULL;
        }
    }
    if (NULL != ep->same_host.ep) {
        OBJ_RELEASE(ep->same_host.ep);
        ep->same_host.ep = NULL;
    }
}
OBJ_CLASS_INSTANCE(mca_btl_ofi_endpoint_t, opal_list_item_t, endpoint_construct, endpoint_destruct);

/* ------------------------------------------------------------------ */
/* Address vector and our own name                                     */

int mca_btl_ofi_av_open(mca_btl_ofi_module_t *module)
{
    struct fi_av_attr attr = { .type = MCA_BTL_OFI_AV_TYPE, .rx_ctx_bits = module->rx_ctx_bits };
    int rc = fi_av_open(module->domain, &attr, &module->av, NULL);

    if (0 != rc) {
        mca_btl_ofi_show_fi_error("fi_av_open", module->device_name, rc);
        module->av = NULL;
        return OPAL_ERROR;
    }
    return OPAL_SUCCESS;
}

void mca_btl_ofi_av_close(mca_btl_ofi_module_t *module)
{
    if (NULL != module->av) {
        fi_close(&module->av->fid);
        module->av = NULL;
    }
}

int mca_btl_ofi_name_init(mca_btl_ofi_module_t *module)
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
        mca_btl_ofi_name_fini(module);
        return OPAL_ERROR;
    }
    module->ep_name_len = len;
    return OPAL_SUCCESS;
}

void mca_btl_ofi_name_fini(mca_btl_ofi_module_t *module)
{
    free(module->ep_name);
    module->ep_name = NULL;
    module->ep_name_len = 0;
}

/* Where our progress thread takes wake-ups, and the key they must carry. */
static void publish_wake_address(mca_btl_ofi_modex_hdr_t *hdr)
{
    mca_btl_ofi_wake_addr_t self;

    mca_btl_ofi_wake_self(&self);
    hdr->wake_ip4 = self.ip4;
    hdr->wake_port = self.port;
    hdr->wake_net_port = self.net_port;
    hdr->wake_key = self.key;
}

int mca_btl_ofi_modex_send(void)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;
    mca_btl_ofi_modex_hdr_t *hdr;
    size_t size = sizeof(*hdr);
    unsigned char *p;
    int rc;

    for (int i = 0; i < c->module_count; ++i) {
        size += sizeof(uint32_t) + c->modules[i]->ep_name_len;
    }
    hdr = calloc(1, size);
    if (NULL == hdr) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    hdr->magic = MCA_BTL_OFI_MODEX_MAGIC;
    hdr->module_count = (uint32_t) c->module_count;
    strncpy(hdr->provider, c->provider_name, sizeof(hdr->provider) - 1);
    publish_wake_address(hdr);
    hdr->host = *mca_btl_ofi_host_id_self();
    p = (unsigned char *) (hdr + 1);
    for (int i = 0; i < c->module_count; ++i) {
        uint32_t n = (uint32_t) c->modules[i]->ep_name_len;
        memcpy(p, &n, sizeof(n));
        memcpy(p + sizeof(n), c->modules[i]->ep_name, n);
        p += sizeof(n) + n;
    }
    OPAL_MODEX_SEND(rc, MCA_BTL_OFI_MODEX_GLOBAL, &c->super.btl_version, hdr, size);
    free(hdr);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Peers                                                               */

int mca_btl_ofi_peers_init(mca_btl_ofi_module_t *module)
{
    OBJ_CONSTRUCT(&module->lock, opal_mutex_t);
    OBJ_CONSTRUCT(&module->endpoints, opal_list_t);
    OBJ_CONSTRUCT(&module->peers, opal_hash_table_t);
    if (OPAL_SUCCESS != opal_hash_table_init(&module->peers, 256)) {
        mca_btl_ofi_peers_fini(module);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    return OPAL_SUCCESS;
}

void mca_btl_ofi_peers_fini(mca_btl_ofi_module_t *module)
{
    mca_btl_ofi_endpoint_t *endpoint, *next;

    OPAL_LIST_FOREACH_SAFE(endpoint, next, &module->endpoints, mca_btl_ofi_endpoint_t) {
        opal_list_remove_item(&module->endpoints, &endpoint->super);
        OBJ_RELEASE(endpoint);
    }
    OBJ_DESTRUCT(&module->endpoints);
    OBJ_DESTRUCT(&module->peers);
    OBJ_DESTRUCT(&module->lock);
}

static uint64_t name_key(opal_process_name_t name)
{
    uint64_t key;
    memcpy(&key, &name, sizeof(key));
    return key;
}

static void show_unreachable(mca_btl_ofi_module_t *module, opal_proc_t *proc, const char *why)
{
    if (module->serves_same_host) {
        /* the peer's atomics keep to the network provider: nothing lost */
        MCA_BTL_OFI_VERBOSE(1,
                            "%s: %s not reached through shm (%s); its atomics keep to the "
                            "network provider",
                            module->device_name, OPAL_NAME_PRINT(proc->proc_name), why);
        return;
    }
    opal_show_help("help-mpi-btl-ofi.txt", "peer unreachable", true, opal_process_info.nodename,
                   OPAL_NAME_PRINT(proc->proc_name), module->device_name, why);
}

/* Where the peer's progress thread takes wake-ups, from the blob's header
 * (modex_parse checked its size). */
static void read_wake_address(mca_btl_ofi_endpoint_t *endpoint, const void *blob)
{
    const mca_btl_ofi_modex_hdr_t *hdr = blob;
    mca_btl_ofi_wake_addr_t peer = { .ip4 = hdr->wake_ip4,
                                     .port = hdr->wake_port,
                                     .net_port = hdr->wake_net_port,
                                     .key = hdr->wake_key };

    mca_btl_ofi_wake_to_init(&endpoint->wake, &peer,
                             OPAL_PROC_ON_LOCAL_NODE(endpoint->proc->proc_flags));
}

/* Whether the peer shares our host (the runtime places it on this node,
 * and what it published says its pid names it here), and whether its puts
 * and gets are then copied (btl_ofi_copy.c) as the module wants. */
static void read_copy_peer(mca_btl_ofi_endpoint_t *endpoint, const void *blob)
{
    const mca_btl_ofi_modex_hdr_t *hdr = blob;

    endpoint->same_host.shared =
        OPAL_PROC_ON_LOCAL_NODE(endpoint->proc->proc_flags)
        && mca_btl_ofi_host_id_shared(mca_btl_ofi_host_id_self(), &hdr->host);
    endpoint->same_host.copy_pid = 0;
    if (endpoint->module->local_copy && endpoint->same_host.shared) {
        endpoint->same_host.copy_pid = hdr->host.pid;
        MCA_BTL_OFI_VERBOSE(20, "%s: puts and gets copied to pid %u",
                            OPAL_NAME_PRINT(endpoint->proc->proc_name),
                            endpoint->same_host.copy_pid);
    }
}

/* sockets: where the provider connects to reach the peer, so that
 * mca_btl_ofi_sockets_widen (btl_ofi_context.c, which says why) finds the
 * socket once an operation to the peer has completed. */
static void note_sockets_address(mca_btl_ofi_endpoint_t *endpoint, const void *name, size_t len)
{
    const struct sockaddr *sa = name;

    /* sockets_buf_sz is positive on sockets only (mca_btl_ofi_sockets_buf_size) */
    if (mca_btl_ofi_component.sockets_buf_sz <= 0 || len > sizeof(endpoint->addr.sock_name)
        || len < sizeof(sa->sa_family) || (AF_INET != sa->sa_family && AF_INET6 != sa->sa_family)) {
        return;
    }
    memcpy(&endpoint->addr.sock_name, name, len);
    endpoint->addr.sock_name_len = len;
    endpoint->addr.widen_socket = true;
}

/* With FI_THREAD_COMPLETION a provider changes its endpoints from inside
 * an AV call without their locks (tcp;ofi_rxm closes the peer's
 * connection in fi_av_remove): no CQ of the module is read meanwhile.
 * Callers hold the module lock, which no context lock holder takes. */
static void contexts_lock_all(mca_btl_ofi_module_t *module)
{
    if (!mca_btl_ofi_component.posts_locked) {
        return;
    }
    for (int i = 0; i < module->num_contexts; ++i) {
        mca_btl_ofi_ctx_lock(&module->contexts[i].lock);
    }
}

static void contexts_unlock_all(mca_btl_ofi_module_t *module)
{
    if (!mca_btl_ofi_component.posts_locked) {
        return;
    }
    for (int i = 0; i < module->num_contexts; ++i) {
        mca_btl_ofi_ctx_unlock(&module->contexts[i].lock);
    }
}

static int av_insert_one(mca_btl_ofi_module_t *module, const void *name, fi_addr_t *addr)
{
    int rc;

    contexts_lock_all(module);
    rc = fi_av_insert(module->av, name, 1, addr, 0, NULL);
    contexts_unlock_all(module);
    return rc;
}

static int av_remove_one(mca_btl_ofi_module_t *module, fi_addr_t *addr)
{
    int rc;

    contexts_lock_all(module);
    rc = fi_av_remove(module->av, addr, 1, 0);
    contexts_unlock_all(module);
    return rc;
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

    MCA_BTL_OFI_ASSERT_LOCKED(&module->lock);
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
    rc = av_insert_one(module, name, &addr);
    if (1 != rc) {
        show_unreachable(module, proc, rc < 0 ? fi_strerror(-rc) : "fi_av_insert inserted nothing");
        goto out;
    }
    mca_btl_ofi_count(module, MCA_BTL_OFI_CNT_AV_INSERT, 1);
    if (module->is_scalable_ep) {
        addr = fi_rx_addr(addr, 0, module->rx_ctx_bits);
    }
    endpoint = OBJ_NEW(mca_btl_ofi_endpoint_t);
    if (NULL == endpoint) {
        (void) av_remove_one(module, &addr);
        goto out;
    }
    endpoint->proc = proc;
    endpoint->addr.fi = addr;
    endpoint->module = module;
    endpoint->addr.reachable = true;
    read_wake_address(endpoint, blob);
    read_copy_peer(endpoint, blob);
    note_sockets_address(endpoint, name, len);

out:
    free(blob);
    return endpoint;
}

/* The module's endpoint for @p proc, made on first sight; NULL when the
 * peer published nothing usable for this module. */
static mca_btl_ofi_endpoint_t *endpoint_of(mca_btl_ofi_module_t *module, opal_proc_t *proc,
                                           bool *created)
{
    mca_btl_ofi_endpoint_t *endpoint = NULL;
    uint64_t key = name_key(proc->proc_name);

    MCA_BTL_OFI_ASSERT_LOCKED(&module->lock);
    *created = false;
    if (OPAL_SUCCESS
        == opal_hash_table_get_value_uint64(&module->peers, key, (void **) &endpoint)) {
        return endpoint;
    }
    endpoint = create_endpoint(module, proc);
    if (NULL != endpoint) {
        opal_list_append(&module->endpoints, &endpoint->super);
        opal_hash_table_set_value_uint64(&module->peers, key, endpoint);
        *created = true;
    }
    return endpoint;
}

/* The lead module's new endpoint learns the same peer on every rail; a
 * rail the peer cannot be reached on stays out of service for it. */
static void attach_rails(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint)
{
    endpoint->rails.watch = calloc(module->num_rails, sizeof(*endpoint->rails.watch));
    if (NULL == endpoint->rails.watch) {
        MCA_BTL_OFI_VERBOSE(1, "%s: no memory to watch its rails: rail 0 only",
                            OPAL_NAME_PRINT(endpoint->proc->proc_name));
        return;
    }
    for (int r = 1; r < module->num_rails; ++r) {
        mca_btl_ofi_module_t *rail = module->rails[r];
        mca_btl_ofi_endpoint_t *peer;
        bool created;

        mca_btl_ofi_lock(&rail->lock);
        peer = endpoint_of(rail, endpoint->proc, &created);
        if (NULL != peer) {
            OBJ_RETAIN(peer);
        }
        mca_btl_ofi_unlock(&rail->lock);
        endpoint->rails.ep[r] = peer;
        if (NULL != peer && peer->addr.reachable) {
            endpoint->rails.up |= 1 << r;
        }
    }
}

/* A same-host peer of a lead with a same-host module learns its endpoint
 * there, where its atomics go. */
static void attach_same_host(mca_btl_ofi_module_t *module, mca_btl_ofi_endpoint_t *endpoint)
{
    mca_btl_ofi_module_t *shm = module->same_host;
    mca_btl_ofi_endpoint_t *peer;
    bool created;

    if (!endpoint->same_host.shared) {
        return;
    }
    mca_btl_ofi_lock(&shm->lock);
    peer = endpoint_of(shm, endpoint->proc, &created);
    if (NULL != peer && peer->addr.reachable) {
        OBJ_RETAIN(peer);
        endpoint->same_host.ep = peer;
    }
    mca_btl_ofi_unlock(&shm->lock);
    MCA_BTL_OFI_VERBOSE(20, "%s: atomics %s", OPAL_NAME_PRINT(endpoint->proc->proc_name),
                        NULL != endpoint->same_host.ep ? "through shm" : "through the network");
}

int mca_btl_ofi_add_procs(mca_btl_base_module_t *btl, size_t nprocs, opal_proc_t **procs,
                          mca_btl_base_endpoint_t **peers, opal_bitmap_t *reachable)
{
    mca_btl_ofi_module_t *module = (mca_btl_ofi_module_t *) btl;

    if (module->lent && 0 == (module->super.btl_flags & MCA_BTL_FLAGS_SEND)) {
        /* a rail with nothing to offer the layer above (one-sided mode):
         * the bml would take it for a sending BTL; the lead makes the
         * endpoints it needs itself (attach_rails) */
        for (size_t i = 0; i < nprocs; ++i) {
            peers[i] = NULL;
        }
        return OPAL_SUCCESS;
    }
    mca_btl_ofi_lock(&module->lock);
    for (size_t i = 0; i < nprocs; ++i) {
        bool created;
        mca_btl_ofi_endpoint_t *endpoint = endpoint_of(module, procs[i], &created);

        peers[i] = endpoint;
        if (NULL == endpoint) {
            continue;
        }
        if (created && module->num_rails > 1) {
            attach_rails(module, endpoint);
        }
        if (created && NULL != module->same_host) {
            attach_same_host(module, endpoint);
        }
        if (NULL != reachable) {
            (void) opal_bitmap_set_bit(reachable, (int) i);
        }
    }
    mca_btl_ofi_unlock(&module->lock);
    return OPAL_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Peers of other jobs that leave                                      */

/*
 * A process of a spawned or connected job that leaves tells its peers of
 * other jobs itself: Open MPI 4.1's runtime announces no job's end, 5.0's
 * comes only once the whole job has gone, and neither calls del_procs for
 * another job's processes.  When the module closes (MPI_Finalize) it sends
 * each such peer a LEAVING message (btl_ofi_module.c).  The receiver marks
 * the endpoint departed; its address-vector entry goes at the next idle
 * progress pass, as an ended job's do.
 */
volatile int32_t mca_btl_ofi_peers_left = 0;
int32_t mca_btl_ofi_peers_left_seen = 0;

static void mark_departed(mca_btl_ofi_endpoint_t *endpoint)
{
    if (NULL != endpoint && !endpoint->addr.departed) {
        endpoint->addr.departed = true;
        (void) opal_atomic_add_fetch_32((opal_atomic_int32_t *) &mca_btl_ofi_peers_left, 1);
    }
}

/* On any thread that progresses: the same process on the lead's other
 * rails and its same-host module leaves too. */
void mca_btl_ofi_peer_leaving(mca_btl_ofi_module_t *module, const mca_btl_ofi_am_hdr_t *hdr,
                              size_t len)
{
    opal_process_name_t name = { .jobid = hdr->src_jobid, .vpid = hdr->src_vpid };
    mca_btl_ofi_endpoint_t *endpoint = NULL;

    (void) len;
    mca_btl_ofi_lock(&module->lock);
    if (OPAL_SUCCESS
        == opal_hash_table_get_value_uint64(&module->peers, name_key(name), (void **) &endpoint)) {
        mark_departed(endpoint);
        for (int r = 1; r < MCA_BTL_OFI_MAX_RAILS; ++r) {
            mark_departed(endpoint->rails.ep[r]);
        }
        mark_departed(endpoint->same_host.ep);
        mca_btl_ofi_count(module, MCA_BTL_OFI_CNT_PEER_LEFT, 1);
    }
    mca_btl_ofi_unlock(&module->lock);
}

int mca_btl_ofi_del_procs(mca_btl_base_module_t *btl, size_t nprocs, opal_proc_t **procs,
                          mca_btl_base_endpoint_t **peers)
{
    mca_btl_ofi_module_t *module = (mca_btl_ofi_module_t *) btl;

    mca_btl_ofi_lock(&module->lock);
    for (size_t i = 0; i < nprocs; ++i) {
        mca_btl_ofi_endpoint_t *endpoint = NULL;
        uint64_t key = name_key(procs[i]->proc_name);

        if (OPAL_SUCCESS
            != opal_hash_table_get_value_uint64(&module->peers, key, (void **) &endpoint)) {
            continue;
        }
        if (NULL != peers && NULL != peers[i] && peers[i] != endpoint) {
            continue;
        }
        /* no longer found by name; the endpoint itself stays on the list
         * until the module closes: sends still in flight name it, and their
         * completions, read after this (at MPI_Finalize, ob1's last control
         * messages), write to it; so does its address stay in the AV */
        (void) opal_hash_table_remove_value_uint64(&module->peers, key);
    }
    mca_btl_ofi_unlock(&module->lock);
    return OPAL_SUCCESS;
}

mca_btl_ofi_endpoint_t *mca_btl_ofi_endpoint_of_sender(mca_btl_ofi_module_t *module,
                                                       const mca_btl_ofi_am_hdr_t *hdr)
{
    opal_process_name_t name = { .jobid = hdr->src_jobid, .vpid = hdr->src_vpid };
    mca_btl_ofi_endpoint_t *endpoint = NULL;

    mca_btl_ofi_lock(&module->lock);
    (void) opal_hash_table_get_value_uint64(&module->peers, name_key(name), (void **) &endpoint);
    mca_btl_ofi_unlock(&module->lock);
    return endpoint;
}

/* The one endpoint our operations wait on; NULL where they wait on none
 * or on several. */
static mca_btl_ofi_endpoint_t *lone_waited(mca_btl_ofi_module_t *module)
{
    mca_btl_ofi_endpoint_t *endpoint, *lone = NULL;

    OPAL_LIST_FOREACH(endpoint, &module->endpoints, mca_btl_ofi_endpoint_t) {
        if (endpoint->outstanding > 0) {
            if (NULL != lone) {
                return NULL;
            }
            lone = endpoint;
        }
    }
    return lone;
}

static int wake_every_waited(mca_btl_ofi_module_t *module)
{
    mca_btl_ofi_endpoint_t *endpoint;
    int woken = 0;

    OPAL_LIST_FOREACH(endpoint, &module->endpoints, mca_btl_ofi_endpoint_t) {
        woken += endpoint->outstanding > 0 && mca_btl_ofi_wake_send(&endpoint->wake);
    }
    return woken;
}

int mca_btl_ofi_endpoints_wake_waited(mca_btl_ofi_module_t *module, bool lone_only)
{
    mca_btl_ofi_endpoint_t *lone;
    int woken;

    if (!mca_btl_ofi_trylock(&module->lock)) {
        return 0;
    }
    if (lone_only) {
        lone = lone_waited(module);
        woken = NULL != lone && mca_btl_ofi_wake_send(&lone->wake);
    } else {
        woken = wake_every_waited(module);
    }
    mca_btl_ofi_unlock(&module->lock);
    if (woken > 0) {
        mca_btl_ofi_count(module, MCA_BTL_OFI_CNT_WAKE_SENT, (uint64_t) woken);
    }
    return woken;
}

/* ------------------------------------------------------------------ */
/* Jobs connected to ours that end                                     */

/*
 * When a process of a spawned or connected job dies, PRRTE ends that job
 * and not ours; only a provider that fails a send to it would tell us, and
 * most never do (a dead peer's connection stays silent), so its peers
 * would wait for it for good.  PRRTE does announce the end of every job,
 * with its status, to handlers of PMIX_EVENT_JOB_END.  The PMIx thread
 * records each end in a ring; the next progress pass of an application
 * thread that finds nothing (a wait, btl_flush's included) acts on it:
 * - a job that ended abnormally: its processes are reported lost to the
 *   layer above (ob1 then ends this job);
 * - a job that ended cleanly: its processes left after disconnecting, but
 *   Open MPI 5.0 never tells the BTLs (no del_procs before MPI_Finalize),
 *   so their address-vector entries are removed here, once nothing of
 *   ours is in flight that a provider could still complete through them.
 *   A spawn/disconnect loop then keeps its AV flat.
 */
#define ENDED_JOBS 64

volatile int32_t mca_btl_ofi_jobs_ended = 0;
int32_t mca_btl_ofi_jobs_ended_seen = 0; /* retired up to here (and reported) */
static int32_t jobs_reported = 0;        /* reported up to here */
static struct {
    opal_jobid_t jobid;
    int status;
} ended_jobs[ENDED_JOBS];

/* Every endpoint of @p jobid in @p module: made unreachable, its process
 * put in @p lost (grown as needed; when it cannot grow, the rest of them
 * stay reachable); returns how many. */
static int take_lost(mca_btl_ofi_module_t *module, opal_jobid_t jobid, opal_proc_t ***lost,
                     int *room)
{
    mca_btl_ofi_endpoint_t *endpoint;
    int n = 0;

    mca_btl_ofi_lock(&module->lock);
    OPAL_LIST_FOREACH(endpoint, &module->endpoints, mca_btl_ofi_endpoint_t) {
        if (endpoint->proc->proc_name.jobid != jobid || !endpoint->addr.reachable) {
            continue;
        }
        if (n == *room) {
            int grown = 2 * *room + 4;
            opal_proc_t **more = realloc(*lost, (size_t) grown * sizeof(**lost));

            if (NULL == more) {
                break; /* those listed still go */
            }
            *lost = more;
            *room = grown;
        }
        endpoint->addr.reachable = false;
        (*lost)[n++] = endpoint->proc;
    }
    mca_btl_ofi_unlock(&module->lock);
    return n;
}

static void report_job_lost(opal_jobid_t jobid, int status)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;
    opal_proc_t **lost = NULL;
    bool shown = false;
    int room = 0;

    for (int m = 0; m < c->module_count; ++m) {
        mca_btl_ofi_module_t *module = c->modules[m];
        int n = take_lost(module, jobid, &lost, &room);

        if (n > 0 && !shown) {
            shown = true;
            opal_show_help("help-mpi-btl-ofi.txt", "connected job ended", true,
                           opal_process_info.nodename, OPAL_JOBID_PRINT(jobid), status);
        }
        for (int i = 0; i < n && NULL != module->error_cb; ++i) {
            module->error_cb(&module->super, MCA_BTL_ERROR_FLAGS_FATAL, lost[i],
                             "btl/ofi: the job of a connected process ended abnormally");
        }
    }
    free(lost);
}

/* Nothing of ours in flight in any module: no completion can still come
 * through an address we remove.  Read unlocked: a send posted meanwhile
 * goes to a peer of a live job, never to one whose job has ended. */
static bool nothing_in_flight(void)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;

    for (int m = 0; m < c->module_count; ++m) {
        const mca_btl_ofi_module_t *module = c->modules[m];

        for (int i = 0; i < module->num_contexts; ++i) {
            if (mca_btl_ofi_context_owes(module->contexts + i)
                || mca_btl_ofi_context_sending(module->contexts + i)) {
                return false;
            }
        }
    }
    return true;
}

static bool goes(const mca_btl_ofi_endpoint_t *endpoint, opal_jobid_t jobid, bool departed)
{
    if (FI_ADDR_NOTAVAIL == endpoint->addr.fi) {
        return false; /* gone already */
    }
    return departed ? endpoint->addr.departed : endpoint->proc->proc_name.jobid == jobid;
}

/* The address-vector entries of @p jobid's processes (@p departed: of the
 * peers that said they leave) in every module go; the endpoints stay (ob1
 * still names them until MPI_Finalize), unreachable. */
static void retire_endpoints(opal_jobid_t jobid, bool departed)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;
    uint64_t total = 0;

    for (int m = 0; m < c->module_count; ++m) {
        mca_btl_ofi_module_t *module = c->modules[m];
        mca_btl_ofi_endpoint_t *endpoint;
        uint64_t removed = 0;

        mca_btl_ofi_lock(&module->lock);
        OPAL_LIST_FOREACH(endpoint, &module->endpoints, mca_btl_ofi_endpoint_t) {
            if (!goes(endpoint, jobid, departed)) {
                continue;
            }
            endpoint->addr.reachable = false;
            if (0 == av_remove_one(module, &endpoint->addr.fi)) {
                ++removed;
            }
            endpoint->addr.fi = FI_ADDR_NOTAVAIL;
        }
        mca_btl_ofi_unlock(&module->lock);
        if (removed > 0) {
            mca_btl_ofi_count(module, MCA_BTL_OFI_CNT_AV_REMOVE, removed);
            total += removed;
        }
    }
    if (total > 0) {
        MCA_BTL_OFI_VERBOSE(10, "%s: %" PRIu64 " address-vector entries removed",
                            departed ? "peers that left" : OPAL_JOBID_PRINT(jobid), total);
    }
}

/* A cursor that fell more than the ring behind skips what was overwritten. */
static int32_t oldest_kept(int32_t cursor, int32_t ended)
{
    return ended - cursor > ENDED_JOBS ? ended - ENDED_JOBS : cursor;
}

static void report_ended_jobs(int32_t ended)
{
    int32_t seen = jobs_reported;

    /* one application thread reports each job */
    if (seen == ended
        || !__atomic_compare_exchange_n(&jobs_reported, &seen, ended, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
        return;
    }
    for (int32_t k = oldest_kept(seen, ended); k != ended; ++k) {
        if (0 != ended_jobs[k % ENDED_JOBS].status) {
            report_job_lost(ended_jobs[k % ENDED_JOBS].jobid, ended_jobs[k % ENDED_JOBS].status);
        }
    }
}

/* Behind the reports: waits, pass after pass, until nothing is in flight. */
static void retire_ended_jobs(int32_t ended)
{
    int32_t seen = mca_btl_ofi_jobs_ended_seen;

    if (seen == ended || !nothing_in_flight()
        || !__atomic_compare_exchange_n(&mca_btl_ofi_jobs_ended_seen, &seen, ended, false,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
        return;
    }
    for (int32_t k = oldest_kept(seen, ended); k != ended; ++k) {
        if (0 == ended_jobs[k % ENDED_JOBS].status) {
            retire_endpoints(ended_jobs[k % ENDED_JOBS].jobid, false);
        }
    }
}

/* Behind the reports too, the same way: the peers that said they leave. */
static void retire_departed(int32_t left)
{
    int32_t seen = mca_btl_ofi_peers_left_seen;

    if (seen == left || !nothing_in_flight()
        || !__atomic_compare_exchange_n(&mca_btl_ofi_peers_left_seen, &seen, left, false,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
        return;
    }
    retire_endpoints(OPAL_JOBID_INVALID, true);
}

void mca_btl_ofi_peers_gone(void)
{
    int32_t ended = __atomic_load_n(&mca_btl_ofi_jobs_ended, __ATOMIC_ACQUIRE);

    report_ended_jobs(ended);
    retire_ended_jobs(ended);
    retire_departed(__atomic_load_n(&mca_btl_ofi_peers_left, __ATOMIC_ACQUIRE));
}

#if MCA_BTL_OFI_HAVE_JOB_END_EVENTS

static size_t job_end_handler;
static volatile bool job_end_watched = false;

static int term_status(const pmix_info_t *info)
{
    return PMIX_STATUS == info->value.type ? info->value.data.status : info->value.data.integer;
}

/* On the PMIx thread: record, never report from here (the layer above may
 * call back into PMIx to abort, which would wait for this very thread). */
static void job_ended(size_t handler, pmix_status_t code, const pmix_proc_t *source,
                      pmix_info_t info[], size_t ninfo, pmix_info_t *results, size_t nresults,
                      pmix_event_notification_cbfunc_fn_t done, void *done_data)
{
    const pmix_proc_t *affected = NULL;
    opal_jobid_t jobid;
    int status = 0;

    (void) handler;
    (void) code;
    (void) source;
    (void) results;
    (void) nresults;
    for (size_t i = 0; i < ninfo; ++i) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_JOB_TERM_STATUS)) {
            status = term_status(&info[i]);
        } else if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROC)
                   && PMIX_PROC == info[i].value.type) {
            affected = info[i].value.data.proc;
        }
    }
    if (NULL != affected
        && OPAL_SUCCESS == opal_pmix_convert_nspace(&jobid, (char *) affected->nspace)
        && jobid != OPAL_PROC_MY_NAME.jobid) {
        int32_t n = mca_btl_ofi_jobs_ended; /* only this thread writes it */

        ended_jobs[n % ENDED_JOBS].jobid = jobid;
        ended_jobs[n % ENDED_JOBS].status = status;
        __atomic_store_n(&mca_btl_ofi_jobs_ended, n + 1, __ATOMIC_RELEASE);
        MCA_BTL_OFI_VERBOSE(10, "job %s ended with status %d", OPAL_JOBID_PRINT(jobid), status);
    }
    if (NULL != done) {
        done(PMIX_SUCCESS, NULL, 0, NULL, NULL, done_data);
    }
}

static void job_end_registered(pmix_status_t status, size_t handler, void *unused)
{
    (void) unused;
    if (PMIX_SUCCESS == status) {
        job_end_handler = handler;
        job_end_watched = true;
    }
}

static void job_end_deregistered(pmix_status_t status, void *unused)
{
    (void) status;
    (void) unused;
}

void mca_btl_ofi_peer_jobs_watch(void)
{
    pmix_status_t code = PMIX_EVENT_JOB_END;

    (void) PMIx_Register_event_handler(&code, 1, NULL, 0, job_ended, job_end_registered, NULL);
}

void mca_btl_ofi_peer_jobs_unwatch(void)
{
    if (job_end_watched) {
        job_end_watched = false;
        (void) PMIx_Deregister_event_handler(job_end_handler, job_end_deregistered, NULL);
    }
}

#else /* the runtime of Open MPI 4.1 announces no job's end */

void mca_btl_ofi_peer_jobs_watch(void)
{
}

void mca_btl_ofi_peer_jobs_unwatch(void)
{
}

#endif
