/*
 * Helpers shared by osc_bench and p2p_bench; see mpi_bench_util.h.
 */
#define _GNU_SOURCE

#include "mpi_bench_util.h"
#include "btl_ofi_pvars.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void bench_common_defaults(struct bench_common_opts *o)
{
    o->iters = 0;
    o->warmup = -1;
    o->time_cap = -1;
    o->quick = false;
    o->timeout = BENCH_DEFAULT_TIMEOUT;
}

int bench_parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s)
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
    if (*end != '\0' || v > BENCH_MAX_SIZE_LIMIT)
        return -1;
    *out = (size_t) v;
    return 0;
}

int bench_parse_range(const char *s, size_t *min, size_t *max)
{
    const char *colon = strchr(s, ':');

    if (!colon)
        return bench_parse_size(s, max);
    char first[64];
    size_t n = (size_t) (colon - s);
    if (n == 0 || n >= sizeof(first))
        return -1;
    memcpy(first, s, n);
    first[n] = '\0';
    if (bench_parse_size(first, min) || bench_parse_size(colon + 1, max))
        return -1;
    return *min <= *max ? 0 : -1;
}

long bench_parse_count(const char *arg, const char *prog, char opt, long lowest)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(arg, &end, 10);
    if (errno || end == arg || *end != '\0' || v < lowest) {
        fprintf(stderr, "%s: bad value for -%c: %s\n", prog, opt, arg);
        exit(2);
    }
    return v;
}

bool bench_common_option(struct bench_common_opts *o, int opt, const char *arg, const char *prog)
{
    switch (opt) {
    case 'i':
        o->iters = bench_parse_count(arg, prog, 'i', 1);
        return true;
    case 'w':
        o->warmup = bench_parse_count(arg, prog, 'w', 0);
        return true;
    case 'c': {
        char *end;
        o->time_cap = strtod(arg, &end);
        if (end == arg || *end != '\0' || o->time_cap < 0) {
            fprintf(stderr, "%s: bad value for -c: %s\n", prog, arg);
            exit(2);
        }
        return true;
    }
    case 'q':
        o->quick = true;
        return true;
    case 'T':
        o->timeout = (int) bench_parse_count(arg, prog, 'T', 0);
        return true;
    default:
        return false;
    }
}

void bench_plan_for(const struct bench_common_opts *o, enum bench_kind kind, size_t size,
                    struct bench_plan *plan)
{
    bool large = size > BENCH_LARGE_MSG;

    if (kind == BENCH_LATENCY) {
        plan->iters = o->quick ? (large ? 20 : 100) : (large ? 100 : 1000);
        /* A launch's first small row came out 30 % slow after 100 warm-up
         * operations on shm (1.45 us against 1.1 us after 1000-10000),
         * every implementation alike: the warm-up cap bounds the longer one. */
        plan->warmup = o->quick ? (large ? 2 : 200) : (large ? 10 : BENCH_LATENCY_WARMUP);
    } else {
        /* Counted in windows of BENCH_WINDOW operations, as OSU does. */
        plan->iters = o->quick ? (large ? 4 : 10) : (large ? 20 : 100);
        plan->warmup = o->quick ? 1 : (large ? 2 : 10);
    }
    plan->timed_cap = o->time_cap < 0 ? BENCH_POINT_TIME_CAP : o->time_cap;
    plan->warmup_cap = o->time_cap < 0 ? BENCH_WARMUP_TIME_CAP : o->time_cap / 2;
    /* Counts the user asked for are honoured exactly. */
    if (o->iters > 0) {
        plan->iters = o->iters;
        plan->timed_cap = 0;
    }
    if (o->warmup >= 0) {
        plan->warmup = o->warmup;
        plan->warmup_cap = 0;
    }
}

void bench_sizes_range(struct bench_sizes *out, size_t min, size_t max)
{
    out->n = 0;
    if (min == 0) {
        out->v[out->n++] = 0;
        min = 1;
    }
    for (size_t size = min; size <= max && out->n < BENCH_MAX_SIZES; size *= 2) {
        out->v[out->n++] = size;
        if (size > SIZE_MAX / 2)
            break;
    }
}

int bench_parse_sizes(const char *s, struct bench_sizes *out)
{
    char buf[512], *save = NULL, *tok;

    if (!strchr(s, ',')) {
        size_t min = 1, max;
        if (bench_parse_range(s, &min, &max))
            return -1;
        bench_sizes_range(out, min, max);
        return out->n > 0 ? 0 : -1;
    }
    if (strlen(s) >= sizeof(buf))
        return -1;
    strcpy(buf, s);
    out->n = 0;
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (out->n == BENCH_MAX_SIZES || bench_parse_size(tok, &out->v[out->n]))
            return -1;
        out->n++;
    }
    return out->n > 0 ? 0 : -1;
}

size_t bench_sizes_max(const struct bench_sizes *s)
{
    size_t max = 0;
    for (int i = 0; i < s->n; i++)
        if (s->v[i] > max)
            max = s->v[i];
    return max;
}

static inline unsigned char pattern_byte(size_t i, unsigned seed)
{
    /* Varies with the offset so that misplaced or truncated transfers show,
     * and with the seed so that stale data from an earlier size shows. */
    return (unsigned char) ((i * 131u + (i >> 8) * 7u + seed * 29u + 1u) & 0xff);
}

void bench_fill_pattern(void *buf, size_t len, unsigned seed)
{
    unsigned char *p = buf;
    for (size_t i = 0; i < len; i++)
        p[i] = pattern_byte(i, seed);
}

size_t bench_check_pattern(const void *buf, size_t len, unsigned seed)
{
    const unsigned char *p = buf;
    for (size_t i = 0; i < len; i++)
        if (p[i] != pattern_byte(i, seed))
            return i + 1;
    return 0;
}

static const char *watchdog_what = "benchmark";

static void watchdog_fired(int sig)
{
    char msg[160];
    int n;

    (void) sig;
    n = snprintf(msg, sizeof(msg), "%s: watchdog: no completion in time, aborting\n",
                 watchdog_what);
    if (n > 0)
        (void) !write(STDERR_FILENO, msg, (size_t) n);
    /* Exiting without MPI_Finalize makes the launcher tear the job down. */
    _exit(124);
}

void bench_arm_watchdog(int seconds, const char *what)
{
    if (seconds <= 0)
        return;
    watchdog_what = what;
    signal(SIGALRM, watchdog_fired);
    alarm((unsigned) seconds);
}

/* Open MPI reports a counter through a handle as the increase since the
 * handle was allocated, so the handles are allocated before any traffic
 * (tests/common/btl_ofi_pvars.c). */
void bench_pvars_begin(void)
{
    (void) btl_ofi_pvars_open();
}

/* Fills values[] with the counters' growth since the handles were
 * allocated and returns how many counters exist in this process. */
static int read_btl_ofi_pvars(unsigned long long values[BTL_OFI_PVARS_NUM_STANDARD])
{
    int found = 0;

    for (int i = 0; i < BTL_OFI_PVARS_NUM_STANDARD; i++) {
        unsigned long value = 0;

        values[i] = 0;
        if (btl_ofi_pvars_read(btl_ofi_pvars_standard[i], &value) == 0) {
            values[i] = value;
            found++;
        }
    }
    return found;
}

void bench_pvars_end(void)
{
    btl_ofi_pvars_close();
}

/* What the progress threads did during the test, all ranks together: how
 * often they looked, stepped in for a context the application had left,
 * and were woken (the findings of docs/design.md, "Progress"). */
static void report_thread_pvars(int rank, bool print, MPI_Comm comm)
{
    enum { N = 4 };
    static const char *const names[N] = { "look_count", "step_in_count", "wake_sent_count",
                                          "wake_recv_count" };
    static long reported[N];
    long now[N], delta[N], total[N];

    for (int i = 0; i < N; i++) {
        now[i] = btl_ofi_pvars_get(names[i]);
        delta[i] = now[i] < 0 ? 0 : now[i] - reported[i];
        reported[i] = now[i] < 0 ? 0 : now[i];
    }
    MPI_Reduce(delta, total, N, MPI_LONG, MPI_SUM, 0, comm);
    if (rank == 0 && print)
        printf("# btl_ofi threads (sum over ranks): looks %ld, step-ins %ld, wake-ups sent %ld, "
               "received %ld\n",
               total[0], total[1], total[2], total[3]);
}

void bench_report_btl_ofi_pvars(MPI_Comm comm)
{
    enum { N = BTL_OFI_PVARS_NUM_STANDARD };
    static unsigned long long reported[N];
    unsigned long long now[N], delta[N], total[N];
    int rank, found, min_found;

    MPI_Comm_rank(comm, &rank);
    found = read_btl_ofi_pvars(now);
    for (int i = 0; i < N; i++) {
        delta[i] = now[i] - reported[i];
        reported[i] = now[i];
    }
    MPI_Reduce(delta, total, N, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, comm);
    MPI_Reduce(&found, &min_found, 1, MPI_INT, MPI_MIN, 0, comm);
    if (rank != 0) {
        report_thread_pvars(rank, false, comm);
        return;
    }
    if (min_found == 0) {
        printf("# btl_ofi pvars: absent\n");
    } else {
        printf("# btl_ofi pvars (sum over ranks):");
        for (int i = 0; i < N; i++)
            printf(" %s=%llu", btl_ofi_pvars_standard[i], total[i]);
        printf("\n");
    }
    report_thread_pvars(rank, min_found > 0, comm);
    fflush(stdout);
}

static const char *const look_counter_names[BENCH_LOOK_COUNTERS] = {
    "look_count", "look_timer_count", "look_woken_count", "look_late_count", "nudge_count",
};

void bench_look_counters_read(bench_look_counters_t *now)
{
    for (int i = 0; i < BENCH_LOOK_COUNTERS; i++)
        now->values[i] = btl_ofi_pvars_get(look_counter_names[i]);
}

void bench_report_look_counters(const char *name, const bench_look_counters_t *before,
                                const bench_look_counters_t *after, bool mine, MPI_Comm comm)
{
    long grew[BENCH_LOOK_COUNTERS + 1], total[BENCH_LOOK_COUNTERS + 1];
    int rank;

    /* the last slot counts the targets whose counters are missing */
    grew[BENCH_LOOK_COUNTERS] = 0;
    for (int i = 0; i < BENCH_LOOK_COUNTERS; i++) {
        bool absent = before->values[i] < 0 || after->values[i] < 0;

        grew[i] = mine && !absent ? after->values[i] - before->values[i] : 0;
        grew[BENCH_LOOK_COUNTERS] |= mine && absent;
    }
    MPI_Comm_rank(comm, &rank);
    MPI_Reduce(grew, total, BENCH_LOOK_COUNTERS + 1, MPI_LONG, MPI_SUM, 0, comm);
    if (rank != 0 || total[BENCH_LOOK_COUNTERS] > 0)
        return;
    printf("# %s target thread: looks %ld (timer %ld, woken %ld), late %ld, nudges %ld\n", name,
           total[0], total[1], total[2], total[3], total[4]);
    fflush(stdout);
}

void *bench_alloc(size_t len)
{
    void *p = NULL;
    /* Page aligned like OSU's buffers, and never zero bytes. */
    if (posix_memalign(&p, 4096, len ? len : 1))
        return NULL;
    memset(p, 0, len ? len : 1);
    return p;
}

void bench_print_row(size_t size, double value)
{
    printf(value < 10 ? "%-10zu%20.4f\n" : "%-10zu%20.2f\n", size, value);
    fflush(stdout);
}

int bench_layout_init(struct bench_layout *l, enum bench_pattern pattern, const char *prog)
{
    memset(l, 0, sizeof(*l));
    l->pattern = pattern;
    MPI_Comm_rank(MPI_COMM_WORLD, &l->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &l->nranks);
    if (l->nranks < 2) {
        if (l->rank == 0)
            fprintf(stderr, "%s: needs at least 2 ranks, got %d\n", prog, l->nranks);
        return -1;
    }
    if (pattern == BENCH_MANY_TO_ONE) {
        l->peer = l->rank == 0 ? -1 : 0;
        l->origins = l->nranks - 1;
        return 0;
    }
    if (l->nranks % 2) {
        if (l->rank == 0)
            fprintf(stderr,
                    "%s: pairs need an even number of ranks, got %d "
                    "(-M runs many-to-one)\n",
                    prog, l->nranks);
        return -1;
    }
    int half = l->nranks / 2;
    l->peer = l->rank < half ? l->rank + half : l->rank - half;
    l->origins = half;
    return 0;
}

bool bench_layout_is_origin(const struct bench_layout *l)
{
    if (l->pattern == BENCH_MANY_TO_ONE)
        return l->rank != 0;
    return l->rank < l->nranks / 2;
}

const char *bench_layout_words(const struct bench_layout *l, char *buf, size_t len)
{
    if (l->pattern == BENCH_MANY_TO_ONE)
        snprintf(buf, len, "ranks=%d many-to-one (ranks 1-%d to rank 0)", l->nranks, l->nranks - 1);
    else if (l->nranks == 2)
        snprintf(buf, len, "ranks=2");
    else
        snprintf(buf, len, "ranks=%d pairs=%d (rank i with rank i+%d)", l->nranks, l->nranks / 2,
                 l->nranks / 2);
    return buf;
}

void bench_summarise(double value, bool timed, enum bench_kind kind, MPI_Comm comm,
                     struct bench_summary *out)
{
    /* one gather to rank 0 (the only rank that prints), so that the
     * collectives around the timed loops stay few */
    double mine[2] = { timed ? value : 0, timed ? 1 : 0 }, *all = NULL, sum = 0;
    int rank, nranks;

    memset(out, 0, sizeof(*out));
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &nranks);
    if (rank == 0)
        all = malloc(sizeof(mine) * (size_t) nranks);
    MPI_Gather(mine, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, 0, comm);
    if (rank != 0)
        return;
    for (int r = 0; all && r < nranks; r++) {
        double v = all[2 * r];
        if (all[2 * r + 1] == 0)
            continue;
        if (out->n == 0 || v < out->min)
            out->min = v;
        if (out->n == 0 || v > out->max)
            out->max = v;
        sum += v;
        out->n++;
    }
    free(all);
    out->mean = out->n ? sum / out->n : 0;
    out->row = kind == BENCH_LATENCY ? out->mean : sum;
}

void bench_print_combination(enum bench_kind kind, int timing_ranks, const char *whose)
{
    if (timing_ranks <= 1)
        return;
    printf("# each row: the %s over the %d %s, each timed on its own; "
           "'# per-origin' lines: min, mean and max of them\n",
           kind == BENCH_LATENCY ? "mean" : "sum", timing_ranks, whose);
}

void bench_print_spread(size_t size, const struct bench_summary *s)
{
    if (s->n <= 1)
        return;
    printf("# per-origin %zu: min %.4f mean %.4f max %.4f (%d origins)\n", size, s->min, s->mean,
           s->max, s->n);
    fflush(stdout);
}
