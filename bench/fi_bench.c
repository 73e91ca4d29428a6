/*
 * fi_bench: raw-libfabric RMA and atomic baseline for btl/ofi.
 *
 * It asks fi_getinfo for exactly the attributes btl/ofi asks for (the hints
 * come from the component's own mca_btl_ofi_fill_hints and MCA_BTL_OFI_RMA_CAPS,
 * btl_ofi_validate.c, linked in), so that the numbers it prints are the floor
 * an MPI layer on the same provider cannot go below.
 *
 * The program forks itself: the parent is the origin (rank 0) and does all
 * posting and timing, the child is the target (rank 1) and only drives
 * progress, because several providers (sockets, tcp;ofi_rxm, ...) complete
 * RMA only while the target polls its CQ.  Endpoint names, addresses and keys
 * travel over pipes, so no launcher is needed.
 *
 * stdout carries OSU-style results only; diagnostics go to stderr.
 * Exit status: 0 success, 1 error or timeout, 2 provider not available.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "btl_ofi_validate.h"

/* the newest API the headers know, as btl/ofi asks (1.17 or 2.1 here) */
#define API_VERSION FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)

#define WINDOW         64
#define LARGE_MSG_SIZE 65536
/* The default iteration counts are OSU-like; these caps cut them short on
 * slow (socket based, loaded) providers and at large sizes, so that a full
 * run stays well under a minute. */
#define POINT_TIME_CAP              0.1
#define WARMUP_TIME_CAP             0.05
#define LATENCY_WARMUP              2000 /* as bench/mpi_bench_util.h */
#define LATENCY_OPS_PER_CLOCK_CHECK 8
/* A sweep stops before a size whose single step (op or window) is predicted
 * to take longer than this: udp;ofi_rxd on a loaded box moves ~15 MB/s, and
 * one 4 MiB window would then take 20 s. */
#define STEP_TIME_LIMIT 2.0
#define MAX_SIZE_LIMIT  ((size_t) 1 << 30)
#define CQ_BATCH        16
#define CQ_SIZE         256
/* A pipe check is a syscall; doing one per CQ poll would starve the
 * provider's own progress on the target. */
#define TARGET_POLLS_PER_PIPE_CHECK          256
#define ORIGIN_IDLE_POLLS_PER_LIVENESS_CHECK 65536
/* Origin and target both spin.  With fewer free cores than spinners (2-core
 * CI boxes running builds) each round trip would otherwise wait for a full
 * scheduler slice of the peer; yielding after a run of empty polls lets the
 * peer in.  On an idle machine the yield returns at once, and no operation
 * that completes within this many polls ever sees one.  -S turns it off. */
#define EMPTY_POLLS_PER_YIELD 256
/* Non-zero so that a target which silently drops the atomic is noticed. */
#define ATOMIC_BASE UINT64_C(0x1000)
/* Only used by providers without FI_MR_PROV_KEY. */
#define TARGET_MR_KEY    0xb7
#define ORIGIN_MR_KEY    0xa5
#define DEFAULT_TIMEOUT  120
#define EXIT_NO_PROVIDER 2
/* Sanity bound on an endpoint name read from the pipe. */
#define MAX_EP_NAME 4096

enum bench_op { OP_PUT, OP_GET, OP_FOP, OP_CAS, OP_ACC };
enum bench_kind { KIND_LATENCY, KIND_BANDWIDTH, KIND_RATE };

struct bench_desc {
    const char *name;
    enum bench_op op;
    enum bench_kind kind;
};

/* One benchmark per line reads better than clang-format's bin packing. */
/* clang-format off */
static const struct bench_desc benches[] = {
    { "put_lat", OP_PUT, KIND_LATENCY },
    { "get_lat", OP_GET, KIND_LATENCY },
    { "put_bw", OP_PUT, KIND_BANDWIDTH },
    { "get_bw", OP_GET, KIND_BANDWIDTH },
    { "put_rate", OP_PUT, KIND_RATE },
    { "fop_lat", OP_FOP, KIND_LATENCY },
    { "cas_lat", OP_CAS, KIND_LATENCY },
    { "acc_lat", OP_ACC, KIND_LATENCY },
};
/* clang-format on */
#define NUM_BENCHES (sizeof(benches) / sizeof(benches[0]))

struct options {
    const char *prov;
    unsigned bench_mask;
    bool benches_explicit;
    size_t min_size;
    size_t max_size;
    long iters;  /* < 0: built-in defaults */
    long warmup; /* < 0: built-in defaults */
    unsigned timeout;
    bool verbose;
    bool never_yield;
    bool threads; /* FI_THREAD_SAFE, as btl/ofi under MPI_THREAD_MULTIPLE */
};

struct endpoint {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    struct fid_mr *mr;
    void *desc;
    char *buf;
    size_t buf_len;
};

/* Pipe protocol.  Everything is sent in host byte order: both ends are the
 * same binary on the same machine. */
enum ctrl_cmd {
    CMD_READY = 1, /* target -> origin: AV insert done */
    CMD_BEGIN,     /* origin -> target: arg0 counter value, arg1 fill seed */
    CMD_BEGUN,     /* target -> origin: buffers set, progress loop running */
    CMD_END,       /* origin -> target: arg0 bytes to verify, arg1 seed */
    CMD_ENDED,     /* target -> origin: arg0 counter, arg1 1 + bad offset */
    CMD_QUIT,
};

struct ctrl_msg {
    uint32_t cmd;
    uint32_t pad;
    uint64_t arg[2];
};

struct target_hello {
    uint64_t data_addr;   /* remote address of the data region */
    uint64_t atomic_addr; /* remote address of the 8-byte counter */
    uint64_t key;
    uint64_t name_len;
};

struct origin {
    const struct options *opt;
    struct endpoint *e;
    fi_addr_t peer;
    struct target_hello tgt;
    pid_t target_pid;
    int cmd_fd;
    int reply_fd;
    uint64_t *operand;
    uint64_t *compare;
    uint64_t *result;
    uint64_t posted;
    uint64_t completed;
    uint64_t atomic_ops; /* since the current benchmark began */
    uint64_t bad_fetches;
    unsigned long idle_polls;
    unsigned long empty_streak;
    struct fi_context2 ctx[WINDOW];
};

static const char *log_tag = "fi_bench";
static char alarm_msg[96];
static size_t alarm_msg_len;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: ", log_tag);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static void say_fi_error(const char *call, ssize_t ret)
{
    say("%s failed: %s (%zd)", call, fi_strerror((int) -ret), ret);
}

static void on_alarm(int sig)
{
    (void) sig;
    ssize_t ignored = write(STDERR_FILENO, alarm_msg, alarm_msg_len);
    (void) ignored;
    _exit(1);
}

static void arm_timeout(unsigned secs)
{
    struct sigaction sa;

    if (secs == 0)
        return;
    snprintf(alarm_msg, sizeof(alarm_msg), "%s: timed out after %u s\n", log_tag, secs);
    alarm_msg_len = strlen(alarm_msg);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm(secs);
}

static double now_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- pipes */

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            say("pipe write failed: %s", n < 0 ? strerror(errno) : "short");
            return -1;
        }
        p += n;
        len -= (size_t) n;
    }
    return 0;
}

/* Returns 1 on a clean EOF before the first byte: the peer is gone. */
static int read_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    size_t got = 0;

    while (got < len) {
        ssize_t n = read(fd, p + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            say("pipe read failed: %s", strerror(errno));
            return -1;
        }
        if (n == 0)
            return got == 0 ? 1 : -1;
        got += (size_t) n;
    }
    return 0;
}

static int send_ctrl(int fd, uint32_t cmd, uint64_t a0, uint64_t a1)
{
    struct ctrl_msg m = { .cmd = cmd, .arg = { a0, a1 } };

    return write_all(fd, &m, sizeof(m));
}

static int recv_ctrl(int fd, struct ctrl_msg *m, uint32_t want, const char *who)
{
    int ret = read_all(fd, m, sizeof(*m));

    if (ret == 1) {
        say("%s closed the control pipe (process exited)", who);
        return -1;
    }
    if (ret < 0)
        return -1;
    if (want != 0 && m->cmd != want) {
        say("protocol error: got command %u from %s, expected %u", m->cmd, who, want);
        return -1;
    }
    return 0;
}

static bool pipe_readable(int fd)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };

    return poll(&pfd, 1, 0) > 0;
}

/* -------------------------------------------------------------- buffers */

static uint8_t pattern_byte(size_t i, uint64_t seed)
{
    /* The high bits of the index are mixed in so that data landing at the
     * wrong page or the wrong offset does not repeat the pattern. */
    return (uint8_t) (i * 31u + (i >> 8) * 7u + (i >> 16) + seed);
}

static void fill_pattern(char *buf, size_t len, uint64_t seed)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (char) pattern_byte(i, seed);
}

/* Returns 0 when the pattern matches, otherwise 1 + the first bad offset. */
static uint64_t check_pattern(const char *buf, size_t len, uint64_t seed)
{
    for (size_t i = 0; i < len; i++)
        if ((uint8_t) buf[i] != pattern_byte(i, seed))
            return (uint64_t) i + 1;
    return 0;
}

static size_t atomic_area_offset(size_t max_size)
{
    return (max_size + 63) & ~(size_t) 63;
}

/* ------------------------------------------------------------- libfabric */

/*
 * btl/ofi's hints for one-sided traffic, from the component itself: its
 * discover() asks with FI_HMEM first and then without, and asks the chosen
 * provider again for manual progress (its default progress mode).  The
 * relaxed attempts of find_provider() take things out afterwards.
 */
static struct fi_info *build_hints(const struct options *opt, bool hmem, bool manual_progress,
                                   bool delivery_complete)
{
    struct fi_info *hints = fi_allocinfo();
    uint64_t caps = MCA_BTL_OFI_RMA_CAPS;

    if (!hints)
        return NULL;
#if defined(FI_HMEM)
    if (hmem)
        caps |= FI_HMEM;
#else
    (void) hmem;
#endif
    mca_btl_ofi_fill_hints(hints, caps, manual_progress ? FI_PROGRESS_MANUAL : FI_PROGRESS_UNSPEC,
                           opt->threads ? FI_THREAD_SAFE : FI_THREAD_DOMAIN);
    if (!delivery_complete)
        hints->tx_attr->op_flags &= ~(uint64_t) FI_DELIVERY_COMPLETE;
    if (opt->prov) {
        hints->fabric_attr->prov_name = strdup(opt->prov);
        if (!hints->fabric_attr->prov_name) {
            fi_freeinfo(hints);
            return NULL;
        }
    }
    return hints;
}

/*
 * The first attempt is what btl/ofi asks for.  The relaxed ones exist so that
 * a provider which cannot honour a preference is still measured, with a note
 * saying what was given up (btl/ofi itself also runs without manual progress,
 * never without delivery-complete).  Each attempt asks with FI_HMEM first and
 * then without, as btl/ofi does.  Returns -FI_ENODATA when nothing matches.
 */
static int find_provider(const struct options *opt, bool notes, struct fi_info **out)
{
    static const struct {
        bool manual_progress;
        bool delivery_complete;
        const char *note;
    } attempts[] = {
        { true, true, NULL },
        { false, true, "without FI_PROGRESS_MANUAL" },
        { false, false, "without FI_PROGRESS_MANUAL and FI_DELIVERY_COMPLETE" },
    };

    for (size_t t = 0; t < 2 * sizeof(attempts) / sizeof(attempts[0]); t++) {
        size_t a = t / 2;
        bool hmem = 0 == t % 2;
        struct fi_info *hints, *list = NULL, *pick = NULL;
        int ret;

        hints = build_hints(opt, hmem, attempts[a].manual_progress, attempts[a].delivery_complete);
        if (!hints) {
            say("out of memory");
            return -FI_ENOMEM;
        }
        ret = fi_getinfo(API_VERSION, NULL, NULL, 0, hints, &list);
        fi_freeinfo(hints);
        if (ret == -FI_ENODATA)
            continue;
        if (ret) {
            say_fi_error("fi_getinfo", ret);
            return ret;
        }
        /* The hint matches layered names loosely; insist on the exact one so
         * that "tcp" does not quietly run "tcp;ofi_rxm". */
        for (struct fi_info *i = list; i; i = i->next) {
            if (!opt->prov || strcmp(i->fabric_attr->prov_name, opt->prov) == 0) {
                pick = i;
                break;
            }
        }
        if (pick) {
            *out = fi_dupinfo(pick);
            fi_freeinfo(list);
            if (!*out) {
                say("fi_dupinfo failed");
                return -FI_ENOMEM;
            }
            if (notes && attempts[a].note)
                say("note: provider %s only matched %s", (*out)->fabric_attr->prov_name,
                    attempts[a].note);
            return 0;
        }
        fi_freeinfo(list);
    }
    return -FI_ENODATA;
}

static void describe_info(const struct fi_info *info)
{
    const struct fi_domain_attr *d = info->domain_attr;
    int mr_mode = d->mr_mode;
    int cprog = d->control_progress, dprog = d->data_progress;
    int threading = d->threading, av_type = d->av_type;

    say("provider %s, fabric %s, domain %s", info->fabric_attr->prov_name, info->fabric_attr->name,
        d->name);
    say("  mr_mode: %s", fi_tostr(&mr_mode, FI_TYPE_MR_MODE));
    say("  mode: %s", fi_tostr(&info->mode, FI_TYPE_MODE));
    say("  control_progress: %s", fi_tostr(&cprog, FI_TYPE_PROGRESS));
    say("  data_progress: %s", fi_tostr(&dprog, FI_TYPE_PROGRESS));
    say("  threading: %s", fi_tostr(&threading, FI_TYPE_THREADING));
    say("  av_type: %s", fi_tostr(&av_type, FI_TYPE_AV_TYPE));
    say("  tx op_flags: %s", fi_tostr(&info->tx_attr->op_flags, FI_TYPE_OP_FLAGS));
    say("  inject_size %zu, max_msg_size %zu, tx size %zu, rx size %zu, "
        "mr_key_size %zu",
        info->tx_attr->inject_size, info->ep_attr->max_msg_size, info->tx_attr->size,
        info->rx_attr->size, d->mr_key_size);
}

static void close_fid(struct fid *fid, const char *what)
{
    int ret;

    if (!fid)
        return;
    ret = fi_close(fid);
    if (ret)
        say("fi_close(%s) failed: %s", what, fi_strerror(-ret));
}

static void close_endpoint(struct endpoint *e)
{
    close_fid(e->mr ? &e->mr->fid : NULL, "mr");
    close_fid(e->ep ? &e->ep->fid : NULL, "ep");
    close_fid(e->cq ? &e->cq->fid : NULL, "cq");
    close_fid(e->av ? &e->av->fid : NULL, "av");
    close_fid(e->domain ? &e->domain->fid : NULL, "domain");
    close_fid(e->fabric ? &e->fabric->fid : NULL, "fabric");
    if (e->info)
        fi_freeinfo(e->info);
    free(e->buf);
    memset(e, 0, sizeof(*e));
}

/* On failure the caller still owns whatever was opened: close_endpoint(). */
static int open_endpoint(const struct options *opt, bool notes, struct endpoint *e)
{
    struct fi_av_attr av_attr = { 0 };
    struct fi_cq_attr cq_attr = { 0 };
    int ret;

    ret = find_provider(opt, notes, &e->info);
    if (ret)
        return ret;

    ret = fi_fabric(e->info->fabric_attr, &e->fabric, NULL);
    if (ret) {
        say_fi_error("fi_fabric", ret);
        return ret;
    }
    ret = fi_domain(e->fabric, e->info, &e->domain, NULL);
    if (ret) {
        say_fi_error("fi_domain", ret);
        return ret;
    }
    av_attr.type = e->info->domain_attr->av_type == FI_AV_MAP ? FI_AV_MAP : FI_AV_TABLE;
    av_attr.count = 4;
    ret = fi_av_open(e->domain, &av_attr, &e->av, NULL);
    if (ret) {
        say_fi_error("fi_av_open", ret);
        return ret;
    }
    /* Pure busy polling: a wait object would only add overhead. */
    cq_attr.format = FI_CQ_FORMAT_CONTEXT;
    cq_attr.size = CQ_SIZE;
    cq_attr.wait_obj = FI_WAIT_NONE;
    ret = fi_cq_open(e->domain, &cq_attr, &e->cq, NULL);
    if (ret) {
        say_fi_error("fi_cq_open", ret);
        return ret;
    }
    ret = fi_endpoint(e->domain, e->info, &e->ep, NULL);
    if (ret) {
        say_fi_error("fi_endpoint", ret);
        return ret;
    }
    ret = fi_ep_bind(e->ep, &e->av->fid, 0);
    if (ret) {
        say_fi_error("fi_ep_bind(av)", ret);
        return ret;
    }
    ret = fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV);
    if (ret) {
        say_fi_error("fi_ep_bind(cq)", ret);
        return ret;
    }
    ret = fi_enable(e->ep);
    if (ret) {
        say_fi_error("fi_enable", ret);
        return ret;
    }
    return 0;
}

/*
 * Local buffers are only registered when the provider demands it
 * (FI_MR_LOCAL), as btl/ofi does; the target buffer always is.
 */
static int allocate_buffer(struct endpoint *e, size_t len, uint64_t access, uint64_t requested_key,
                           bool must_register)
{
    int mr_mode = e->info->domain_attr->mr_mode;
    void *p = NULL;
    int ret;

    if (posix_memalign(&p, 4096, len)) {
        say("cannot allocate %zu bytes", len);
        return -FI_ENOMEM;
    }
    memset(p, 0, len);
    e->buf = p;
    e->buf_len = len;
    if (!must_register && !(mr_mode & FI_MR_LOCAL))
        return 0;

    ret = fi_mr_reg(e->domain, e->buf, len, access, 0, requested_key, 0, &e->mr, NULL);
    if (ret) {
        say_fi_error("fi_mr_reg", ret);
        return ret;
    }
    if (mr_mode & FI_MR_ENDPOINT) {
        ret = fi_mr_bind(e->mr, &e->ep->fid, 0);
        if (ret) {
            say_fi_error("fi_mr_bind", ret);
            return ret;
        }
        ret = fi_mr_enable(e->mr);
        if (ret) {
            say_fi_error("fi_mr_enable", ret);
            return ret;
        }
    }
    e->desc = fi_mr_desc(e->mr);
    return 0;
}

static int get_ep_name(struct endpoint *e, char **name, size_t *len)
{
    size_t cap = 64;
    char *buf = NULL;
    int ret;

    for (;;) {
        char *nbuf = realloc(buf, cap);
        if (!nbuf) {
            free(buf);
            say("out of memory");
            return -FI_ENOMEM;
        }
        buf = nbuf;
        *len = cap;
        ret = fi_getname(&e->ep->fid, buf, len);
        if (ret == -FI_ETOOSMALL && *len > cap) {
            cap = *len;
            continue;
        }
        break;
    }
    if (ret) {
        free(buf);
        say_fi_error("fi_getname", ret);
        return ret;
    }
    *name = buf;
    return 0;
}

static int insert_peer(struct endpoint *e, const void *name, fi_addr_t *addr)
{
    int ret = fi_av_insert(e->av, name, 1, addr, 0, NULL);

    if (ret != 1) {
        say_fi_error("fi_av_insert", ret < 0 ? ret : -FI_EINVAL);
        return -1;
    }
    return 0;
}

static void report_cq_error(struct fid_cq *cq)
{
    struct fi_cq_err_entry err;
    char detail[256] = "";
    const char *text;
    ssize_t ret;

    memset(&err, 0, sizeof(err));
    ret = fi_cq_readerr(cq, &err, 0);
    if (ret < 0) {
        say_fi_error("fi_cq_readerr", ret);
        return;
    }
    text = fi_cq_strerror(cq, err.prov_errno, err.err_data, detail, sizeof(detail));
    say("completion error: %s (err %d, prov_errno %d)%s%s", fi_strerror(err.err), err.err,
        err.prov_errno, text && *text ? ": " : "", text ? text : "");
}

/* ---------------------------------------------------------------- target */

static int serve_until_end(const struct options *opt, struct endpoint *e, int cmd_fd,
                           struct ctrl_msg *m)
{
    struct fi_cq_entry ent[CQ_BATCH];
    unsigned polls = 0;

    for (;;) {
        ssize_t n = fi_cq_read(e->cq, ent, CQ_BATCH);
        if (n == -FI_EAVAIL) {
            report_cq_error(e->cq);
            return -1;
        }
        if (n < 0 && n != -FI_EAGAIN) {
            say_fi_error("fi_cq_read", n);
            return -1;
        }
        ++polls;
        if (polls % TARGET_POLLS_PER_PIPE_CHECK == 0 && pipe_readable(cmd_fd))
            return recv_ctrl(cmd_fd, m, CMD_END, "origin");
        /* RMA targets see no completions, so every poll counts as empty. */
        if (!opt->never_yield && polls % EMPTY_POLLS_PER_YIELD == 0)
            sched_yield();
    }
}

static int run_target(const struct options *opt, int cmd_fd, int reply_fd)
{
    struct endpoint e = { 0 };
    struct target_hello hello = { 0 };
    struct ctrl_msg m;
    size_t atomic_off = atomic_area_offset(opt->max_size);
    volatile uint64_t *counter;
    char *name = NULL, *origin_name = NULL;
    size_t name_len;
    uint64_t origin_name_len;
    fi_addr_t origin_addr;
    int status = 1;
    int ret;

    ret = open_endpoint(opt, false, &e);
    if (ret == -FI_ENODATA) {
        /* The origin sees the same and reports it. */
        status = EXIT_NO_PROVIDER;
        goto out;
    }
    if (ret)
        goto out;
    ret =
        allocate_buffer(&e, atomic_off + 64, FI_REMOTE_READ | FI_REMOTE_WRITE, TARGET_MR_KEY, true);
    if (ret)
        goto out;
    counter = (volatile uint64_t *) (e.buf + atomic_off);
    if (fi_mr_key(e.mr) == FI_KEY_NOTAVAIL) {
        say("provider needs raw MR keys (FI_MR_RAW), not supported");
        goto out;
    }
    if (get_ep_name(&e, &name, &name_len))
        goto out;

    if (e.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) {
        hello.data_addr = (uint64_t) (uintptr_t) e.buf;
        hello.atomic_addr = (uint64_t) (uintptr_t) counter;
    } else {
        hello.data_addr = 0;
        hello.atomic_addr = atomic_off;
    }
    hello.key = fi_mr_key(e.mr);
    hello.name_len = name_len;
    if (write_all(reply_fd, &hello, sizeof(hello)) || write_all(reply_fd, name, name_len))
        goto out;

    if (read_all(cmd_fd, &origin_name_len, sizeof(origin_name_len)))
        goto out;
    if (origin_name_len == 0 || origin_name_len > MAX_EP_NAME) {
        say("bad endpoint name length %" PRIu64, origin_name_len);
        goto out;
    }
    origin_name = malloc(origin_name_len);
    if (!origin_name || read_all(cmd_fd, origin_name, origin_name_len))
        goto out;
    /* Connection-oriented layers (rxm) want the initiator known too. */
    if (insert_peer(&e, origin_name, &origin_addr))
        goto out;
    if (send_ctrl(reply_fd, CMD_READY, 0, 0))
        goto out;

    for (;;) {
        ret = read_all(cmd_fd, &m, sizeof(m));
        if (ret == 1) {
            say("origin vanished");
            goto out;
        }
        if (ret)
            goto out;
        if (m.cmd == CMD_QUIT)
            break;
        if (m.cmd != CMD_BEGIN) {
            say("protocol error: unexpected command %u", m.cmd);
            goto out;
        }
        fill_pattern(e.buf, opt->max_size, m.arg[1]);
        *counter = m.arg[0];
        atomic_thread_fence(memory_order_seq_cst);
        if (send_ctrl(reply_fd, CMD_BEGUN, 0, 0))
            goto out;
        if (serve_until_end(opt, &e, cmd_fd, &m))
            goto out;
        atomic_thread_fence(memory_order_seq_cst);
        if (m.arg[0] > opt->max_size)
            m.arg[0] = opt->max_size;
        if (send_ctrl(reply_fd, CMD_ENDED, *counter, check_pattern(e.buf, m.arg[0], m.arg[1])))
            goto out;
    }
    status = 0;
out:
    free(name);
    free(origin_name);
    close_endpoint(&e);
    return status;
}

/* ---------------------------------------------------------------- origin */

static bool target_exited(struct origin *o)
{
    int wstatus;
    pid_t pid;

    if (o->target_pid <= 0)
        return true;
    pid = waitpid(o->target_pid, &wstatus, WNOHANG);
    if (pid == 0)
        return false;
    if (pid == o->target_pid) {
        if (WIFEXITED(wstatus))
            say("target process exited with status %d", WEXITSTATUS(wstatus));
        else if (WIFSIGNALED(wstatus))
            say("target process killed by signal %d", WTERMSIG(wstatus));
    }
    o->target_pid = -1;
    return true;
}

static bool is_window_context(const struct origin *o, const void *ctx)
{
    const char *p = ctx, *lo = (const char *) &o->ctx[0];

    return p >= lo && p < (const char *) &o->ctx[WINDOW]
           && (size_t) (p - lo) % sizeof(o->ctx[0]) == 0;
}

static int poll_origin_cq(struct origin *o)
{
    struct fi_cq_entry ent[CQ_BATCH];
    ssize_t n = fi_cq_read(o->e->cq, ent, CQ_BATCH);

    if (n > 0) {
        for (ssize_t i = 0; i < n; i++) {
            if (!is_window_context(o, ent[i].op_context)) {
                say("completion with foreign context %p", ent[i].op_context);
                return -1;
            }
        }
        o->completed += (uint64_t) n;
        o->empty_streak = 0;
        return 0;
    }
    if (n == -FI_EAGAIN) {
        if (!o->opt->never_yield && ++o->empty_streak % EMPTY_POLLS_PER_YIELD == 0)
            sched_yield();
        /* The target dying mid-operation would otherwise look like a very
         * slow provider until the alarm fires. */
        if (++o->idle_polls % ORIGIN_IDLE_POLLS_PER_LIVENESS_CHECK == 0 && target_exited(o)) {
            say("target process went away while operations were in flight");
            return -1;
        }
        return 0;
    }
    if (n == -FI_EAVAIL) {
        report_cq_error(o->e->cq);
        return -1;
    }
    say_fi_error("fi_cq_read", n);
    return -1;
}

static int wait_all_completions(struct origin *o)
{
    while (o->completed < o->posted)
        if (poll_origin_cq(o))
            return -1;
    return 0;
}

static const char *op_call_name(enum bench_op op)
{
    switch (op) {
    case OP_PUT:
        return "fi_write";
    case OP_GET:
        return "fi_read";
    case OP_FOP:
        return "fi_fetch_atomic";
    case OP_CAS:
        return "fi_compare_atomic";
    case OP_ACC:
        return "fi_atomic";
    }
    return "?";
}

static ssize_t issue_op(struct origin *o, enum bench_op op, size_t len, struct fi_context2 *ctx)
{
    struct endpoint *e = o->e;

    switch (op) {
    case OP_PUT:
        return fi_write(e->ep, e->buf, len, e->desc, o->peer, o->tgt.data_addr, o->tgt.key, ctx);
    case OP_GET:
        return fi_read(e->ep, e->buf, len, e->desc, o->peer, o->tgt.data_addr, o->tgt.key, ctx);
    case OP_FOP:
        return fi_fetch_atomic(e->ep, o->operand, 1, e->desc, o->result, e->desc, o->peer,
                               o->tgt.atomic_addr, o->tgt.key, FI_UINT64, FI_SUM, ctx);
    case OP_CAS:
        return fi_compare_atomic(e->ep, o->operand, 1, e->desc, o->compare, e->desc, o->result,
                                 e->desc, o->peer, o->tgt.atomic_addr, o->tgt.key, FI_UINT64,
                                 FI_CSWAP, ctx);
    case OP_ACC:
        return fi_atomic(e->ep, o->operand, 1, e->desc, o->peer, o->tgt.atomic_addr, o->tgt.key,
                         FI_UINT64, FI_SUM, ctx);
    }
    return -FI_EINVAL;
}

static int post_op(struct origin *o, enum bench_op op, size_t len, struct fi_context2 *ctx)
{
    for (;;) {
        ssize_t ret = issue_op(o, op, len, ctx);
        if (ret == 0) {
            o->posted++;
            return 0;
        }
        if (ret != -FI_EAGAIN) {
            say_fi_error(op_call_name(op), ret);
            return -1;
        }
        /* Out of tx credits: reap completions (and drive progress) until
         * the provider takes the operation. */
        if (poll_origin_cq(o))
            return -1;
    }
}

struct iter_plan {
    long warmup;
    long iters;
    double warmup_cap; /* seconds, 0 = run all */
    double timed_cap;
    double predicted_step; /* seconds per step, from the previous size */
};

/* Both fetching atomics return the pre-op counter, which for a lone origin
 * doing one op at a time is ATOMIC_BASE + the number of earlier ops. */
static int one_latency_op(struct origin *o, enum bench_op op, size_t len)
{
    uint64_t expect = ATOMIC_BASE + o->atomic_ops;

    if (op == OP_CAS) {
        *o->compare = expect;
        *o->operand = expect + 1;
    }
    if (post_op(o, op, len, &o->ctx[0]) || wait_all_completions(o))
        return -1;
    if (op == OP_PUT || op == OP_GET)
        return 0;
    if ((op == OP_FOP || op == OP_CAS) && *o->result != expect)
        o->bad_fetches++;
    o->atomic_ops++;
    return 0;
}

static int one_window(struct origin *o, enum bench_op op, size_t len)
{
    for (int j = 0; j < WINDOW; j++)
        if (post_op(o, op, len, &o->ctx[j]))
            return -1;
    return wait_all_completions(o);
}

static int run_step(struct origin *o, const struct bench_desc *b, size_t len)
{
    return b->kind == KIND_LATENCY ? one_latency_op(o, b->op, len) : one_window(o, b->op, len);
}

/* Times plan->iters steps (ops or windows) after the warm-up; *done says how
 * many ran before a time cap cut the loop short. */
static int time_steps(struct origin *o, const struct bench_desc *b, size_t len,
                      const struct iter_plan *plan, double *secs, long *done)
{
    long check_every = b->kind == KIND_LATENCY ? LATENCY_OPS_PER_CLOCK_CHECK : 1;
    long warmup = plan->warmup;
    double t0 = now_seconds();
    long i;

    /* When a single step is expected to blow the cap, the previous, smaller
     * size has already warmed the path. */
    if (plan->warmup_cap > 0 && plan->predicted_step > plan->warmup_cap)
        warmup = 0;
    /* The warm-up is not timed, so its clock may be read every step. */
    for (i = 0; i < warmup; i++) {
        if (plan->warmup_cap > 0 && i > 0 && now_seconds() - t0 > plan->warmup_cap)
            break;
        if (run_step(o, b, len))
            return -1;
    }
    t0 = now_seconds();
    for (i = 0; i < plan->iters; i++) {
        if (plan->timed_cap > 0 && i > 0 && i % check_every == 0
            && now_seconds() - t0 > plan->timed_cap)
            break;
        if (run_step(o, b, len))
            return -1;
    }
    *secs = now_seconds() - t0;
    *done = i;
    return 0;
}

static void plan_iterations(const struct options *opt, const struct bench_desc *b, size_t size,
                            struct iter_plan *plan)
{
    bool large = size > LARGE_MSG_SIZE;

    if (b->kind == KIND_LATENCY) {
        plan->iters = large ? 100 : 1000;
        plan->warmup = large ? 10 : LATENCY_WARMUP;
    } else {
        /* Counted in windows of WINDOW operations, as OSU does. */
        plan->iters = large ? 20 : 100;
        plan->warmup = large ? 2 : 10;
    }
    plan->timed_cap = POINT_TIME_CAP;
    plan->warmup_cap = WARMUP_TIME_CAP;
    if (opt->iters > 0) {
        plan->iters = opt->iters;
        plan->timed_cap = 0;
    }
    if (opt->warmup >= 0) {
        plan->warmup = opt->warmup;
        plan->warmup_cap = 0;
    }
}

/* Returns 1 when the benchmark is not supported and may be skipped. */
static int check_atomic_support(struct origin *o, const struct bench_desc *b)
{
    struct fi_atomic_attr attr = { 0 };
    uint64_t flags = 0;
    enum fi_op aop = FI_SUM;
    int ret;

    if (b->op == OP_PUT || b->op == OP_GET)
        return 0;
    if (b->op == OP_FOP)
        flags = FI_FETCH_ATOMIC;
    if (b->op == OP_CAS) {
        flags = FI_COMPARE_ATOMIC;
        aop = FI_CSWAP;
    }
    ret = fi_query_atomic(o->e->domain, FI_UINT64, aop, &attr, flags);
    if (o->opt->verbose)
        say("fi_query_atomic(FI_UINT64, %s%s) = %d (count %zu, size %zu)",
            aop == FI_CSWAP ? "FI_CSWAP" : "FI_SUM",
            flags == FI_FETCH_ATOMIC     ? ", FI_FETCH_ATOMIC"
            : flags == FI_COMPARE_ATOMIC ? ", FI_COMPARE_ATOMIC"
                                         : "",
            ret, attr.count, attr.size);
    if (ret == 0 && attr.count >= 1 && attr.size == 8)
        return 0;
    say("%s: provider reports no %s %s support for FI_UINT64 (%s)", b->name, op_call_name(b->op),
        aop == FI_CSWAP ? "FI_CSWAP" : "FI_SUM", ret ? fi_strerror(-ret) : "bad attr");
    return 1;
}

static void print_header(const struct origin *o, const struct bench_desc *b)
{
    static const char *columns[] = {
        [KIND_LATENCY] = "Latency (us)",
        [KIND_BANDWIDTH] = "Bandwidth (MB/s)",
        [KIND_RATE] = "Messages/s",
    };

    printf("# fi_bench %s provider=%s\n", b->name, o->e->info->fabric_attr->prov_name);
    printf("%-10s%20s\n", "# Size", columns[b->kind]);
    fflush(stdout);
}

static int run_benchmark(struct origin *o, const struct bench_desc *b)
{
    const struct options *opt = o->opt;
    const uint64_t target_seed = 0x5a, put_seed = 0xc3;
    size_t min = opt->min_size, max = opt->max_size, last = 0;
    double last_step = 0;
    bool is_atomic = b->op != OP_PUT && b->op != OP_GET;
    struct ctrl_msg m;

    if (check_atomic_support(o, b))
        return opt->benches_explicit ? -1 : 0;

    if (is_atomic)
        min = max = sizeof(uint64_t);
    if (b->op == OP_PUT)
        fill_pattern(o->e->buf, opt->max_size, put_seed);
    *o->operand = 1;
    o->atomic_ops = 0;
    o->bad_fetches = 0;

    if (send_ctrl(o->cmd_fd, CMD_BEGIN, ATOMIC_BASE, target_seed)
        || recv_ctrl(o->reply_fd, &m, CMD_BEGUN, "target"))
        return -1;

    print_header(o, b);
    for (size_t size = min; size <= max; size *= 2) {
        struct iter_plan plan;
        double secs, value;
        long done;

        if (size > o->e->info->ep_attr->max_msg_size) {
            say("%s: skipping %zu bytes, above max_msg_size %zu", b->name, size,
                o->e->info->ep_attr->max_msg_size);
            break;
        }
        plan_iterations(opt, b, size, &plan);
        plan.predicted_step = 2 * last_step;
        if (opt->iters <= 0 && plan.predicted_step > STEP_TIME_LIMIT) {
            say("%s: stopping before %zu bytes: one %s would take about %.1f s "
                "(-i forces it)",
                b->name, size, b->kind == KIND_LATENCY ? "operation" : "window",
                plan.predicted_step);
            break;
        }
        if (b->op == OP_GET)
            memset(o->e->buf, 0, size);
        if (time_steps(o, b, size, &plan, &secs, &done))
            return -1;

        if (b->op == OP_GET) {
            uint64_t bad = check_pattern(o->e->buf, size, target_seed);
            if (bad) {
                say("%s: data read at %zu bytes is wrong at offset %" PRIu64, b->name, size,
                    bad - 1);
                return -1;
            }
        }
        if (b->kind == KIND_LATENCY)
            value = secs * 1e6 / (double) done;
        else if (b->kind == KIND_BANDWIDTH)
            value = (double) size * WINDOW * (double) done / secs / 1e6;
        else
            value = (double) WINDOW * (double) done / secs;
        printf("%-10zu%20.2f\n", size, value);
        fflush(stdout);
        if (opt->verbose && opt->iters <= 0 && done < plan.iters)
            say("%s: %zu bytes: time cap hit after %ld of %ld %s", b->name, size, done, plan.iters,
                b->kind == KIND_LATENCY ? "ops" : "windows");
        last = size;
        last_step = secs / (double) done;
        if (size > SIZE_MAX / 2)
            break;
    }

    if (send_ctrl(o->cmd_fd, CMD_END, b->op == OP_PUT ? last : 0, put_seed)
        || recv_ctrl(o->reply_fd, &m, CMD_ENDED, "target"))
        return -1;
    if (m.arg[1]) {
        say("%s: data written at %zu bytes is wrong at target offset %" PRIu64, b->name, last,
            m.arg[1] - 1);
        return -1;
    }
    if (is_atomic && m.arg[0] != ATOMIC_BASE + o->atomic_ops) {
        say("%s: target counter is %#" PRIx64 " after %" PRIu64 " ops, expected %#" PRIx64, b->name,
            m.arg[0], o->atomic_ops, ATOMIC_BASE + o->atomic_ops);
        return -1;
    }
    if (o->bad_fetches) {
        say("%s: %" PRIu64 " of %" PRIu64 " fetched values were wrong", b->name, o->bad_fetches,
            o->atomic_ops);
        return -1;
    }
    return 0;
}

static int connect_to_target(struct origin *o)
{
    struct endpoint *e = o->e;
    char *target_name = NULL, *name = NULL;
    uint64_t name_len;
    struct ctrl_msg m;
    size_t len;
    int ret = -1;

    if (read_all(o->reply_fd, &o->tgt, sizeof(o->tgt))) {
        say("target process failed during setup");
        goto out;
    }
    if (o->tgt.name_len == 0 || o->tgt.name_len > MAX_EP_NAME) {
        say("bad endpoint name length %" PRIu64, o->tgt.name_len);
        goto out;
    }
    target_name = malloc(o->tgt.name_len);
    if (!target_name || read_all(o->reply_fd, target_name, o->tgt.name_len))
        goto out;
    if (insert_peer(e, target_name, &o->peer))
        goto out;
    if (get_ep_name(e, &name, &len))
        goto out;
    name_len = len;
    if (write_all(o->cmd_fd, &name_len, sizeof(name_len)) || write_all(o->cmd_fd, name, len))
        goto out;
    if (recv_ctrl(o->reply_fd, &m, CMD_READY, "target"))
        goto out;
    ret = 0;
out:
    free(target_name);
    free(name);
    return ret;
}

/* *target_pid becomes -1 when the target had to be reaped on the way. */
static int run_origin(const struct options *opt, pid_t *target_pid, int cmd_fd, int reply_fd)
{
    struct endpoint e = { 0 };
    struct origin origin = { 0 }, *o = &origin;
    size_t atomic_off = atomic_area_offset(opt->max_size);
    int status = 1;
    int ret;

    o->opt = opt;
    o->e = &e;
    o->target_pid = *target_pid;
    o->cmd_fd = cmd_fd;
    o->reply_fd = reply_fd;

    ret = open_endpoint(opt, true, &e);
    if (ret == -FI_ENODATA) {
        if (opt->prov)
            say("provider %s not available", opt->prov);
        else
            say("no provider offers RDM endpoints with RMA and atomics");
        status = EXIT_NO_PROVIDER;
        goto out;
    }
    if (ret)
        goto out;
    if (opt->verbose)
        describe_info(e.info);

    ret = allocate_buffer(&e, atomic_off + 3 * sizeof(uint64_t), FI_READ | FI_WRITE, ORIGIN_MR_KEY,
                          false);
    if (ret)
        goto out;
    o->operand = (uint64_t *) (e.buf + atomic_off);
    o->compare = o->operand + 1;
    o->result = o->operand + 2;

    if (connect_to_target(o))
        goto out;

    for (size_t i = 0; i < NUM_BENCHES; i++) {
        if (!(opt->bench_mask & (1u << i)))
            continue;
        if (run_benchmark(o, &benches[i]))
            goto out;
    }
    if (send_ctrl(cmd_fd, CMD_QUIT, 0, 0))
        goto out;
    status = 0;
out:
    close_endpoint(&e);
    *target_pid = o->target_pid;
    return status;
}

/* --------------------------------------------------------------- options */

static void print_usage(FILE *f)
{
    fprintf(f,
            "usage: fi_bench [-p PROVIDER] [-t NAME[,NAME...]] [-m [MIN:]MAX]\n"
            "                [-i ITERS] [-w WARMUP] [-T SECS] [-S] [-M] [-v] [-h]\n"
            "\n"
            "Raw libfabric RMA/atomic baseline with btl/ofi's fi_info attributes.\n"
            "Forks itself: parent = origin (rank 0), child = target (rank 1).\n"
            "\n"
            "  -p PROVIDER  exact provider name, e.g. sockets, 'tcp;ofi_rxm',\n"
            "               shm, 'udp;ofi_rxd' (default: first that matches)\n"
            "  -t NAMES     comma-separated benchmarks (default: all):\n"
            "               put_lat get_lat put_bw get_bw put_rate\n"
            "               fop_lat cas_lat acc_lat\n"
            "  -m [MIN:]MAX message sizes, powers of two from MIN (default\n"
            "               1:4194304; suffixes k, m accepted); atomics use\n"
            "               8 bytes\n"
            "  -i ITERS     timed iterations (latency: operations; bw/rate:\n"
            "               windows of %d operations).  Default 1000 (100 above\n"
            "               64 KiB) for latency, 100 (20 above 64 KiB) windows\n"
            "               for bw/rate, cut short after %.2f s per size; the\n"
            "               sweep stops where one step would take over %.0f s\n"
            "  -w WARMUP    untimed iterations first (default 2000/10 latency,\n"
            "               10/2 windows bw/rate, cut short after %.2f s)\n"
            "  -T SECS      abort with an error after SECS seconds (default %d,\n"
            "               0 = never)\n"
            "  -S           spin only: never sched_yield() while polling (for\n"
            "               machines with a free core per process)\n"
            "  -M           ask for FI_THREAD_SAFE, as btl/ofi does under\n"
            "               MPI_THREAD_MULTIPLE (default FI_THREAD_DOMAIN)\n"
            "  -v           describe the provider's attributes on stderr\n"
            "  -h           this help\n"
            "\n"
            "Exit status: 0 success, 1 error or timeout, 2 provider not\n"
            "available.\n",
            WINDOW, POINT_TIME_CAP, STEP_TIME_LIMIT, WARMUP_TIME_CAP, DEFAULT_TIMEOUT);
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-')
        return -1;
    switch (*end) {
    case 'k':
    case 'K':
        v <<= 10;
        end++;
        break;
    case 'm':
    case 'M':
        v <<= 20;
        end++;
        break;
    default:
        break;
    }
    if (*end != '\0' || v == 0 || v > MAX_SIZE_LIMIT)
        return -1;
    *out = (size_t) v;
    return 0;
}

static int parse_long(const char *s, long min, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < min)
        return -1;
    *out = v;
    return 0;
}

static int parse_bench_list(const char *arg, unsigned *mask)
{
    char *copy = strdup(arg), *save = NULL, *tok;
    int ret = 0;

    if (!copy)
        return -1;
    *mask = 0;
    for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        size_t i;

        if (strcmp(tok, "all") == 0) {
            *mask |= (1u << NUM_BENCHES) - 1;
            continue;
        }
        for (i = 0; i < NUM_BENCHES; i++)
            if (strcmp(tok, benches[i].name) == 0)
                break;
        if (i == NUM_BENCHES) {
            fprintf(stderr, "fi_bench: unknown benchmark '%s'\n", tok);
            ret = -1;
            break;
        }
        *mask |= 1u << i;
    }
    free(copy);
    return *mask ? ret : -1;
}

/* Returns -1 to exit with an error, 1 to exit successfully (help). */
static int parse_options(int argc, char **argv, struct options *opt)
{
    long v;
    int c;

    *opt = (struct options){
        .bench_mask = (1u << NUM_BENCHES) - 1,
        .min_size = 1,
        .max_size = 4194304,
        .iters = -1,
        .warmup = -1,
        .timeout = DEFAULT_TIMEOUT,
    };
    while ((c = getopt(argc, argv, "p:t:m:i:w:T:SMvh")) != -1) {
        switch (c) {
        case 'p':
            opt->prov = optarg;
            break;
        case 't':
            if (parse_bench_list(optarg, &opt->bench_mask))
                return -1;
            opt->benches_explicit = strcmp(optarg, "all") != 0;
            break;
        case 'm': {
            char min_text[32];
            const char *colon = strchr(optarg, ':');
            if (colon) {
                size_t n = (size_t) (colon - optarg);
                if (n < sizeof(min_text)) {
                    memcpy(min_text, optarg, n);
                    min_text[n] = '\0';
                }
                if (n >= sizeof(min_text) || parse_size(min_text, &opt->min_size)
                    || parse_size(colon + 1, &opt->max_size)) {
                    fprintf(stderr, "fi_bench: bad -m value\n");
                    return -1;
                }
            } else if (parse_size(optarg, &opt->max_size)) {
                fprintf(stderr, "fi_bench: bad -m value\n");
                return -1;
            }
            if (opt->min_size > opt->max_size) {
                fprintf(stderr, "fi_bench: -m MIN is above MAX\n");
                return -1;
            }
            break;
        }
        case 'i':
            if (parse_long(optarg, 1, &opt->iters)) {
                fprintf(stderr, "fi_bench: -i needs a positive number\n");
                return -1;
            }
            break;
        case 'w':
            if (parse_long(optarg, 0, &opt->warmup)) {
                fprintf(stderr, "fi_bench: -w needs a number >= 0\n");
                return -1;
            }
            break;
        case 'T':
            if (parse_long(optarg, 0, &v) || v > 86400) {
                fprintf(stderr, "fi_bench: -T needs seconds (0..86400)\n");
                return -1;
            }
            opt->timeout = (unsigned) v;
            break;
        case 'S':
            opt->never_yield = true;
            break;
        case 'M':
            opt->threads = true;
            break;
        case 'v':
            opt->verbose = true;
            break;
        case 'h':
            print_usage(stdout);
            return 1;
        default:
            print_usage(stderr);
            return -1;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "fi_bench: unexpected argument '%s'\n", argv[optind]);
        print_usage(stderr);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ main */

static int wait_for_target(pid_t pid, bool kill_it)
{
    int wstatus;

    if (pid <= 0)
        return 1;
    if (kill_it)
        kill(pid, SIGKILL);
    while (waitpid(pid, &wstatus, 0) < 0)
        if (errno != EINTR)
            return 1;
    if (kill_it)
        return 1;
    if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)
        return 0;
    if (WIFEXITED(wstatus))
        say("target process exited with status %d", WEXITSTATUS(wstatus));
    else if (WIFSIGNALED(wstatus))
        say("target process killed by signal %d", WTERMSIG(wstatus));
    return 1;
}

int main(int argc, char **argv)
{
    struct options opt;
    int to_target[2], to_origin[2];
    pid_t parent = getpid(), pid;
    int ret;

    ret = parse_options(argc, argv, &opt);
    if (ret)
        return ret > 0 ? 0 : 1;

    /* A dead peer must show up as EPIPE, not kill us silently. */
    signal(SIGPIPE, SIG_IGN);
    if (pipe(to_target) || pipe(to_origin)) {
        say("pipe: %s", strerror(errno));
        return 1;
    }
    /* Nothing may sit in stdio buffers at fork time, or it prints twice. */
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) {
        say("fork: %s", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        log_tag = "fi_bench (target)";
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        close(to_target[1]);
        close(to_origin[0]);
        /* Backstop only: the origin's own alarm fires first. */
        arm_timeout(opt.timeout ? opt.timeout + 10 : 0);
        ret = run_target(&opt, to_target[0], to_origin[1]);
        exit(ret);
    }
    close(to_target[0]);
    close(to_origin[1]);
    arm_timeout(opt.timeout);

    ret = run_origin(&opt, &pid, to_target[1], to_origin[0]);
    close(to_target[1]);
    close(to_origin[0]);
    if (ret) {
        /* Already failed; the target may be blocked on a pipe or polling. */
        wait_for_target(pid, true);
        return ret;
    }
    return wait_for_target(pid, false);
}
