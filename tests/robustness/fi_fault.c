/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * fi_fault: an LD_PRELOAD shim that injects libfabric failures into
 * btl/ofi without special hardware.
 *
 * libfabric's data-path calls (fi_write, fi_send, fi_cq_read, ...) are
 * static inline wrappers that jump through ops tables, so they cannot be
 * interposed by symbol.  The one exported entry point on our path is
 * fi_fabric(): we interpose it, and for every object created from the
 * fabric it returns we copy the object's ops table, point the object at
 * the copy and replace the functions we care about.  Each copy lives in a
 * per-object record that also keeps the original table, so a wrapper finds
 * its originals from the ops pointer it was called through (container_of)
 * without any lookup.
 *
 * Wrapped: fabric->domain; domain->endpoint, scalable_ep, cq_open, av_open,
 * mr->reg/regattr; scalable endpoint ->tx_ctx/rx_ctx; endpoint rma (read,
 * write, inject...), atomic (write, readwrite, compwrite...), msg (send,
 * inject...); cq read/readerr; av insert; MR close (for tracing).
 *
 * Environment:
 *   BTL_OFI_FAULT=call:N:kind[,call:N:kind...]
 *       call: write read atomic fetch_atomic compare_atomic send cq_read
 *             av_insert mr_reg
 *       N   : "N"  fail the Nth call of that kind only
 *             "N+" fail every Nth call: N, 2N, 3N, ...
 *             "N*" fail every call from the Nth on
 *             "N-M" fail calls N to M (a burst: longer than any retry loop)
 *       kind: eagain | eio | cqerr (cq_read only: one real completion is
 *             taken from the CQ and reported through -FI_EAVAIL and
 *             readerr with err = FI_EIO), cqerr_rma / cqerr_send (the same,
 *             but only a completion whose flags say RMA/atomic or send);
 *             cqerr_send@LEN: only the completion of an fi_send of LEN
 *             bytes (the caller's header included), to pick one kind of
 *             message of the layer above
 *   BTL_OFI_FAULT_RANK=r[,r...] | all   ranks that inject (OMPI_COMM_WORLD_RANK);
 *                                       default all
 *   BTL_OFI_FAULT_TRACE=mr,av,ctx,mrlive (any of them)
 *       mr:     print every fi_mr_reg (buffer, length, access flags, key)
 *               and every close of a region
 *       av:     print every fi_av_insert
 *       ctx:    account every operation context (posted successfully +1,
 *               completed -1) and report a completion for a context that
 *               has nothing posted ("GHOST"), e.g. a call that returned
 *               -FI_EAGAIN but still completes later; a debugger can call
 *               fi_fault_dump_contexts() on a hung process
 *       mrlive: print the number of open regions whenever it reaches a new
 *               high (steps of 16): a cache that never lets go climbs
 *   BTL_OFI_FAULT_CALLER=substring      wrap only fabrics opened from a DSO
 *                                       whose path contains it (default
 *                                       "mca_btl_ofi"; "*" for any caller)
 *
 * Every injection prints "fi_fault[rank R]: inject KIND into CALL #N" on
 * stderr (the first 20 per call, then every 1000th); a summary line
 * "fi_fault[rank R]: summary ..." is printed at exit.
 */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define SHIM_EXPORT                     __attribute__((visibility("default")))
#define CONTAINER_OF(ptr, type, member) ((type *) ((char *) (ptr) -offsetof(type, member)))
#define MAX_RULES                       16
#define LOUD_INJECTIONS                 20

/* ------------------------------------------------------------------ */
/* Configuration                                                       */

typedef enum {
    CALL_WRITE,
    CALL_READ,
    CALL_ATOMIC,
    CALL_FETCH_ATOMIC,
    CALL_COMPARE_ATOMIC,
    CALL_SEND,
    CALL_CQ_READ,
    CALL_AV_INSERT,
    CALL_MR_REG,
    CALL_MAX,
} call_t;

static const char *const call_names[CALL_MAX] = {
    "write", "read",    "atomic",    "fetch_atomic", "compare_atomic",
    "send",  "cq_read", "av_insert", "mr_reg",
};

typedef enum { FAULT_EAGAIN, FAULT_EIO, FAULT_CQERR, FAULT_CQERR_RMA, FAULT_CQERR_SEND } fault_t;

typedef enum { WHEN_ONCE, WHEN_EVERY_NTH, WHEN_FROM, WHEN_RANGE } when_t;

typedef struct {
    call_t call;
    uint64_t n;
    uint64_t last; /**< end of a WHEN_RANGE burst */
    when_t when;
    fault_t fault;
    size_t send_len; /**< cqerr_send@LEN: only sends of this length; 0: any */
} rule_t;

static rule_t rules[MAX_RULES];
static int num_rules;
static bool injecting; /* this rank injects */
static bool trace_mr, trace_av, trace_ctx, trace_mrlive;
static const char *caller_filter = "mca_btl_ofi";
static int my_rank = -1;

static uint64_t calls[CALL_MAX];    /* calls seen per kind */
static uint64_t injected[CALL_MAX]; /* faults injected per kind */
static uint64_t cqerr_armed;        /* cqerr faults waiting for a completion */
static fault_t cqerr_armed_kind;
static size_t cqerr_armed_len; /* send length the armed fault waits for; 0: any */
static bool track_send_len;    /* a rule selects sends by length */
static uint64_t mr_regs, mr_closes, wrapped_fabrics, ghosts;

static int (*real_fi_fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
static __thread int in_real_fabric; /* nested fi_fabric calls (rxm's core) pass through */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char line[512];
    int len = snprintf(line, sizeof(line), "fi_fault[rank %d pid %d]: ", my_rank, (int) getpid());
    va_list ap;

    va_start(ap, fmt);
    len += vsnprintf(line + len, sizeof(line) - (size_t) len - 1, fmt, ap);
    va_end(ap);
    if (len > (int) sizeof(line) - 2) {
        len = (int) sizeof(line) - 2;
    }
    line[len++] = '\n';
    /* one write per line so lines of several threads do not interleave */
    (void) !write(2, line, (size_t) len);
}

static bool parse_call(const char *s, size_t len, call_t *out)
{
    for (int i = 0; i < CALL_MAX; ++i) {
        if (strlen(call_names[i]) == len && 0 == strncmp(s, call_names[i], len)) {
            *out = (call_t) i;
            return true;
        }
    }
    return false;
}

static bool parse_rule(char *text, rule_t *rule)
{
    char *first = strchr(text, ':'), *second, *end;

    if (NULL == first || NULL == (second = strchr(first + 1, ':'))) {
        return false;
    }
    if (!parse_call(text, (size_t) (first - text), &rule->call)) {
        return false;
    }
    rule->n = strtoull(first + 1, &end, 10);
    if (end == first + 1 || 0 == rule->n) {
        return false;
    }
    rule->when = WHEN_ONCE;
    if ('+' == *end) {
        rule->when = WHEN_EVERY_NTH;
        ++end;
    } else if ('*' == *end) {
        rule->when = WHEN_FROM;
        ++end;
    } else if ('-' == *end) {
        char *start = end + 1;
        rule->when = WHEN_RANGE;
        rule->last = strtoull(start, &end, 10);
        if (end == start || rule->last < rule->n) {
            return false;
        }
    }
    if (end != second) {
        return false;
    }
    ++second;
    if (0 == strcmp(second, "eagain")) {
        rule->fault = FAULT_EAGAIN;
    } else if (0 == strcmp(second, "eio")) {
        rule->fault = FAULT_EIO;
    } else if (0 == strcmp(second, "cqerr")) {
        rule->fault = FAULT_CQERR;
    } else if (0 == strcmp(second, "cqerr_rma")) {
        rule->fault = FAULT_CQERR_RMA;
    } else if (0 == strcmp(second, "cqerr_send")) {
        rule->fault = FAULT_CQERR_SEND;
    } else if (0 == strncmp(second, "cqerr_send@", 11)) {
        rule->fault = FAULT_CQERR_SEND;
        rule->send_len = strtoull(second + 11, &end, 10);
        if (end == second + 11 || '\0' != *end || 0 == rule->send_len) {
            return false;
        }
        track_send_len = true;
    } else {
        return false;
    }
    return rule->fault < FAULT_CQERR || CALL_CQ_READ == rule->call;
}

static bool rank_listed(const char *list)
{
    char *copy = strdup(list), *save = NULL;
    bool found = false;

    for (char *tok = strtok_r(copy, ",", &save); NULL != tok; tok = strtok_r(NULL, ",", &save)) {
        if (0 == strcmp(tok, "all") || (my_rank >= 0 && atoi(tok) == my_rank)) {
            found = true;
        }
    }
    free(copy);
    return found;
}

__attribute__((constructor)) static void shim_init(void)
{
    const char *spec = getenv("BTL_OFI_FAULT");
    const char *ranks = getenv("BTL_OFI_FAULT_RANK");
    const char *trace = getenv("BTL_OFI_FAULT_TRACE");
    const char *caller = getenv("BTL_OFI_FAULT_CALLER");
    const char *rank_env = getenv("OMPI_COMM_WORLD_RANK");

    my_rank = (NULL != rank_env) ? atoi(rank_env) : -1;
    real_fi_fabric = dlvsym(RTLD_NEXT, "fi_fabric", "FABRIC_1.1");
    if (NULL == real_fi_fabric) {
        real_fi_fabric = dlsym(RTLD_NEXT, "fi_fabric");
    }
    if (NULL != caller && '\0' != caller[0]) {
        caller_filter = caller;
    }
    if (NULL != trace) {
        char *copy = strdup(trace), *save = NULL;
        for (char *tok = strtok_r(copy, ",", &save); NULL != tok;
             tok = strtok_r(NULL, ",", &save)) {
            trace_mr |= 0 == strcmp(tok, "mr");
            trace_av |= 0 == strcmp(tok, "av");
            trace_ctx |= 0 == strcmp(tok, "ctx");
            trace_mrlive |= 0 == strcmp(tok, "mrlive");
        }
        free(copy);
    }
    if (NULL != spec && '\0' != spec[0]) {
        char *copy = strdup(spec), *save = NULL;
        for (char *tok = strtok_r(copy, ",", &save); NULL != tok;
             tok = strtok_r(NULL, ",", &save)) {
            if (num_rules == MAX_RULES || !parse_rule(tok, &rules[num_rules])) {
                say("bad BTL_OFI_FAULT entry '%s' (call:N[+|*|-M]:eagain|eio|cqerr...): ignored",
                    tok);
                continue;
            }
            ++num_rules;
        }
        free(copy);
    }
    injecting = num_rules > 0 && (NULL == ranks || '\0' == ranks[0] || rank_listed(ranks));
}

__attribute__((destructor)) static void shim_fini(void)
{
    char buf[400];
    int len = 0;

    if (0 == wrapped_fabrics
        || (!injecting && !trace_mr && !trace_av && !trace_ctx && !trace_mrlive)) {
        return;
    }
    for (int i = 0; i < CALL_MAX; ++i) {
        if (calls[i] > 0) {
            len += snprintf(buf + len, sizeof(buf) - (size_t) len, " %s=%" PRIu64 "/%" PRIu64,
                            call_names[i], injected[i], calls[i]);
            if (len >= (int) sizeof(buf)) {
                len = (int) sizeof(buf) - 1;
                break;
            }
        }
    }
    buf[len] = '\0';
    say("summary injected/calls:%s regions_opened=%" PRIu64 " regions_closed=%" PRIu64
        " ghost_completions=%" PRIu64,
        buf, mr_regs, mr_closes, ghosts);
}

/* ------------------------------------------------------------------ */
/* Deciding                                                            */

static bool rule_matches(const rule_t *rule, uint64_t n)
{
    switch (rule->when) {
    case WHEN_ONCE:
        return n == rule->n;
    case WHEN_EVERY_NTH:
        return 0 == n % rule->n;
    case WHEN_FROM:
        return n >= rule->n;
    case WHEN_RANGE:
        return n >= rule->n && n <= rule->last;
    }
    return false;
}

static void note_injection(call_t call, uint64_t n, const char *what)
{
    uint64_t k = __atomic_add_fetch(&injected[call], 1, __ATOMIC_RELAXED);
    if (k <= LOUD_INJECTIONS || 0 == k % 1000) {
        say("inject %s into %s call #%" PRIu64 " (injection %" PRIu64 ")", what, call_names[call],
            n, k);
    }
}

/**
 * Count a call; return 0 to let it through, or the negative libfabric
 * error to return instead.  cqerr rules only arm (see w_cq_read).
 */
static ssize_t decide(call_t call)
{
    uint64_t n = __atomic_add_fetch(&calls[call], 1, __ATOMIC_RELAXED);

    if (!injecting) {
        return 0;
    }
    for (int i = 0; i < num_rules; ++i) {
        const rule_t *rule = rules + i;
        if (rule->call != call || !rule_matches(rule, n)) {
            continue;
        }
        switch (rule->fault) {
        case FAULT_EAGAIN:
            note_injection(call, n, "eagain");
            return -FI_EAGAIN;
        case FAULT_EIO:
            note_injection(call, n, "eio");
            return -FI_EIO;
        default:
            cqerr_armed_kind = rule->fault;
            cqerr_armed_len = rule->send_len;
            __atomic_add_fetch(&cqerr_armed, 1, __ATOMIC_RELAXED);
            return 0;
        }
    }
    return 0;
}

static const char *access_string(uint64_t access, char *buf, size_t len)
{
    static const struct {
        uint64_t bit;
        const char *name;
    } bits[] = {
        { FI_SEND, "SEND" },
        { FI_RECV, "RECV" },
        { FI_READ, "READ" },
        { FI_WRITE, "WRITE" },
        { FI_REMOTE_READ, "REMOTE_READ" },
        { FI_REMOTE_WRITE, "REMOTE_WRITE" },
    };
    size_t used = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); ++i) {
        if ((access & bits[i].bit) && used < len) {
            used +=
                (size_t) snprintf(buf + used, len - used, "%s%s", used ? "|" : "", bits[i].name);
        }
    }
    return buf;
}

/* Copy an ops table of which the provider may have allocated less than
 * our header's size; a function past its end is never replaced. */
static void copy_ops(void *dst, const void *src, size_t ours)
{
    size_t theirs = *(const size_t *) src;
    memset(dst, 0, ours);
    memcpy(dst, src, theirs < ours ? theirs : ours);
}

#define OPS_HAS(ops, field)                                                                        \
    ((ops)->size >= offsetof(__typeof__(*(ops)), field) + sizeof((ops)->field))

/* ------------------------------------------------------------------ */
/* Context accounting (BTL_OFI_FAULT_TRACE=ctx)                        */

#define CTX_SLOTS (1u << 16)

typedef struct {
    void *context;
    int64_t posted; /**< successful posts minus completions */
} ctx_slot_t;

static ctx_slot_t ctx_table[CTX_SLOTS];
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;

static ctx_slot_t *ctx_slot(void *context)
{
    uint64_t h = ((uint64_t) (uintptr_t) context >> 4) * 0x9E3779B97F4A7C15ull;
    for (uint32_t i = 0; i < CTX_SLOTS; ++i) {
        ctx_slot_t *slot = ctx_table + ((h >> 40) + i) % CTX_SLOTS;
        if (slot->context == context || NULL == slot->context) {
            slot->context = context;
            return slot;
        }
    }
    return NULL;
}

static void ctx_posted(void *context, ssize_t rc)
{
    if (!trace_ctx || 0 != rc || NULL == context) {
        return;
    }
    pthread_mutex_lock(&ctx_lock);
    ctx_slot_t *slot = ctx_slot(context);
    if (NULL != slot) {
        ++slot->posted;
    }
    pthread_mutex_unlock(&ctx_lock);
}

static void ctx_completed(void *context, const char *how)
{
    int64_t left = 0;

    if (!trace_ctx || NULL == context) {
        return;
    }
    pthread_mutex_lock(&ctx_lock);
    ctx_slot_t *slot = ctx_slot(context);
    if (NULL != slot) {
        left = --slot->posted;
    }
    pthread_mutex_unlock(&ctx_lock);
    if (left < 0) {
        uint64_t k = __atomic_add_fetch(&ghosts, 1, __ATOMIC_RELAXED);
        if (k <= LOUD_INJECTIONS) {
            say("GHOST %s completion for context %p: nothing posted with it", how, context);
        }
        pthread_mutex_lock(&ctx_lock);
        slot->posted = 0;
        pthread_mutex_unlock(&ctx_lock);
    }
}

/* Length of the last send posted with each operation context, for
 * cqerr_send@LEN (our fragments, and so their contexts, are reused). */
typedef struct {
    void *context;
    size_t len;
} send_len_slot_t;

static send_len_slot_t send_len_table[CTX_SLOTS];
static pthread_mutex_t send_len_lock = PTHREAD_MUTEX_INITIALIZER;

/* The context's slot; a free one is taken only when @p insert. */
static send_len_slot_t *send_len_slot(void *context, bool insert)
{
    uint64_t h = ((uint64_t) (uintptr_t) context >> 4) * 0x9E3779B97F4A7C15ull;
    for (uint32_t i = 0; i < CTX_SLOTS; ++i) {
        send_len_slot_t *slot = send_len_table + ((h >> 40) + i) % CTX_SLOTS;
        if (slot->context == context) {
            return slot;
        }
        if (NULL == slot->context) {
            if (!insert) {
                return NULL;
            }
            slot->context = context;
            return slot;
        }
    }
    return NULL;
}

static void send_posted(void *context, size_t len, ssize_t rc)
{
    if (!track_send_len || 0 != rc || NULL == context) {
        return;
    }
    pthread_mutex_lock(&send_len_lock);
    send_len_slot_t *slot = send_len_slot(context, true);
    if (NULL != slot) {
        slot->len = len;
    }
    pthread_mutex_unlock(&send_len_lock);
}

static size_t send_len_of(void *context)
{
    size_t len = 0;

    pthread_mutex_lock(&send_len_lock);
    send_len_slot_t *slot = send_len_slot(context, false);
    if (NULL != slot) {
        len = slot->len;
    }
    pthread_mutex_unlock(&send_len_lock);
    return len;
}

/** For a debugger on a hung process ("call fi_fault_dump_contexts()"):
 * how many operation contexts were posted and have not completed. */
SHIM_EXPORT void fi_fault_dump_contexts(void)
{
    uint64_t pending = 0, contexts = 0;

    pthread_mutex_lock(&ctx_lock);
    for (uint32_t i = 0; i < CTX_SLOTS; ++i) {
        if (NULL != ctx_table[i].context && ctx_table[i].posted > 0) {
            ++contexts;
            pending += (uint64_t) ctx_table[i].posted;
        }
    }
    pthread_mutex_unlock(&ctx_lock);
    say("contexts posted and not completed: %" PRIu64 " (%" PRIu64 " operations); ghosts %" PRIu64,
        contexts, pending, ghosts);
}

/* ------------------------------------------------------------------ */
/* Endpoints                                                           */

typedef struct {
    struct fi_ops fid_ops;
    struct fi_ops *orig_fid_ops;
    struct fi_ops_ep ep_ops;
    struct fi_ops_ep *orig_ep_ops;
    struct fi_ops_rma rma;
    struct fi_ops_rma *orig_rma;
    struct fi_ops_atomic atomic;
    struct fi_ops_atomic *orig_atomic;
    struct fi_ops_msg msg;
    struct fi_ops_msg *orig_msg;
    struct fid_ep *ep;
} ep_wrap_t;

#define EP_RMA(ep)    (CONTAINER_OF((ep)->rma, ep_wrap_t, rma)->orig_rma)
#define EP_ATOMIC(ep) (CONTAINER_OF((ep)->atomic, ep_wrap_t, atomic)->orig_atomic)
#define EP_MSG(ep)    (CONTAINER_OF((ep)->msg, ep_wrap_t, msg)->orig_msg)

#define GATE(call)                                                                                 \
    do {                                                                                           \
        ssize_t injected_rc = decide(call);                                                        \
        if (0 != injected_rc) {                                                                    \
            return injected_rc;                                                                    \
        }                                                                                          \
    } while (0)

static ssize_t w_rma_read(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
                          uint64_t addr, uint64_t key, void *context)
{
    GATE(CALL_READ);
    ssize_t rc = EP_RMA(ep)->read(ep, buf, len, desc, src, addr, key, context);
    ctx_posted(context, rc);
    return rc;
}

static ssize_t w_rma_readv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
                           fi_addr_t src, uint64_t addr, uint64_t key, void *context)
{
    GATE(CALL_READ);
    ssize_t rc = EP_RMA(ep)->readv(ep, iov, desc, count, src, addr, key, context);
    ctx_posted(context, rc);
    return rc;
}

static ssize_t w_rma_readmsg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags)
{
    GATE(CALL_READ);
    ssize_t rc = EP_RMA(ep)->readmsg(ep, msg, flags);
    ctx_posted(msg->context, rc);
    return rc;
}

static ssize_t w_rma_write(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                           fi_addr_t dest, uint64_t addr, uint64_t key, void *context)
{
    GATE(CALL_WRITE);
    ssize_t rc = EP_RMA(ep)->write(ep, buf, len, desc, dest, addr, key, context);
    ctx_posted(context, rc);
    return rc;
}

static ssize_t w_rma_writev(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
                            fi_addr_t dest, uint64_t addr, uint64_t key, void *context)
{
    GATE(CALL_WRITE);
    ssize_t rc = EP_RMA(ep)->writev(ep, iov, desc, count, dest, addr, key, context);
    ctx_posted(context, rc);
    return rc;
}

static ssize_t w_rma_writemsg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags)
{
    GATE(CALL_WRITE);
    ssize_t rc = EP_RMA(ep)->writemsg(ep, msg, flags);
    ctx_posted(msg->context, rc);
    return rc;
}

static ssize_t w_rma_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest,
                            uint64_t addr, uint64_t key)
{
    GATE(CALL_WRITE);
    return EP_RMA(ep)->inject(ep, buf, len, dest, addr, key);
}

static ssize_t w_rma_writedata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                               uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key,
                               void *context)
{
    GATE(CALL_WRITE);
    ssize_t rc = EP_RMA(ep)->writedata(ep, buf, len, desc, data, dest, addr, key, context);
    ctx_posted(context, rc);
    return rc;
}

static ssize_t w_rma_injectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
                                fi_addr_t dest, uint64_t addr, uint64_t key)
{
    GATE(CALL_WRITE);
    return EP_RMA(ep)->injectdata(ep, buf, len, data, dest, addr, key);
}

static ssize_t w_atomic_write(struct fid_ep *ep, const void *buf, size_t count, void *desc,
                              fi_addr_t dest, uint64_t addr, uint64_t key, enum fi_datatype dt,
                              enum fi_op op, void *context)
{
    GATE(CALL_ATOMIC);
    ssize_t rc = EP_ATOMIC(ep)->write(ep, buf, count, desc, dest, addr, key, dt, op, context);
    ctx_posted(context, rc);
    return rc;
}

static ssize_t w_atomic_writev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
                               size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
                               enum fi_datatype dt, enum fi_op op, void *context)
{
    GATE(CALL_ATOMIC);
    ssize_t rc = EP_ATOMIC(ep)->writev(ep, iov, desc, count, dest, addr, key, dt, op, context);
    ctx_posted(context, rc);
    return rc;
}

static ssize_t w_atomic_writemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg, uint64_t flags)
{
    GATE(CALL_ATOMIC);
    ssize_t rc = EP_ATOMIC(ep)->writemsg(ep, msg, flags);
    ctx_posted(msg->context, rc);
    return rc;
}

static ssize_t w_atomic_inject(struct fid_ep *ep, const void *buf, size_t count, fi_addr_t dest,
                               uint64_t addr, uint64_t key, enum fi_datatype dt, enum fi_op op)
{
    GATE(CALL_ATOMIC);
    return EP_ATOMIC(ep)->inject(ep, buf, count, dest, addr, key, dt, op);
}

static ssize_t w_atomic_readwrite(struct fid_ep *ep, const void *buf, size_t count, void *desc,
                                  void *result, void *result_desc, fi_addr_t dest, uint64_t addr,
                                  uint64_t key, enum fi_datatype dt, enum fi_op op, void *context)
{
    GATE(CALL_FETCH_ATOMIC);
    ssize_t rc = EP_ATOMIC(ep)->readwrite(ep, buf, count, desc, result, result_desc, dest, addr,
                                          key, dt, op, context);
    ctx_posted(context, rc);
    return rc;
}

static ssize_t w_atomic_readwritev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
                                   size_t count, struct fi_ioc *resultv, void **result_desc,
                                   size_t result_count, fi_addr_t dest, uint64_t addr, uint64_t key,
                                   enum fi_datatype dt, enum fi_op op, void *context)
{
    GATE(CALL_FETCH_ATOMIC);
    ssize_t rc = EP_ATOMIC(ep)->readwritev(ep, iov, desc, count, resultv, result_desc, result_count,
                                           dest, addr, key, dt, op, context);
    ctx_posted(context, rc);
    return rc;
}

static ssize_t w_atomic_readwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                                     struct fi_ioc *resultv, void **result_desc,
                                     size_t result_count, uint64_t flags)
{
    GATE(CALL_FETCH_ATOMIC);
    ssize_t rc = EP_ATOMIC(ep)->readwritemsg(ep, msg, resultv, result_desc, result_count, flags);
    ctx_posted(msg->context, rc);
    return rc;
}

static ssize_t w_atomic_compwrite(struct fid_ep *ep, const void *buf, size_t count, void *desc,
                                  const void *compare, void *compare_desc, void *result,
                                  void *result_desc, fi_addr_t dest, uint64_t addr, uint64_t key,
                                  enum fi_datatype dt, enum fi_op op, void *context)
{
    GATE(CALL_COMPARE_ATOMIC);
    ssize_t rc = EP_ATOMIC(ep)->compwrite(ep, buf, count, desc, compare, compare_desc, result,
                                          result_desc, dest, addr, key, dt, op, context);
    ctx_posted(context, rc);
    return rc;
}

static ssize_t w_atomic_compwritev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
                                   size_t count, const struct fi_ioc *comparev, void **compare_desc,
                                   size_t compare_count, struct fi_ioc *resultv, void **result_desc,
                                   size_t result_count, fi_addr_t dest, uint64_t addr, uint64_t key,
                                   enum fi_datatype dt, enum fi_op op, void *context)
{
    GATE(CALL_COMPARE_ATOMIC);
    ssize_t rc = EP_ATOMIC(ep)->compwritev(ep, iov, desc, count, comparev, compare_desc,
                                           compare_count, resultv, result_desc, result_count, dest,
                                           addr, key, dt, op, context);
    ctx_posted(context, rc);
    return rc;
}

static ssize_t w_atomic_compwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                                     const struct fi_ioc *comparev, void **compare_desc,
                                     size_t compare_count, struct fi_ioc *resultv,
                                     void **result_desc, size_t result_count, uint64_t flags)
{
    GATE(CALL_COMPARE_ATOMIC);
    ssize_t rc = EP_ATOMIC(ep)->compwritemsg(ep, msg, comparev, compare_desc, compare_count,
                                             resultv, result_desc, result_count, flags);
    ctx_posted(msg->context, rc);
    return rc;
}

static ssize_t w_msg_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
                          void *context)
{
    ssize_t rc = EP_MSG(ep)->recv(ep, buf, len, desc, src, context);
    ctx_posted(context, rc);
    return rc;
}

static ssize_t w_msg_recvv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
                           fi_addr_t src, void *context)
{
    ssize_t rc = EP_MSG(ep)->recvv(ep, iov, desc, count, src, context);
    ctx_posted(context, rc);
    return rc;
}

static ssize_t w_msg_recvmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
    ssize_t rc = EP_MSG(ep)->recvmsg(ep, msg, flags);
    ctx_posted(msg->context, rc);
    return rc;
}

static ssize_t w_msg_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                          fi_addr_t dest, void *context)
{
    GATE(CALL_SEND);
    ssize_t rc = EP_MSG(ep)->send(ep, buf, len, desc, dest, context);
    ctx_posted(context, rc);
    send_posted(context, len, rc);
    return rc;
}

static size_t total_len(const struct iovec *iov, size_t count)
{
    size_t len = 0;

    for (size_t i = 0; i < count; ++i) {
        len += iov[i].iov_len;
    }
    return len;
}

static ssize_t w_msg_sendv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
                           fi_addr_t dest, void *context)
{
    GATE(CALL_SEND);
    ssize_t rc = EP_MSG(ep)->sendv(ep, iov, desc, count, dest, context);
    ctx_posted(context, rc);
    send_posted(context, total_len(iov, count), rc);
    return rc;
}

static ssize_t w_msg_sendmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
    GATE(CALL_SEND);
    ssize_t rc = EP_MSG(ep)->sendmsg(ep, msg, flags);
    ctx_posted(msg->context, rc);
    send_posted(msg->context, total_len(msg->msg_iov, msg->iov_count), rc);
    return rc;
}

static ssize_t w_msg_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest)
{
    GATE(CALL_SEND);
    return EP_MSG(ep)->inject(ep, buf, len, dest);
}

static ssize_t w_msg_senddata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                              uint64_t data, fi_addr_t dest, void *context)
{
    GATE(CALL_SEND);
    ssize_t rc = EP_MSG(ep)->senddata(ep, buf, len, desc, data, dest, context);
    ctx_posted(context, rc);
    return rc;
}

static ssize_t w_msg_injectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
                                fi_addr_t dest)
{
    GATE(CALL_SEND);
    return EP_MSG(ep)->injectdata(ep, buf, len, data, dest);
}

static void wrap_endpoint(struct fid_ep *ep);

/* Providers may swap an endpoint's ops tables when it is enabled or bound
 * (rxm picks thread-safe or unsafe tables at FI_ENABLE): wrap again after
 * every control and bind. */
static int w_ep_control(struct fid *fid, int command, void *arg)
{
    ep_wrap_t *w = CONTAINER_OF(fid->ops, ep_wrap_t, fid_ops);
    int rc = w->orig_fid_ops->control(fid, command, arg);
    wrap_endpoint(w->ep);
    return rc;
}

static int w_ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
    ep_wrap_t *w = CONTAINER_OF(fid->ops, ep_wrap_t, fid_ops);
    int rc = w->orig_fid_ops->bind(fid, bfid, flags);
    wrap_endpoint(w->ep);
    return rc;
}

static int w_ep_close(struct fid *fid)
{
    ep_wrap_t *w = CONTAINER_OF(fid->ops, ep_wrap_t, fid_ops);
    struct fi_ops *orig = w->orig_fid_ops;

    /* the provider's close may read the tables it installed */
    w->ep->ops = w->orig_ep_ops;
    if (NULL != w->orig_rma) {
        w->ep->rma = w->orig_rma;
    }
    if (NULL != w->orig_atomic) {
        w->ep->atomic = w->orig_atomic;
    }
    if (NULL != w->orig_msg) {
        w->ep->msg = w->orig_msg;
    }
    fid->ops = orig;
    /* the record is leaked on purpose: a racing data-path call could still
     * be reading it */
    return orig->close(fid);
}

static int w_sep_tx_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr,
                        struct fid_ep **tx_ep, void *context)
{
    ep_wrap_t *w = CONTAINER_OF(sep->ops, ep_wrap_t, ep_ops);
    int rc = w->orig_ep_ops->tx_ctx(sep, index, attr, tx_ep, context);
    if (0 == rc) {
        wrap_endpoint(*tx_ep);
    }
    return rc;
}

static int w_sep_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr,
                        struct fid_ep **rx_ep, void *context)
{
    ep_wrap_t *w = CONTAINER_OF(sep->ops, ep_wrap_t, ep_ops);
    int rc = w->orig_ep_ops->rx_ctx(sep, index, attr, rx_ep, context);
    if (0 == rc) {
        wrap_endpoint(*rx_ep);
    }
    return rc;
}

#define SET_IF(tbl, field, fn)                                                                     \
    do {                                                                                           \
        if (OPS_HAS(tbl, field) && NULL != (tbl)->field) {                                         \
            (tbl)->field = fn;                                                                     \
        }                                                                                          \
    } while (0)

static ep_wrap_t *ep_record(struct fid_ep *ep)
{
    ep_wrap_t *w;

    if (NULL != ep->fid.ops && ep->fid.ops->close == w_ep_close) {
        return CONTAINER_OF(ep->fid.ops, ep_wrap_t, fid_ops);
    }
    w = calloc(1, sizeof(*w));
    if (NULL == w) {
        return NULL;
    }
    w->ep = ep;
    w->orig_fid_ops = ep->fid.ops;
    copy_ops(&w->fid_ops, ep->fid.ops, sizeof(w->fid_ops));
    SET_IF(&w->fid_ops, control, w_ep_control);
    SET_IF(&w->fid_ops, bind, w_ep_bind);
    w->fid_ops.close = w_ep_close;
    ep->fid.ops = &w->fid_ops;
    return w;
}

/** Wrap (or re-wrap after the provider swapped them) an endpoint's tables. */
static void wrap_endpoint(struct fid_ep *ep)
{
    ep_wrap_t *w = ep_record(ep);

    if (NULL == w) {
        return;
    }
    if (NULL != ep->ops && ep->ops != &w->ep_ops) {
        w->orig_ep_ops = ep->ops;
        copy_ops(&w->ep_ops, ep->ops, sizeof(w->ep_ops));
        SET_IF(&w->ep_ops, tx_ctx, w_sep_tx_ctx);
        SET_IF(&w->ep_ops, rx_ctx, w_sep_rx_ctx);
        ep->ops = &w->ep_ops;
    }
    if (NULL != ep->rma && ep->rma != &w->rma) {
        struct fi_ops_rma *t = &w->rma;
        w->orig_rma = ep->rma;
        copy_ops(t, ep->rma, sizeof(*t));
        SET_IF(t, read, w_rma_read);
        SET_IF(t, readv, w_rma_readv);
        SET_IF(t, readmsg, w_rma_readmsg);
        SET_IF(t, write, w_rma_write);
        SET_IF(t, writev, w_rma_writev);
        SET_IF(t, writemsg, w_rma_writemsg);
        SET_IF(t, inject, w_rma_inject);
        SET_IF(t, writedata, w_rma_writedata);
        SET_IF(t, injectdata, w_rma_injectdata);
        ep->rma = t;
    }
    if (NULL != ep->atomic && ep->atomic != &w->atomic) {
        struct fi_ops_atomic *t = &w->atomic;
        w->orig_atomic = ep->atomic;
        copy_ops(t, ep->atomic, sizeof(*t));
        SET_IF(t, write, w_atomic_write);
        SET_IF(t, writev, w_atomic_writev);
        SET_IF(t, writemsg, w_atomic_writemsg);
        SET_IF(t, inject, w_atomic_inject);
        SET_IF(t, readwrite, w_atomic_readwrite);
        SET_IF(t, readwritev, w_atomic_readwritev);
        SET_IF(t, readwritemsg, w_atomic_readwritemsg);
        SET_IF(t, compwrite, w_atomic_compwrite);
        SET_IF(t, compwritev, w_atomic_compwritev);
        SET_IF(t, compwritemsg, w_atomic_compwritemsg);
        ep->atomic = t;
    }
    if (NULL != ep->msg && ep->msg != &w->msg) {
        struct fi_ops_msg *t = &w->msg;
        w->orig_msg = ep->msg;
        copy_ops(t, ep->msg, sizeof(*t));
        SET_IF(t, recv, w_msg_recv);
        SET_IF(t, recvv, w_msg_recvv);
        SET_IF(t, recvmsg, w_msg_recvmsg);
        SET_IF(t, send, w_msg_send);
        SET_IF(t, sendv, w_msg_sendv);
        SET_IF(t, sendmsg, w_msg_sendmsg);
        SET_IF(t, inject, w_msg_inject);
        SET_IF(t, senddata, w_msg_senddata);
        SET_IF(t, injectdata, w_msg_injectdata);
        ep->msg = t;
    }
}

/* ------------------------------------------------------------------ */
/* Completion queues                                                   */

typedef struct {
    struct fi_ops_cq ops;
    struct fi_ops_cq *orig;
    pthread_mutex_t lock;
    size_t entry_size;                /**< bytes of one entry in the CQ's format */
    bool pending;                     /**< an injected error waits for readerr */
    struct fi_cq_tagged_entry stolen; /**< the completion turned into an error */
} cq_wrap_t;

static size_t entry_size_for(enum fi_cq_format format)
{
    switch (format) {
    case FI_CQ_FORMAT_MSG:
        return sizeof(struct fi_cq_msg_entry);
    case FI_CQ_FORMAT_DATA:
        return sizeof(struct fi_cq_data_entry);
    case FI_CQ_FORMAT_TAGGED:
        return sizeof(struct fi_cq_tagged_entry);
    default:
        return sizeof(struct fi_cq_entry);
    }
}

static bool entry_wanted(const struct fi_cq_tagged_entry *e, size_t size, fault_t kind)
{
    uint64_t flags = (size >= sizeof(struct fi_cq_msg_entry)) ? e->flags : 0;

    if (FAULT_CQERR_SEND == kind && 0 != cqerr_armed_len
        && send_len_of(e->op_context) != cqerr_armed_len) {
        return false;
    }
    if (0 == flags || FAULT_CQERR == kind) {
        return true;
    }
    if (FAULT_CQERR_RMA == kind) {
        return 0 != (flags & (FI_RMA | FI_ATOMIC));
    }
    return 0 != (flags & FI_SEND);
}

static void account_entries(const cq_wrap_t *w, const void *buf, ssize_t n)
{
    for (ssize_t i = 0; trace_ctx && i < n; ++i) {
        void *context;
        memcpy(&context, (const char *) buf + (size_t) i * w->entry_size, sizeof(context));
        ctx_completed(context, "cq");
    }
}

static ssize_t w_cq_read(struct fid_cq *cq, void *buf, size_t count)
{
    cq_wrap_t *w = CONTAINER_OF(cq->ops, cq_wrap_t, ops);
    struct fi_cq_tagged_entry one;
    ssize_t rc = decide(CALL_CQ_READ);
    uint64_t armed;

    if (0 != rc) {
        return rc;
    }
    if (w->pending) {
        return -FI_EAVAIL;
    }
    armed = __atomic_load_n(&cqerr_armed, __ATOMIC_RELAXED);
    if (0 == armed) {
        rc = w->orig->read(cq, buf, count);
        account_entries(w, buf, rc);
        return rc;
    }
    /* turn the next matching completion into an error; others pass */
    pthread_mutex_lock(&w->lock);
    memset(&one, 0, sizeof(one));
    rc = w->orig->read(cq, &one, 1);
    if (1 == rc && entry_wanted(&one, w->entry_size, cqerr_armed_kind)
        && __atomic_compare_exchange_n(&cqerr_armed, &armed, armed - 1, false, __ATOMIC_RELAXED,
                                       __ATOMIC_RELAXED)) {
        w->stolen = one;
        w->pending = true;
        pthread_mutex_unlock(&w->lock);
        note_injection(CALL_CQ_READ, calls[CALL_CQ_READ], "cqerr (FI_EIO completion)");
        return -FI_EAVAIL;
    }
    pthread_mutex_unlock(&w->lock);
    if (1 == rc) {
        memcpy(buf, &one, w->entry_size);
        account_entries(w, buf, rc);
    }
    return rc;
}

static ssize_t w_cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *err, uint64_t flags)
{
    cq_wrap_t *w = CONTAINER_OF(cq->ops, cq_wrap_t, ops);

    pthread_mutex_lock(&w->lock);
    if (w->pending) {
        w->pending = false;
        err->op_context = w->stolen.op_context;
        err->flags = w->stolen.flags;
        err->len = 0;
        err->buf = w->stolen.buf;
        err->data = w->stolen.data;
        err->tag = w->stolen.tag;
        err->olen = 0;
        err->err = FI_EIO;
        err->prov_errno = FI_EIO;
        err->err_data = NULL;
        err->err_data_size = 0;
        pthread_mutex_unlock(&w->lock);
        ctx_completed(err->op_context, "injected error");
        return 1;
    }
    pthread_mutex_unlock(&w->lock);
    ssize_t rc = w->orig->readerr(cq, err, flags);
    if (rc > 0) {
        ctx_completed(err->op_context, "error");
    }
    return rc;
}

static const char *w_cq_strerror(struct fid_cq *cq, int prov_errno, const void *err_data, char *buf,
                                 size_t len)
{
    cq_wrap_t *w = CONTAINER_OF(cq->ops, cq_wrap_t, ops);

    if (NULL == err_data && FI_EIO == prov_errno) {
        if (NULL != buf && len > 0) {
            snprintf(buf, len, "injected by fi_fault: %s", fi_strerror(FI_EIO));
            return buf;
        }
        return "injected by fi_fault";
    }
    return w->orig->strerror(cq, prov_errno, err_data, buf, len);
}

static void wrap_cq(struct fid_cq *cq, const struct fi_cq_attr *attr)
{
    cq_wrap_t *w = calloc(1, sizeof(*w));

    if (NULL == w) {
        return;
    }
    pthread_mutex_init(&w->lock, NULL);
    w->orig = cq->ops;
    w->entry_size = entry_size_for(NULL != attr ? attr->format : FI_CQ_FORMAT_UNSPEC);
    copy_ops(&w->ops, cq->ops, sizeof(w->ops));
    SET_IF(&w->ops, read, w_cq_read);
    SET_IF(&w->ops, readerr, w_cq_readerr);
    SET_IF(&w->ops, strerror, w_cq_strerror);
    cq->ops = &w->ops;
}

/* ------------------------------------------------------------------ */
/* Address vectors                                                     */

typedef struct {
    struct fi_ops_av ops;
    struct fi_ops_av *orig;
} av_wrap_t;

static int w_av_insert(struct fid_av *av, const void *addr, size_t count, fi_addr_t *fi_addr,
                       uint64_t flags, void *context)
{
    av_wrap_t *w = CONTAINER_OF(av->ops, av_wrap_t, ops);
    ssize_t injected_rc = decide(CALL_AV_INSERT);
    int rc;

    if (0 != injected_rc) {
        return (int) injected_rc;
    }
    rc = w->orig->insert(av, addr, count, fi_addr, flags, context);
    if (trace_av) {
        say("av_insert count=%zu rc=%d addr0=%" PRIu64, count, rc,
            (NULL != fi_addr && rc > 0) ? (uint64_t) fi_addr[0] : UINT64_MAX);
    }
    return rc;
}

static void wrap_av(struct fid_av *av)
{
    av_wrap_t *w = calloc(1, sizeof(*w));

    if (NULL == w) {
        return;
    }
    w->orig = av->ops;
    copy_ops(&w->ops, av->ops, sizeof(w->ops));
    SET_IF(&w->ops, insert, w_av_insert);
    av->ops = &w->ops;
}

/* ------------------------------------------------------------------ */
/* Memory regions                                                      */

typedef struct {
    struct fi_ops fid_ops;
    struct fi_ops *orig;
    const void *buf;
    size_t len;
    uint64_t access;
    uint64_t key;
} mr_wrap_t;

static int w_mr_close(struct fid *fid)
{
    mr_wrap_t *w = CONTAINER_OF(fid->ops, mr_wrap_t, fid_ops);
    struct fi_ops *orig = w->orig;
    const void *buf = w->buf;
    size_t len = w->len;
    int rc;

    fid->ops = orig;
    rc = orig->close(fid);
    __atomic_add_fetch(&mr_closes, 1, __ATOMIC_RELAXED);
    if (trace_mr) {
        say("mr_close mr=%p buf=%p len=%zu rc=%d", (void *) fid, buf, len, rc);
    }
    free(w);
    return rc;
}

static void note_live_regions(void)
{
    static uint64_t high_water;
    uint64_t live =
        __atomic_load_n(&mr_regs, __ATOMIC_RELAXED) - __atomic_load_n(&mr_closes, __ATOMIC_RELAXED);

    if (trace_mrlive && live >= high_water + 16) {
        high_water = live;
        say("mrlive %" PRIu64 " regions open (%" PRIu64 " registered, %" PRIu64 " closed)", live,
            mr_regs, mr_closes);
    }
}

static void wrap_mr(struct fid_mr *mr, const void *buf, size_t len, uint64_t access)
{
    mr_wrap_t *w;

    __atomic_add_fetch(&mr_regs, 1, __ATOMIC_RELAXED);
    note_live_regions();
    if (trace_mr) {
        char flags[128];
        say("mr_reg mr=%p buf=%p len=%zu access=0x%" PRIx64 " (%s) key=%#" PRIx64, (void *) mr, buf,
            len, access, access_string(access, flags, sizeof(flags)), mr->key);
    }
    w = calloc(1, sizeof(*w));
    if (NULL == w) {
        return;
    }
    w->orig = mr->fid.ops;
    w->buf = buf;
    w->len = len;
    w->access = access;
    w->key = mr->key;
    copy_ops(&w->fid_ops, mr->fid.ops, sizeof(w->fid_ops));
    w->fid_ops.close = w_mr_close;
    mr->fid.ops = &w->fid_ops;
}

/* ------------------------------------------------------------------ */
/* Domains and fabrics                                                 */

typedef struct {
    struct fi_ops_domain ops;
    struct fi_ops_domain *orig;
    struct fi_ops_mr mr;
    struct fi_ops_mr *orig_mr;
} domain_wrap_t;

static domain_wrap_t *domain_of(struct fid_domain *domain)
{
    return CONTAINER_OF(domain->ops, domain_wrap_t, ops);
}

static int w_dom_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
                          void *context)
{
    int rc = domain_of(domain)->orig->endpoint(domain, info, ep, context);
    if (0 == rc) {
        wrap_endpoint(*ep);
    }
    return rc;
}

static int w_dom_scalable_ep(struct fid_domain *domain, struct fi_info *info, struct fid_ep **sep,
                             void *context)
{
    int rc = domain_of(domain)->orig->scalable_ep(domain, info, sep, context);
    if (0 == rc) {
        wrap_endpoint(*sep);
    }
    return rc;
}

static int w_dom_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq,
                         void *context)
{
    int rc = domain_of(domain)->orig->cq_open(domain, attr, cq, context);
    if (0 == rc) {
        wrap_cq(*cq, attr);
    }
    return rc;
}

static int w_dom_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av,
                         void *context)
{
    int rc = domain_of(domain)->orig->av_open(domain, attr, av, context);
    if (0 == rc) {
        wrap_av(*av);
    }
    return rc;
}

/* fi_mr_reg() passes &domain->fid: the domain is the fid's container */
static int w_mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access, uint64_t offset,
                    uint64_t requested_key, uint64_t flags, struct fid_mr **mr, void *context)
{
    struct fid_domain *domain = CONTAINER_OF(fid, struct fid_domain, fid);
    domain_wrap_t *w = CONTAINER_OF(domain->mr, domain_wrap_t, mr);
    ssize_t injected_rc = decide(CALL_MR_REG);
    int rc;

    if (0 != injected_rc) {
        if (trace_mr) {
            say("mr_reg buf=%p len=%zu refused by injection (%zd)", buf, len, injected_rc);
        }
        return (int) injected_rc;
    }
    rc = w->orig_mr->reg(fid, buf, len, access, offset, requested_key, flags, mr, context);
    if (0 == rc) {
        wrap_mr(*mr, buf, len, access);
    }
    return rc;
}

static int w_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
                        struct fid_mr **mr)
{
    struct fid_domain *domain = CONTAINER_OF(fid, struct fid_domain, fid);
    domain_wrap_t *w = CONTAINER_OF(domain->mr, domain_wrap_t, mr);
    ssize_t injected_rc = decide(CALL_MR_REG);
    int rc;

    if (0 != injected_rc) {
        return (int) injected_rc;
    }
    rc = w->orig_mr->regattr(fid, attr, flags, mr);
    if (0 == rc) {
        const void *buf = attr->iov_count > 0 ? attr->mr_iov[0].iov_base : NULL;
        size_t len = attr->iov_count > 0 ? attr->mr_iov[0].iov_len : 0;
        wrap_mr(*mr, buf, len, attr->access);
    }
    return rc;
}

static void wrap_domain(struct fid_domain *domain)
{
    domain_wrap_t *w = calloc(1, sizeof(*w));

    if (NULL == w) {
        return;
    }
    w->orig = domain->ops;
    copy_ops(&w->ops, domain->ops, sizeof(w->ops));
    SET_IF(&w->ops, endpoint, w_dom_endpoint);
    SET_IF(&w->ops, scalable_ep, w_dom_scalable_ep);
    SET_IF(&w->ops, cq_open, w_dom_cq_open);
    SET_IF(&w->ops, av_open, w_dom_av_open);
    domain->ops = &w->ops;
    if (NULL != domain->mr) {
        w->orig_mr = domain->mr;
        copy_ops(&w->mr, domain->mr, sizeof(w->mr));
        SET_IF(&w->mr, reg, w_mr_reg);
        SET_IF(&w->mr, regattr, w_mr_regattr);
        domain->mr = &w->mr;
    }
}

typedef struct {
    struct fi_ops_fabric ops;
    struct fi_ops_fabric *orig;
} fabric_wrap_t;

static int w_fabric_domain(struct fid_fabric *fabric, struct fi_info *info,
                           struct fid_domain **domain, void *context)
{
    fabric_wrap_t *w = CONTAINER_OF(fabric->ops, fabric_wrap_t, ops);
    int rc = w->orig->domain(fabric, info, domain, context);
    if (0 == rc) {
        wrap_domain(*domain);
    }
    return rc;
}

static bool caller_wanted(void *ret_addr)
{
    Dl_info info;

    if (0 == strcmp(caller_filter, "*")) {
        return true;
    }
    return 0 != dladdr(ret_addr, &info) && NULL != info.dli_fname
           && NULL != strstr(info.dli_fname, caller_filter);
}

SHIM_EXPORT int fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
{
    void *ret_addr = __builtin_return_address(0);
    fabric_wrap_t *w;
    int rc;

    if (NULL == real_fi_fabric) {
        return -FI_ENOSYS;
    }
    ++in_real_fabric;
    rc = real_fi_fabric(attr, fabric, context);
    --in_real_fabric;
    if (0 != rc || in_real_fabric > 0 || !caller_wanted(ret_addr)) {
        return rc;
    }
    w = calloc(1, sizeof(*w));
    if (NULL == w) {
        return rc;
    }
    w->orig = (*fabric)->ops;
    copy_ops(&w->ops, (*fabric)->ops, sizeof(w->ops));
    SET_IF(&w->ops, domain, w_fabric_domain);
    (*fabric)->ops = &w->ops;
    __atomic_add_fetch(&wrapped_fabrics, 1, __ATOMIC_RELAXED);
    if (injecting || trace_mr || trace_av || trace_ctx || trace_mrlive) {
        say("wrapped fabric %s (%d rule(s), %s)", attr && attr->prov_name ? attr->prov_name : "?",
            num_rules, injecting ? "injecting" : "not injecting on this rank");
    }
    return rc;
}
