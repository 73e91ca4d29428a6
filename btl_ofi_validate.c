/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * The component's decisions that need nothing but their inputs (see
 * btl_ofi_validate.h): kept free of Open MPI, so that the unit tests and
 * the raw-libfabric benchmark link this file alone.
 */

/* dirfd() when built alone with -std=c11 (inside Open MPI, opal_config.h
 * asks for the same) */
#ifndef _GNU_SOURCE
#    define _GNU_SOURCE
#endif

#include "btl_ofi_validate.h"

#include <dirent.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <rdma/fi_endpoint.h>

static bool reject(char *why, size_t why_len, const char *fmt, ...)
{
    if (NULL != why && why_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return false;
}

bool mca_btl_ofi_name_has_layer(const char *prov_name, const char *layer)
{
    size_t len = strlen(layer);
    const char *p = prov_name;

    while (NULL != p && '\0' != *p) {
        if (0 == strncasecmp(p, layer, len) && (p[len] == '\0' || p[len] == ';')) {
            return true;
        }
        p = strchr(p, ';');
        if (NULL != p) {
            ++p;
        }
    }
    return false;
}

/* We ask for API 1.9 or newer, so mr_mode is always a mask of mode bits:
 * the pre-1.5 values FI_MR_BASIC and FI_MR_SCALABLE (deprecated in 2.0,
 * whose headers warn where they are named) are never returned, and their
 * bits count as unsupported. */
static bool mr_mode_supported(int mr_mode)
{
    return 0 == (mr_mode & ~MCA_BTL_OFI_MR_MODE_SUPPORTED);
}

static bool psm3_over_sockets(const struct fi_info *info)
{
    const char *fabric = info->fabric_attr->name;
    return NULL != fabric
           && (0 == strncasecmp(fabric, "TCP-", 4) || 0 == strncasecmp(fabric, "UDP-", 4));
}

bool mca_btl_ofi_info_usable(const struct fi_info *info, uint64_t required_caps, char *why,
                             size_t why_len)
{
    const char *prov;

    if (NULL == info || NULL == info->fabric_attr || NULL == info->fabric_attr->prov_name
        || NULL == info->domain_attr || NULL == info->ep_attr || NULL == info->tx_attr) {
        return reject(why, why_len, "incomplete fi_info");
    }
    prov = info->fabric_attr->prov_name;

    if (FI_EP_RDM != info->ep_attr->type) {
        return reject(why, why_len, "%s: endpoint type is not FI_EP_RDM", prov);
    }
    if ((info->caps & required_caps) != required_caps) {
        return reject(why, why_len, "%s: missing capabilities 0x%llx", prov,
                      (unsigned long long) (required_caps & ~info->caps));
    }
    /* Before libfabric 1.12 efa claimed delivery-complete without keeping
     * the promise; osc/rdma's remote completion depends on it. */
    if (mca_btl_ofi_name_has_layer(prov, "efa")
        && FI_VERSION_LT(info->fabric_attr->prov_version, MCA_BTL_OFI_RELEASE(1, 12))) {
        return reject(why, why_len, "%s: provider version older than libfabric 1.12", prov);
    }
    /* rxd crashed inside its own code in our MPI suite with libfabric 1.17
     * (fetching atomics from three or more peers; strided RMA stalled) and
     * again with 2.1 (SIGSEGV in rxd_start_xfer under fi_cq_read, with or
     * without our progress thread: rma_atomics np 3, rma_many_ops,
     * rma_threads): a job is better off without it than killed by it.
     * Releases after 2.1 are untried. */
    if (mca_btl_ofi_name_has_layer(prov, "ofi_rxd")
        && FI_VERSION_LT(info->fabric_attr->prov_version, MCA_BTL_OFI_RELEASE(2, 2))) {
        return reject(
            why, why_len,
            "%s: ofi_rxd of libfabric 2.1 and older crashes inside libfabric in our suite", prov);
    }
    /* psm3 without its NIC runs over the kernel's sockets (fabric "TCP-..."
     * or "UDP-..."); so run, libfabric 2.1's psm3 hung right after the
     * start of our one-sided and two-sided tests, and it would outrank
     * tcp;ofi_rxm as a hardware provider */
    if (mca_btl_ofi_name_has_layer(prov, "psm3") && psm3_over_sockets(info)) {
        return reject(why, why_len, "%s: runs over kernel sockets (fabric %s), hung in our suite",
                      prov, info->fabric_attr->name);
    }
    if (!mr_mode_supported(info->domain_attr->mr_mode)) {
        return reject(why, why_len, "%s: unsupported memory-registration mode 0x%x", prov,
                      (unsigned) info->domain_attr->mr_mode);
    }
    if (0 != (info->mode & ~(uint64_t) MCA_BTL_OFI_MODE_SUPPORTED)) {
        return reject(why, why_len, "%s: requires unsupported mode bits 0x%llx", prov,
                      (unsigned long long) (info->mode & ~(uint64_t) MCA_BTL_OFI_MODE_SUPPORTED));
    }
    if (0 == (info->tx_attr->op_flags & FI_DELIVERY_COMPLETE)) {
        return reject(why, why_len, "%s: no delivery-complete semantics", prov);
    }
    return true;
}

bool mca_btl_ofi_is_efa_direct(const struct fi_info *info)
{
    return NULL != info && NULL != info->fabric_attr && NULL != info->fabric_attr->name
           && 0 == strcasecmp(info->fabric_attr->name, "efa-direct");
}

void mca_btl_ofi_plan_info(const struct fi_info *info, mca_btl_ofi_plan_t *plan)
{
    int mr_mode = info->domain_attr->mr_mode;
    const char *prov = info->fabric_attr->prov_name;
    bool efa = NULL != prov && mca_btl_ofi_name_has_layer(prov, "efa");

    memset(plan, 0, sizeof(*plan));
    plan->virt_addr = 0 != (mr_mode & FI_MR_VIRT_ADDR);
    plan->prov_key = 0 != (mr_mode & FI_MR_PROV_KEY);
    plan->mr_endpoint = 0 != (mr_mode & FI_MR_ENDPOINT);
    plan->mr_local = 0 != (mr_mode & FI_MR_LOCAL);
    plan->context2 = 0 != (info->mode & FI_CONTEXT2);
    plan->provider_atomics = 0 != (info->caps & FI_ATOMIC);
    plan->bypass_mr_cache =
        efa && FI_VERSION_LT(info->fabric_attr->prov_version, MCA_BTL_OFI_RELEASE(2, 2));
    plan->efa_direct = mca_btl_ofi_is_efa_direct(info);
}

/* Software providers by preference; hardware providers are everything not
 * listed here and rank above all of them. */
static const struct {
    const char *name;
    int score;
} software_ranks[] = {
    { "shm", 60 },         { "tcp;ofi_rxm", 50 }, { "tcp", 45 }, { "sockets", 40 },
    { "udp;ofi_rxd", 20 }, { "net", 10 },         { "udp", 5 },  { NULL, 0 },
};

int mca_btl_ofi_provider_rank(const char *prov_name, bool job_on_one_node)
{
    if (NULL == prov_name) {
        return -1;
    }
    for (int i = 0; NULL != software_ranks[i].name; ++i) {
        if (0 != strcasecmp(prov_name, software_ranks[i].name)) {
            continue;
        }
        if (0 == strcasecmp(prov_name, "shm") && !job_on_one_node) {
            return -1;
        }
        return software_ranks[i].score;
    }
    /* a layered provider over a known software core ranks with that core */
    if (mca_btl_ofi_name_has_layer(prov_name, "shm")
        || mca_btl_ofi_name_has_layer(prov_name, "sockets")
        || mca_btl_ofi_name_has_layer(prov_name, "udp")
        || mca_btl_ofi_name_has_layer(prov_name, "tcp")
        || mca_btl_ofi_name_has_layer(prov_name, "net")) {
        return 1;
    }
    return 100;
}

/* Does an entry of the comma-separated list name the provider, by its full
 * name or (unless exact_only) by one of its layers? */
static bool list_matches(const char *list, const char *prov_name, bool exact_only)
{
    const char *p = list;

    if (NULL == list || NULL == prov_name) {
        return false;
    }
    while ('\0' != *p) {
        const char *end = strchr(p, ',');
        size_t len = (NULL == end) ? strlen(p) : (size_t) (end - p);
        char entry[128];

        while (len > 0 && (*p == ' ' || *p == '\t')) {
            ++p;
            --len;
        }
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t')) {
            --len;
        }
        if (len > 0 && len < sizeof(entry)) {
            memcpy(entry, p, len);
            entry[len] = '\0';
            if (0 == strcasecmp(entry, prov_name)
                || (!exact_only && mca_btl_ofi_name_has_layer(prov_name, entry))) {
                return true;
            }
        }
        if (NULL == end) {
            break;
        }
        p = end + 1;
    }
    return false;
}

bool mca_btl_ofi_list_names(const char *list, const char *prov_name)
{
    return list_matches(list, prov_name, false);
}

bool mca_btl_ofi_list_names_exactly(const char *list, const char *prov_name)
{
    return list_matches(list, prov_name, true);
}

mca_btl_ofi_param_check_t mca_btl_ofi_clamp_int(int *value, int min, int max)
{
    if (*value < min) {
        *value = min;
        return MCA_BTL_OFI_PARAM_CLAMPED;
    }
    if (*value > max) {
        *value = max;
        return MCA_BTL_OFI_PARAM_CLAMPED;
    }
    return MCA_BTL_OFI_PARAM_OK;
}

void mca_btl_ofi_fill_hints(struct fi_info *hints, uint64_t caps, int progress,
                            enum fi_threading threading)
{
    hints->caps = caps;
    hints->mode = MCA_BTL_OFI_MODE_SUPPORTED;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode = MCA_BTL_OFI_MR_MODE_SUPPORTED;
    if (0 == (caps & FI_HMEM)) {
        hints->domain_attr->mr_mode &= ~FI_MR_HMEM;
    }
    hints->domain_attr->threading = threading;
    hints->domain_attr->control_progress = progress;
    hints->domain_attr->data_progress = progress;
    hints->domain_attr->resource_mgmt = FI_RM_ENABLED;
    hints->domain_attr->av_type = MCA_BTL_OFI_AV_TYPE;
    hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
}

uint64_t mca_btl_ofi_wished_caps(const mca_btl_ofi_wishes_t *w)
{
    uint64_t caps = (w->rma ? MCA_BTL_OFI_RMA_CAPS : 0) | (w->msg ? MCA_BTL_OFI_MSG_CAPS : 0);

    if (!w->atomics) {
        caps &= ~(uint64_t) FI_ATOMIC;
    }
#if defined(FI_HMEM)
    if (w->hmem) {
        caps |= FI_HMEM;
    }
#endif
    return caps;
}

uint64_t mca_btl_ofi_primary_caps(uint64_t caps)
{
    return caps
           & ~(uint64_t) (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SEND
                          | FI_RECV);
}

bool mca_btl_ofi_give_up_wish(mca_btl_ofi_wishes_t *w)
{
    if (w->hmem) {
        w->hmem = false;
    } else if (w->atomics && w->msg && w->rma) {
        w->atomics = false;
    } else if (w->msg && w->msg_optional && w->rma) {
        w->atomics = true;
        w->msg = false;
    } else {
        return false;
    }
    return true;
}

int mca_btl_ofi_parse_progress_thread(const char *name)
{
    static const struct {
        const char *name;
        int value;
    } names[] = {
        { "auto", MCA_BTL_OFI_PROGRESS_THREAD_AUTO }, { "on", MCA_BTL_OFI_PROGRESS_THREAD_ON },
        { "yes", MCA_BTL_OFI_PROGRESS_THREAD_ON },    { "1", MCA_BTL_OFI_PROGRESS_THREAD_ON },
        { "off", MCA_BTL_OFI_PROGRESS_THREAD_OFF },   { "no", MCA_BTL_OFI_PROGRESS_THREAD_OFF },
        { "0", MCA_BTL_OFI_PROGRESS_THREAD_OFF },
    };

    if (NULL == name || '\0' == name[0]) {
        return MCA_BTL_OFI_PROGRESS_THREAD_AUTO;
    }
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
        if (0 == strcasecmp(name, names[i].name)) {
            return names[i].value;
        }
    }
    return -1;
}

bool mca_btl_ofi_progress_thread_wanted(int setting, int data_progress, const char **why)
{
    const char *reason;
    bool wanted;

    switch (setting) {
    case MCA_BTL_OFI_PROGRESS_THREAD_OFF:
        reason = "btl_ofi_progress_thread is off";
        wanted = false;
        break;
    case MCA_BTL_OFI_PROGRESS_THREAD_ON:
        reason = "btl_ofi_progress_thread is on";
        wanted = true;
        break;
    default:
        wanted = FI_PROGRESS_AUTO != data_progress;
        reason = wanted ? "the provider moves data only when called (manual progress)"
                        : "the provider moves data on its own (FI_PROGRESS_AUTO)";
        break;
    }
    if (NULL != why) {
        *why = reason;
    }
    return wanted;
}

int mca_btl_ofi_parse_progress_mode(const char *name)
{
    if (NULL == name || 0 == strcasecmp(name, "unspec") || '\0' == name[0]) {
        return FI_PROGRESS_UNSPEC;
    }
    if (0 == strcasecmp(name, "auto")) {
        return FI_PROGRESS_AUTO;
    }
    if (0 == strcasecmp(name, "manual")) {
        return FI_PROGRESS_MANUAL;
    }
    return -1;
}

const char *mca_btl_ofi_modex_provider(const void *blob, size_t size)
{
    const mca_btl_ofi_modex_hdr_t *hdr = blob;

    if (NULL == blob || size < sizeof(*hdr) || MCA_BTL_OFI_MODEX_MAGIC != hdr->magic
        || NULL == memchr(hdr->provider, '\0', sizeof(hdr->provider))) {
        return NULL;
    }
    return hdr->provider;
}

int mca_btl_ofi_modex_parse(const void *blob, size_t size, const char *provider, int index,
                            const void **name, size_t *len, const char **why)
{
    const mca_btl_ofi_modex_hdr_t *hdr = blob;
    const char *theirs = mca_btl_ofi_modex_provider(blob, size);
    const unsigned char *p, *end;

    if (NULL == blob || size < sizeof(*hdr)) {
        *why = "endpoint data is truncated";
        return -1;
    }
    if (NULL == theirs) {
        *why = "endpoint data has an unknown format";
        return -1;
    }
    if (0 != strcmp(theirs, provider)) {
        *why = "the peer chose a different libfabric provider";
        return -1;
    }
    if (index < 0 || (uint32_t) index >= hdr->module_count) {
        *why = "the peer has fewer NICs";
        return -1;
    }
    p = (const unsigned char *) (hdr + 1);
    end = (const unsigned char *) blob + size;
    for (int i = 0;; ++i) {
        uint32_t n;
        if ((size_t) (end - p) < sizeof(n)) {
            *why = "endpoint data is truncated";
            return -1;
        }
        memcpy(&n, p, sizeof(n));
        p += sizeof(n);
        if (0 == n || (size_t) (end - p) < n) {
            *why = "endpoint name is truncated";
            return -1;
        }
        if (i == index) {
            *name = p;
            *len = n;
            return 0;
        }
        p += n;
    }
}

mca_btl_ofi_wake_route_t mca_btl_ofi_wake_route(uint32_t ip4, uint16_t port, bool same_node)
{
    if (0 == port) {
        return MCA_BTL_OFI_WAKE_NONE;
    }
    if (same_node) {
        return MCA_BTL_OFI_WAKE_LOOPBACK;
    }
    return 0 != ip4 ? MCA_BTL_OFI_WAKE_REMOTE : MCA_BTL_OFI_WAKE_NONE;
}

bool mca_btl_ofi_wake_due(mca_btl_ofi_stall_watch_t *watch, int64_t now, int64_t after_ns,
                          bool outstanding)
{
    if (!outstanding || after_ns <= 0) {
        watch->since = 0;
        return false;
    }
    if (0 == watch->since) {
        watch->since = now;
        watch->gap = after_ns;
        return false;
    }
    if (now - watch->since < watch->gap) {
        return false;
    }
    watch->since = now;
    if (watch->gap < after_ns * (MCA_BTL_OFI_WAKE_BACKOFF / 2)) {
        watch->gap *= 2;
    } else {
        watch->gap = after_ns * MCA_BTL_OFI_WAKE_BACKOFF;
    }
    return true;
}

void mca_btl_ofi_stall_wait_ended(mca_btl_ofi_stall_watch_t *watch, int64_t now, bool yields)
{
    if (0 != watch->woke_ns
        && (now - watch->woke_ns <= MCA_BTL_OFI_EAGER_ANSWER_NS || 1 == watch->woke_peers)) {
        watch->eager = yields ? MCA_BTL_OFI_EAGER_WAITS : 0;
    }
    watch->woke_ns = 0;
    watch->since = 0;
}

bool mca_btl_ofi_wake_at_once(mca_btl_ofi_stall_watch_t *watch)
{
    if (0 != watch->since || 0 == watch->eager) {
        return false;
    }
    --watch->eager;
    return true;
}

bool mca_btl_ofi_stall_read_due(mca_btl_ofi_stall_watch_t *watch)
{
    return ++watch->passes > watch->per_read;
}

void mca_btl_ofi_stall_clock_read(mca_btl_ofi_stall_watch_t *watch, int64_t now)
{
    int64_t per_pass;

    if (0 != watch->read_ns && now > watch->read_ns && watch->passes > 0) {
        per_pass = (now - watch->read_ns) / watch->passes;
        if (per_pass * MCA_BTL_OFI_STALL_READ_PASSES <= MCA_BTL_OFI_STALL_READ_NS) {
            watch->per_read = MCA_BTL_OFI_STALL_READ_PASSES;
        } else {
            watch->per_read = (uint32_t) (MCA_BTL_OFI_STALL_READ_NS / per_pass);
        }
    }
    watch->read_ns = now;
    watch->passes = 0;
}

int64_t mca_btl_ofi_wake_after_ns(int wake_us, int floor_us, int64_t bytes, int64_t ops)
{
    int64_t charged, after;

    if (wake_us <= 0) {
        return 0;
    }
    if (bytes < 0) {
        bytes = 0; /* counters read while another thread updates them */
    }
    charged = bytes;
    if (charged > MCA_BTL_OFI_WAKE_BYTES_CAP) {
        int64_t mean = ops > 1 ? bytes / ops : bytes;

        charged = mean > MCA_BTL_OFI_WAKE_BYTES_CAP ? mean : MCA_BTL_OFI_WAKE_BYTES_CAP;
    }
    after = (int64_t) wake_us * 1000 + charged * 1000 / MCA_BTL_OFI_WAKE_BYTES_PER_US;
    return after > (int64_t) floor_us * 1000 ? after : (int64_t) floor_us * 1000;
}

int mca_btl_ofi_look_after_us(const mca_btl_ofi_look_plan_t *plan)
{
    if (!plan->exposed) {
        if (plan->sending) {
            return plan->interval_us;
        }
        return (plan->own_sends || plan->quiet_ns < plan->linger_ns) ? plan->sleep_us : -1;
    }
    if (!plan->can_sleep || plan->sleep_us <= plan->interval_us) {
        return plan->interval_us;
    }
    if (plan->quiet_ns >= plan->linger_ns) {
        return plan->sleep_us;
    }
    if (plan->app_present && !plan->own_sends) {
        if (plan->contended) {
            return plan->sleep_us > MCA_BTL_OFI_CONTENDED_LOOK_US ? MCA_BTL_OFI_CONTENDED_LOOK_US
                                                                  : plan->sleep_us;
        }
        if (!plan->cpu_calm || plan->sleep_us > MCA_BTL_OFI_PRESENT_LOOK_US) {
            return plan->sleep_us;
        }
        return MCA_BTL_OFI_PRESENT_LOOK_US;
    }
    return plan->interval_us;
}

bool mca_btl_ofi_look_is_nudged(const mca_btl_ofi_look_plan_t *plan)
{
    if (plan->crowded) {
        return false;
    }
    return !plan->app_present || plan->contended || !plan->can_sleep;
}

int mca_btl_ofi_crowded_us(long us, long ranks_per_cpu, long crowded_floor_us)
{
    if (ranks_per_cpu > 1) {
        us *= ranks_per_cpu;
        if (us < crowded_floor_us) {
            us = crowded_floor_us;
        }
    }
    return (int) (us < 1000000 ? us : 1000000);
}

bool mca_btl_ofi_cpu_contended(int64_t waited_ns, int64_t wall_ns)
{
    return wall_ns > 0 && waited_ns > 0 && waited_ns * MCA_BTL_OFI_CONTENDED_SHARE > wall_ns;
}

size_t mca_btl_ofi_default_eager_limit(const char *provider, size_t max_send_size)
{
    /* measured here (docs/performance.md): 16-32 KiB messages on sockets
     * go twice as fast eagerly as through ob1's rendezvous (request, our
     * RDMA read, acknowledgement); on shm the rendezvous is faster (its
     * read is one cross-memory copy), and through tcp;ofi_rxm eager is
     * rxm's own rendezvous underneath, slower too */
    static const char *const whole_buffer[] = { "sockets" };
    size_t limit = 16 * 1024;

    for (size_t i = 0; i < sizeof(whole_buffer) / sizeof(whole_buffer[0]); ++i) {
        if (NULL != provider && 0 == strcmp(provider, whole_buffer[i])) {
            limit = max_send_size;
        }
    }
    return limit < max_send_size ? limit : max_send_size;
}

int mca_btl_ofi_sockets_buf_size(const char *provider, const char *user)
{
    long size;
    char *end;

    if (NULL == provider || 0 != strcmp(provider, "sockets")) {
        return 0;
    }
    if (NULL == user) {
        return MCA_BTL_OFI_SOCKETS_BUF_SZ;
    }
    /* the provider reads it as an integer too */
    size = strtol(user, &end, 10);
    return (end == user || size <= 0 || size > INT32_MAX) ? 0 : (int) size;
}

static bool same_ip_address(const struct sockaddr *a, const struct sockaddr *b, size_t len)
{
    if (a->sa_family != b->sa_family) {
        return false;
    }
    if (AF_INET == a->sa_family && len >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *x = (const struct sockaddr_in *) a;
        const struct sockaddr_in *y = (const struct sockaddr_in *) b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    if (AF_INET6 == a->sa_family && len >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *x = (const struct sockaddr_in6 *) a;
        const struct sockaddr_in6 *y = (const struct sockaddr_in6 *) b;
        return x->sin6_port == y->sin6_port
               && 0 == memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr));
    }
    return false;
}

int mca_btl_ofi_widen_sockets_to(const struct sockaddr *peer, size_t peer_len, int size)
{
    struct dirent *entry;
    int widened = 0;
    DIR *fds = opendir("/proc/self/fd");

    if (NULL == fds) {
        return -1;
    }
    while (NULL != (entry = readdir(fds))) {
        struct sockaddr_storage other;
        socklen_t len = sizeof(other);
        char *end;
        long fd = strtol(entry->d_name, &end, 10);

        /* getpeername fails on what is not a connected socket */
        if (end == entry->d_name || '\0' != *end || fd == dirfd(fds)
            || 0 != getpeername((int) fd, (struct sockaddr *) &other, &len)
            || !same_ip_address((struct sockaddr *) &other, peer, peer_len)) {
            continue;
        }
        if (0 == setsockopt((int) fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size))) {
            ++widened;
        }
    }
    closedir(fds);
    return widened;
}

int mca_btl_ofi_stripe_cut(size_t size, int rails, size_t stripe_min, size_t align, size_t *offsets,
                           size_t *lengths)
{
    size_t units, done = 0;
    int chunks;

    if (0 == align) {
        align = 1;
    }
    units = (size + align - 1) / align;
    chunks = (rails < 1) ? 1 : rails;
    if (0 == stripe_min || size < stripe_min || units < 2) {
        chunks = 1;
    } else if ((size_t) chunks > units) {
        chunks = (int) units;
    }
    for (int i = 0; i < chunks; ++i) {
        /* the first units % chunks chunks take one unit more */
        size_t share = units / (size_t) chunks + ((size_t) i < units % (size_t) chunks);
        size_t len = share * align;

        if (done + len > size) {
            len = size - done;
        }
        offsets[i] = done;
        lengths[i] = len;
        done += len;
    }
    return chunks;
}
