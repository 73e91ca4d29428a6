/*
 * osc_bench: MPI one-sided benchmarks in the manner of the OSU
 * micro-benchmarks, for comparing btl/ofi with upstream's and with raw
 * libfabric (bench/fi_bench.c).
 *
 *   osc_bench -t TEST[,TEST...] [-m [MIN:]MAX | -m A,B,...]
 *             [-f create|allocate|dynamic] [-i ITERS] [-w WARMUP] [-c CAP]
 *             [-q] [-T SECS] [-M]
 *
 * Two ranks: rank 0 is the origin and does all timing; rank 1 is the
 * target and waits in MPI_Barrier, which is where it drives progress, as a
 * passive target in OSU's lock_all mode does.  put_bibw makes both ranks
 * origins of each other.  The busy_* tests keep the target out of MPI:
 * it computes until the origin, done, puts a flag into its window, and the
 * value is the 99th percentile of the origin's operation latencies (a
 * '#' line gives the median and the slowest); a target that reached its
 * cap before the flag came gives a "target capped" line and no row, as
 * its origin's operations were then served by a target in MPI (a
 * transport whose operations need the target's progress and has none,
 * or an origin that counts an operation done before the target has
 * it).  Every result is checked
 * (data patterns, atomic counters and fetched values): a fast but wrong
 * transport must not pass.
 *
 * More ranks, an even number N: rank i and rank i + N/2 are a pair (i the
 * origin), and all pairs run every test at once, each origin timing its
 * own operations to its own target.  -M (many-to-one): every rank but 0 is
 * an origin and rank 0 the target of all; puts land in a slot of rank 0's
 * window per origin, atomics all work on one counter.  A row is then the
 * mean of the origins' latencies, or the sum of their bandwidths or rates,
 * and a '# per-origin' line after it gives their min, mean and max.
 * -p K: only the first K pairs time; the other ranks are bystanders that
 * do no operation and wait for the pairs asleep, the way ranks on other
 * hosts use cores of their own (simulated hosts share this machine's).
 *
 * stdout, per test: '#' header lines, one "size value" line per message
 * size, then a '#' line with how much btl/ofi's MPI_T counters grew during
 * the test (or "absent" under upstream).  Several tests in one launch save
 * the start-up cost of a job, which dominates quick comparisons.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "mpi_bench_util.h"

enum osc_op { OP_PUT, OP_GET, OP_ACC, OP_GACC, OP_FOP, OP_CAS };
enum win_flavour { WIN_CREATE, WIN_ALLOCATE, WIN_DYNAMIC };

struct test_desc {
    const char *name;
    enum osc_op op;
    enum bench_kind kind;
    bool both_ranks_origin;
    const char *what;
    bool busy_target; /* the target computes outside MPI meanwhile */
};

static const struct test_desc tests[] = {
    { "put_lat", OP_PUT, BENCH_LATENCY, false, "MPI_Put + MPI_Win_flush latency", false },
    { "get_lat", OP_GET, BENCH_LATENCY, false, "MPI_Get + MPI_Win_flush latency", false },
    { "put_bw", OP_PUT, BENCH_BANDWIDTH, false, "MPI_Put bandwidth, 64 per flush", false },
    { "get_bw", OP_GET, BENCH_BANDWIDTH, false, "MPI_Get bandwidth, 64 per flush", false },
    { "put_bibw", OP_PUT, BENCH_BANDWIDTH, true, "MPI_Put bidirectional bandwidth, 64 per flush",
      false },
    { "put_rate", OP_PUT, BENCH_RATE, false, "MPI_Put message rate, 64 per flush", false },
    { "acc_lat", OP_ACC, BENCH_LATENCY, false, "MPI_Accumulate(SUM, int64) + MPI_Win_flush latency",
      false },
    { "gacc_lat", OP_GACC, BENCH_LATENCY, false,
      "MPI_Get_accumulate(SUM, int64) + MPI_Win_flush latency", false },
    { "fop_lat", OP_FOP, BENCH_LATENCY, false,
      "MPI_Fetch_and_op(SUM, int64) + MPI_Win_flush latency", false },
    { "cas_lat", OP_CAS, BENCH_LATENCY, false,
      "MPI_Compare_and_swap(int64) + MPI_Win_flush latency", false },
    { "busy_put_lat", OP_PUT, BENCH_LATENCY, false,
      "MPI_Put + MPI_Win_flush, 99th percentile, target computing", true },
    { "busy_get_lat", OP_GET, BENCH_LATENCY, false,
      "MPI_Get + MPI_Win_flush, 99th percentile, target computing", true },
    { "busy_fop_lat", OP_FOP, BENCH_LATENCY, false,
      "MPI_Fetch_and_op(SUM, int64) + MPI_Win_flush, 99th percentile, target computing", true },
};

/* Operations a busy-target test times at most, and how long the target
 * computes at most when the flag never comes. */
#define BUSY_MAX_OPS  2000
#define BUSY_MAX_SECS 5.0
/* measure_busy's answer when a target never saw the flag */
#define BUSY_TARGET_CAPPED (-2.0)
#define NUM_TESTS          (sizeof(tests) / sizeof(tests[0]))

static const char *const flavour_names[] = { "create", "allocate", "dynamic" };

struct options {
    bool selected[NUM_TESTS];
    struct bench_sizes sizes;
    enum win_flavour flavour;
    enum bench_pattern pattern;
    int window;      /* operations per flush of the bandwidth and rate tests */
    int pairs_timed; /* -p: pairs that time, the others sleep (0: all) */
    struct bench_common_opts common;
};

struct osc_state {
    const struct options *opt;
    const struct test_desc *t;
    struct bench_layout lay;
    int rank, peer;
    bool bystander; /* -p: neither origin nor target, waits asleep */
    MPI_Win win;
    unsigned char *win_buf;    /* this rank's exposed memory */
    unsigned char *origin_buf; /* source of puts, destination of gets */
    MPI_Aint peer_base;        /* displacement of the peer's window memory */
    MPI_Aint data_disp;        /* where this origin's puts and gets land */
    MPI_Aint *bases;           /* every rank's window base (dynamic windows) */
    size_t win_len;            /* bytes of data per slot (a flag may follow) */
    int slots;                 /* data slots in this rank's window */
    /* Atomics: the counter at the target starts at 0 and every operation
     * adds one, so each fetched value is predictable (pairs), or all the
     * values fetched from it are distinct (many-to-one: they are kept in
     * fetched[] and checked together afterwards). */
    int64_t one, compare, swap, result;
    int64_t atomic_ops;
    int64_t bad_fetches;
    int64_t *ops_by_rank; /* every rank's atomic_ops, for the target's check */
    int64_t *fetched;
    long fetched_cap;
};

static bool is_atomic(const struct test_desc *t)
{
    return t->op != OP_PUT && t->op != OP_GET;
}

static bool many_to_one(const struct osc_state *st)
{
    return st->lay.pattern == BENCH_MANY_TO_ONE;
}

static bool is_origin(const struct osc_state *st)
{
    return !st->bystander && (bench_layout_is_origin(&st->lay) || st->t->both_ranks_origin);
}

static bool is_target(const struct osc_state *st)
{
    return !st->bystander && (!bench_layout_is_origin(&st->lay) || st->t->both_ranks_origin);
}

/* The barriers around the timed loops.  With -p every rank takes the
 * nonblocking one (a blocking and a nonblocking barrier do not match),
 * and a bystander polls it between sleeps so that the timing pairs have
 * the cores; the pairs wait in MPI as before. */
static void wait_for_all(const struct osc_state *st)
{
    MPI_Request req;
    int done = 0;

    if (st->opt->pairs_timed == 0) {
        MPI_Barrier(MPI_COMM_WORLD);
        return;
    }
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    if (!st->bystander) {
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        return;
    }
    for (;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        usleep(1000);
    }
}

/* Many origins on one target: puts get a slot each and atomics share the
 * counter.  put_bibw has no one direction, the target of busy_* computes
 * for one origin's flag, and compare-and-swap from several origins would
 * mostly fail and need retries that are not what cas_lat measures. */
static bool many_to_one_supports(const struct test_desc *t)
{
    return !t->both_ranks_origin && !t->busy_target && t->op != OP_CAS;
}

static bool fetches(const struct test_desc *t)
{
    return t->op == OP_GACC || t->op == OP_FOP || t->op == OP_CAS;
}

static void print_usage(FILE *f)
{
    fprintf(f,
            "usage: osc_bench -t TEST[,TEST...] [-m [MIN:]MAX | -m A,B,...]\n"
            "                 [-f create|allocate|dynamic] [-i ITERS] [-w WARMUP]\n"
            "                 [-c CAP] [-q] [-T SECS] [-M] [-p PAIRS] [-h]\n"
            "\n"
            "MPI one-sided benchmarks, OSU style.  2 ranks: 0 origin, 1 target; an\n"
            "even number N: pairs of rank i (origin) and i+N/2 (target), all at once.\n"
            "  -t TESTS  comma-separated, or all: put_lat get_lat put_bw get_bw\n"
            "            put_bibw put_rate acc_lat gacc_lat fop_lat cas_lat\n"
            "  -m        message sizes: powers of two from MIN to MAX (default\n"
            "            1:4m), or a list; suffixes k, m; atomics always use 8\n"
            "  -f        window flavour (default create; on one node osc/rdma serves\n"
            "            allocate windows through shared memory, not a BTL)\n"
            "  -i ITERS  timed iterations (latency: operations, bw/rate: windows of\n"
            "            %d); default 1000/100 (latency), 100/20 windows (bw), the\n"
            "            second above 64 KiB, cut short after %.2f s per size\n"
            "  -w WARMUP untimed iterations first (default 2000/10, 10/2 windows)\n"
            "  -c CAP    seconds per size before the timed loop is cut short\n"
            "            (0 = never; ignored with -i)\n"
            "  -q        quick: a tenth of the default iterations\n"
            "  -T SECS   abort the job after SECS seconds (default %d, 0 = never)\n"
            "  -M        many-to-one: ranks 1..N-1 all target rank 0 (put_lat get_lat\n"
            "            put_bw get_bw put_rate acc_lat gacc_lat fop_lat)\n"
            "  -p PAIRS  only the first PAIRS pairs time; the other ranks do nothing\n"
            "            and wait asleep, as ranks of other hosts would on cores of\n"
            "            their own (pairs only)\n"
            "  -W OPS    operations per flush of put_bw, get_bw, put_bibw, put_rate\n"
            "            (default %d: large sizes over slow links take fewer)\n"
            "Rows with several origins: latency is the mean over them, bandwidth\n"
            "and rate the sum; a '# per-origin' line gives min, mean and max.\n",
            BENCH_WINDOW, BENCH_POINT_TIME_CAP, BENCH_DEFAULT_TIMEOUT, BENCH_WINDOW);
}

static int select_tests(const char *list, struct options *opt)
{
    char buf[256], *save = NULL, *tok;

    if (strlen(list) >= sizeof(buf))
        return -1;
    strcpy(buf, list);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        bool found = false;
        for (size_t i = 0; i < NUM_TESTS; i++) {
            if (strcmp(tok, "all") == 0 || strcmp(tok, tests[i].name) == 0) {
                opt->selected[i] = true;
                found = true;
            }
        }
        if (!found) {
            fprintf(stderr, "osc_bench: unknown test %s\n", tok);
            return -1;
        }
    }
    return 0;
}

static int parse_options(int argc, char **argv, struct options *opt)
{
    bool any = false;
    int c;

    memset(opt, 0, sizeof(*opt));
    bench_sizes_range(&opt->sizes, 1, (size_t) 4 << 20);
    opt->flavour = WIN_CREATE;
    bench_common_defaults(&opt->common);

    opt->pattern = BENCH_PAIRS;
    opt->window = BENCH_WINDOW;

    while ((c = getopt(argc, argv, "t:m:f:i:w:c:qT:Mp:W:h")) != -1) {
        if (bench_common_option(&opt->common, c, optarg, "osc_bench"))
            continue;
        switch (c) {
        case 't':
            if (select_tests(optarg, opt))
                return -1;
            break;
        case 'm':
            if (bench_parse_sizes(optarg, &opt->sizes)) {
                fprintf(stderr, "osc_bench: bad sizes %s\n", optarg);
                return -1;
            }
            break;
        case 'f': {
            bool found = false;
            for (int i = 0; i < 3; i++) {
                if (strcmp(optarg, flavour_names[i]) == 0) {
                    opt->flavour = (enum win_flavour) i;
                    found = true;
                }
            }
            if (!found) {
                fprintf(stderr, "osc_bench: unknown window flavour %s\n", optarg);
                return -1;
            }
            break;
        }
        case 'M':
            opt->pattern = BENCH_MANY_TO_ONE;
            break;
        case 'p':
            opt->pairs_timed = (int) bench_parse_count(optarg, "osc_bench", 'p', 1);
            break;
        case 'W':
            opt->window = (int) bench_parse_count(optarg, "osc_bench", 'W', 1);
            break;
        case 'h':
            print_usage(stdout);
            exit(0);
        default:
            print_usage(stderr);
            return -1;
        }
    }
    for (size_t i = 0; i < NUM_TESTS; i++)
        any |= opt->selected[i];
    if (!any || optind != argc) {
        print_usage(stderr);
        return -1;
    }
    if (opt->pairs_timed && opt->pattern == BENCH_MANY_TO_ONE) {
        fprintf(stderr, "osc_bench: -p picks pairs; it does not go with -M\n");
        return -1;
    }
    for (size_t i = 0; i < NUM_TESTS && opt->pattern == BENCH_MANY_TO_ONE; i++) {
        if (opt->selected[i] && !many_to_one_supports(&tests[i])) {
            fprintf(stderr,
                    "osc_bench: -M (many-to-one) does not run %s; it runs put_lat get_lat "
                    "put_bw get_bw put_rate acc_lat gacc_lat fop_lat\n",
                    tests[i].name);
            return -1;
        }
    }
    return 0;
}

static int create_window(struct osc_state *st, size_t len)
{
    const struct options *opt = st->opt;
    int rc;

    switch (opt->flavour) {
    case WIN_CREATE:
        st->win_buf = bench_alloc(len);
        if (!st->win_buf)
            return -1;
        rc =
            MPI_Win_create(st->win_buf, (MPI_Aint) len, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &st->win);
        break;
    case WIN_ALLOCATE:
        rc = MPI_Win_allocate((MPI_Aint) len, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &st->win_buf,
                              &st->win);
        if (rc == MPI_SUCCESS)
            memset(st->win_buf, 0, len);
        break;
    case WIN_DYNAMIC: {
        MPI_Aint mine;
        st->win_buf = bench_alloc(len);
        if (!st->win_buf)
            return -1;
        rc = MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &st->win);
        if (rc == MPI_SUCCESS)
            rc = MPI_Win_attach(st->win, st->win_buf, (MPI_Aint) len);
        if (rc != MPI_SUCCESS)
            break;
        /* Dynamic windows are addressed by absolute address; every rank
         * learns all of them, since rank 0 of many-to-one has no one peer. */
        MPI_Get_address(st->win_buf, &mine);
        rc = MPI_Allgather(&mine, 1, MPI_AINT, st->bases, 1, MPI_AINT, MPI_COMM_WORLD);
        break;
    }
    default:
        return -1;
    }
    st->peer_base = 0;
    if (opt->flavour == WIN_DYNAMIC && st->peer >= 0)
        st->peer_base = st->bases[st->peer];
    return rc == MPI_SUCCESS ? 0 : -1;
}

static void free_window(struct osc_state *st)
{
    if (st->opt->flavour == WIN_DYNAMIC)
        MPI_Win_detach(st->win, st->win_buf);
    MPI_Win_free(&st->win);
    if (st->opt->flavour != WIN_ALLOCATE)
        free(st->win_buf);
}

/* Local loads and stores to the exposed memory happen inside an exclusive
 * self-lock epoch so that they are ordered with the RMA traffic. */
static void lock_self(struct osc_state *st)
{
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, st->rank, 0, st->win);
}

static void unlock_self(struct osc_state *st)
{
    MPI_Win_unlock(st->rank, st->win);
}

static unsigned pattern_seed(size_t size, int writer)
{
    return (unsigned) (size * 2 + (size_t) writer);
}

static void check_fetched(struct osc_state *st, int64_t expected)
{
    if (st->result != expected) {
        if (st->bad_fetches == 0)
            fprintf(stderr,
                    "osc_bench: %s: op %" PRId64 " fetched %" PRId64 ", expected %" PRId64 "\n",
                    st->t->name, st->atomic_ops, st->result, expected);
        st->bad_fetches++;
    }
}

/* Pairs: an origin alone adds to its target's counter, so what it fetches
 * is how many operations it did before.  Many-to-one: the origins' values
 * interleave; they are kept and checked together after the size. */
static void note_fetched(struct osc_state *st, int64_t before)
{
    if (!many_to_one(st)) {
        check_fetched(st, before);
        return;
    }
    if (before < st->fetched_cap)
        st->fetched[before] = st->result;
    else
        st->bad_fetches++; /* more operations than the plan allowed for */
}

static void post_atomic(struct osc_state *st)
{
    MPI_Aint disp = st->peer_base;
    int64_t before = st->atomic_ops;

    switch (st->t->op) {
    case OP_ACC:
        MPI_Accumulate(&st->one, 1, MPI_INT64_T, st->peer, disp, 1, MPI_INT64_T, MPI_SUM, st->win);
        MPI_Win_flush(st->peer, st->win);
        break;
    case OP_GACC:
        MPI_Get_accumulate(&st->one, 1, MPI_INT64_T, &st->result, 1, MPI_INT64_T, st->peer, disp, 1,
                           MPI_INT64_T, MPI_SUM, st->win);
        MPI_Win_flush(st->peer, st->win);
        note_fetched(st, before);
        break;
    case OP_FOP:
        MPI_Fetch_and_op(&st->one, &st->result, MPI_INT64_T, st->peer, disp, MPI_SUM, st->win);
        MPI_Win_flush(st->peer, st->win);
        note_fetched(st, before);
        break;
    case OP_CAS:
        st->compare = before;
        st->swap = before + 1;
        MPI_Compare_and_swap(&st->swap, &st->compare, &st->result, MPI_INT64_T, st->peer, disp,
                             st->win);
        MPI_Win_flush(st->peer, st->win);
        note_fetched(st, before);
        break;
    default:
        break;
    }
    st->atomic_ops++;
}

/* One latency step is an operation and its flush; one bandwidth or rate
 * step is BENCH_WINDOW operations and one flush. */
static void one_step(struct osc_state *st, size_t size)
{
    int ops = st->t->kind == BENCH_LATENCY ? 1 : st->opt->window;

    if (is_atomic(st->t)) {
        post_atomic(st);
        return;
    }
    for (int i = 0; i < ops; i++) {
        if (st->t->op == OP_PUT)
            MPI_Put(st->origin_buf, (int) size, MPI_BYTE, st->peer, st->data_disp, (int) size,
                    MPI_BYTE, st->win);
        else
            MPI_Get(st->origin_buf, (int) size, MPI_BYTE, st->peer, st->data_disp, (int) size,
                    MPI_BYTE, st->win);
    }
    MPI_Win_flush(st->peer, st->win);
}

/* Runs up to `count` steps, stopping early once `cap` seconds are spent
 * (cap 0: never); at least one step when count > 0. */
static long run_steps(struct osc_state *st, size_t size, long count, double cap, double *secs)
{
    double t0 = MPI_Wtime(), now = t0;
    long done = 0;

    while (done < count) {
        one_step(st, size);
        done++;
        now = MPI_Wtime();
        if (cap > 0 && now - t0 >= cap)
            break;
    }
    *secs = now - t0;
    return done;
}

static void prepare_size(struct osc_state *st, size_t size)
{
    const struct test_desc *t = st->t;

    if (is_target(st)) {
        lock_self(st);
        if (is_atomic(t))
            memset(st->win_buf, 0, sizeof(int64_t));
        else if (t->op == OP_PUT)
            for (int slot = 0; slot < st->slots; slot++)
                memset(st->win_buf + (size_t) slot * st->win_len, 0, size);
        else
            bench_fill_pattern(st->win_buf, size, pattern_seed(size, st->rank));
        unlock_self(st);
    }
    if (is_origin(st) && !is_atomic(t)) {
        if (t->op == OP_PUT)
            bench_fill_pattern(st->origin_buf, size, pattern_seed(size, st->rank));
        else
            memset(st->origin_buf, 0, size);
    }
    st->atomic_ops = 0;
    st->bad_fetches = 0;
}

/* How many operations the counter at this target must have seen: its
 * partner's (pairs), or all origins' together (many-to-one). */
static int64_t expected_counter(const struct osc_state *st)
{
    int64_t total = 0;

    if (!many_to_one(st))
        return st->ops_by_rank[st->peer];
    for (int r = 0; r < st->lay.nranks; r++)
        total += st->ops_by_rank[r];
    return total;
}

/* On a target; returns 1 when its counter is wrong. */
static int check_counter(struct osc_state *st)
{
    int64_t counter, expected = expected_counter(st);

    lock_self(st);
    memcpy(&counter, st->win_buf, sizeof(counter));
    unlock_self(st);
    if (counter == expected)
        return 0;
    fprintf(stderr,
            "osc_bench: %s: rank %d: target counter is %" PRId64 " after %" PRId64 " operations\n",
            st->t->name, st->rank, counter, expected);
    return 1;
}

static int compare_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
    return (x > y) - (x < y);
}

/* Rank 0 of many-to-one: all values fetched, sorted, must be 0, 1, 2...:
 * none fetched twice (two origins saw the same counter) and none missed. */
static int check_fetched_values(const char *name, int64_t *all, int64_t n)
{
    qsort(all, (size_t) n, sizeof(*all), compare_int64);
    for (int64_t i = 0; i < n; i++) {
        if (all[i] != i) {
            fprintf(stderr,
                    "osc_bench: %s: the origins fetched %" PRId64 " as value number %" PRId64
                    " of %" PRId64 " (each of 0..%" PRId64 " once expected)\n",
                    name, all[i], i, n, n - 1);
            return 1;
        }
    }
    return 0;
}

/* Many-to-one, fetching atomics: each origin's values grow (it flushes
 * every operation before the next), and rank 0 checks them all together.
 * Collective; returns 1 on a rank that found them wrong. */
static int check_fetched_together(struct osc_state *st)
{
    int n = (int) (st->atomic_ops < st->fetched_cap ? st->atomic_ops : st->fetched_cap);
    int *counts = NULL, *displs = NULL, bad = 0;
    int64_t *all = NULL, total = 0;

    for (int i = 1; i < n && !bad; i++) {
        if (st->fetched[i] <= st->fetched[i - 1]) {
            fprintf(stderr, "osc_bench: %s: rank %d fetched %" PRId64 " after %" PRId64 "\n",
                    st->t->name, st->rank, st->fetched[i], st->fetched[i - 1]);
            bad = 1;
        }
    }
    if (st->rank == 0) {
        counts = calloc((size_t) st->lay.nranks, sizeof(*counts));
        displs = calloc((size_t) st->lay.nranks, sizeof(*displs));
    }
    MPI_Gather(&n, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (st->rank == 0) {
        for (int r = 0; r < st->lay.nranks; r++) {
            displs[r] = (int) total;
            total += counts[r];
        }
        all = malloc((size_t) (total > 0 ? total : 1) * sizeof(*all));
    }
    MPI_Gatherv(st->fetched, n, MPI_INT64_T, all, counts, displs, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (st->rank == 0)
        bad |= check_fetched_values(st->t->name, all, total);
    free(all);
    free(counts);
    free(displs);
    return bad;
}

/* On a target of puts: every slot holds its writer's pattern. */
static int check_put_slots(struct osc_state *st, size_t size)
{
    int bad = 0;

    lock_self(st);
    for (int slot = 0; slot < st->slots && !bad; slot++) {
        int writer = many_to_one(st) ? slot + 1 : st->peer;
        size_t off = bench_check_pattern(st->win_buf + (size_t) slot * st->win_len, size,
                                         pattern_seed(size, writer));
        if (off) {
            fprintf(stderr,
                    "osc_bench: %s: rank %d: data put by rank %d at %zu bytes is wrong at "
                    "offset %zu\n",
                    st->t->name, st->rank, writer, size, off - 1);
            bad = 1;
        }
    }
    unlock_self(st);
    return bad;
}

/* Collective; returns 0 when every rank saw correct data. */
static int validate_size(struct osc_state *st, size_t size)
{
    const struct test_desc *t = st->t;
    long long bad = 0, any_bad = 0;

    if (is_atomic(t)) {
        MPI_Allgather(&st->atomic_ops, 1, MPI_INT64_T, st->ops_by_rank, 1, MPI_INT64_T,
                      MPI_COMM_WORLD);
        if (st->bad_fetches)
            bad = 1;
        if (is_target(st))
            bad |= check_counter(st);
        if (many_to_one(st) && fetches(t))
            bad |= check_fetched_together(st);
    } else if (t->op == OP_PUT && is_target(st)) {
        bad = check_put_slots(st, size);
    } else if (t->op == OP_GET && is_origin(st)) {
        size_t off = bench_check_pattern(st->origin_buf, size, pattern_seed(size, st->peer));
        if (off) {
            fprintf(stderr,
                    "osc_bench: %s: rank %d: data read at %zu bytes is wrong at offset %zu\n",
                    t->name, st->rank, size, off - 1);
            bad = 1;
        }
    }
    MPI_Allreduce(&bad, &any_bad, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    return any_bad ? -1 : 0;
}

static double step_value(const struct test_desc *t, int window, size_t size, long done, double secs)
{
    if (secs <= 0)
        secs = 1e-9;
    if (t->kind == BENCH_LATENCY)
        return secs * 1e6 / (double) done;
    if (t->kind == BENCH_BANDWIDTH)
        return (double) size * window * (double) done / secs / 1e6;
    return (double) window * (double) done / secs;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

/* The flag the origin puts when done, after the test's data. */
static size_t busy_flag_offset(size_t win_len)
{
    return (win_len + sizeof(int64_t) - 1) / sizeof(int64_t) * sizeof(int64_t);
}

/* The target: local loads of its own window memory and arithmetic, no MPI
 * call, until the flag arrives.  Returns whether it did: a target that
 * stopped at its cap entered MPI with the origin's operations still
 * pending, so they were served by a target in MPI, not a computing one. */
static bool busy_compute(struct osc_state *st, size_t flag_off)
{
    volatile int64_t *flag = (volatile int64_t *) (st->win_buf + flag_off);
    volatile double x = 1.0;
    double end = MPI_Wtime() + BUSY_MAX_SECS;

    while (0 == *flag) {
        if (MPI_Wtime() >= end)
            return false;
        for (int i = 0; i < 1000; i++)
            x = x * 1.0000001 + 1e-9;
    }
    return true;
}

/* The origin: every operation timed on its own; returns the 99th
 * percentile in microseconds. */
static double busy_origin(struct osc_state *st, size_t size, const struct bench_plan *plan,
                          size_t flag_off)
{
    long n = plan->iters < BUSY_MAX_OPS ? plan->iters : BUSY_MAX_OPS, done = 0;
    double *lat = calloc((size_t) (n > 0 ? n : 1), sizeof(double)), warm, t0, p99;
    int64_t one = 1;

    MPI_Win_lock_all(0, st->win);
    run_steps(st, size, plan->warmup < 10 ? plan->warmup : 10, plan->warmup_cap, &warm);
    t0 = MPI_Wtime();
    while (done < n && lat) {
        double t = MPI_Wtime();
        one_step(st, size);
        lat[done++] = MPI_Wtime() - t;
        if (plan->timed_cap > 0 && MPI_Wtime() - t0 >= plan->timed_cap)
            break;
    }
    MPI_Put(&one, 1, MPI_INT64_T, st->peer, st->peer_base + (MPI_Aint) flag_off, 1, MPI_INT64_T,
            st->win);
    MPI_Win_unlock_all(st->win);
    if (!lat || done == 0) {
        free(lat);
        return 0;
    }
    qsort(lat, (size_t) done, sizeof(double), compare_double);
    p99 = lat[(done * 99) / 100] * 1e6;
    /* rank 0 speaks for itself; the other origins' p99 are in the
     * '# per-origin' line */
    if (st->rank == 0)
        printf("# %s %zu%s: %ld ops, median %.3f us, 99th percentile %.3f us, slowest %.3f us\n",
               st->t->name, size, st->lay.origins > 1 ? " (rank 0)" : "", done, lat[done / 2] * 1e6,
               p99, lat[done - 1] * 1e6);
    free(lat);
    return p99;
}

/* Returns the origin's 99th percentile, -1 on every rank when the data
 * was wrong, or BUSY_TARGET_CAPPED on every rank when a target stopped
 * computing at its cap: the number would then time a target in MPI. */
static double measure_busy(struct osc_state *st, size_t size, const struct bench_plan *plan,
                           size_t flag_off)
{
    double value = 0;
    int capped = 0, any_capped = 0;
    bench_look_counters_t before, after;

    if (is_target(st)) {
        lock_self(st);
        memset(st->win_buf + flag_off, 0, sizeof(int64_t));
        unlock_self(st);
    }
    wait_for_all(st);
    bench_look_counters_read(&before);
    if (is_origin(st))
        value = busy_origin(st, size, plan, flag_off);
    else if (is_target(st))
        capped = !busy_compute(st, flag_off);
    bench_look_counters_read(&after);
    wait_for_all(st);
    bench_report_look_counters(st->t->name, &before, &after, is_target(st), MPI_COMM_WORLD);
    if (validate_size(st, size))
        return -1;
    MPI_Allreduce(&capped, &any_capped, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any_capped ? BUSY_TARGET_CAPPED : value;
}

/* Many-to-one: room for every value an origin may fetch at this size,
 * made before the timed loop. */
static void reserve_fetched(struct osc_state *st, const struct bench_plan *plan)
{
    long need = plan->warmup + plan->iters;
    int64_t *more;

    if (!many_to_one(st) || !fetches(st->t) || !is_origin(st) || need <= st->fetched_cap)
        return;
    more = realloc(st->fetched, (size_t) need * sizeof(*more));
    if (!more) {
        fprintf(stderr, "osc_bench: rank %d: no memory for %ld fetched values\n", st->rank, need);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    st->fetched = more;
    st->fetched_cap = need;
}

/* Returns this rank's own value for this size (0 on a rank that does not
 * time), or a negative number on every rank when the data was wrong. */
static double measure_size(struct osc_state *st, size_t size)
{
    struct bench_plan plan;
    double secs = 0, value = 0;
    long done = 0;

    bench_plan_for(&st->opt->common, st->t->kind, size, &plan);
    reserve_fetched(st, &plan);
    prepare_size(st, size);
    if (st->t->busy_target)
        return measure_busy(st, size, &plan, busy_flag_offset(st->win_len));
    wait_for_all(st);

    if (is_origin(st)) {
        double warm;
        MPI_Win_lock_all(0, st->win);
        run_steps(st, size, plan.warmup, plan.warmup_cap, &warm);
        done = run_steps(st, size, plan.iters, plan.timed_cap, &secs);
        MPI_Win_unlock_all(st->win);
        value = done > 0 ? step_value(st->t, st->opt->window, size, done, secs) : 0;
    }
    /* The passive target spends the origin's whole epoch in here. */
    wait_for_all(st);

    /* put_bibw: each rank timed its own direction, and the sum that
     * run_test reports for bandwidth is what OSU's bidirectional tests
     * report. */
    return validate_size(st, size) ? -1 : value;
}

static const char *value_column(const struct test_desc *t)
{
    switch (t->kind) {
    case BENCH_LATENCY:
        return "Latency (us)";
    case BENCH_BANDWIDTH:
        return "Bandwidth (MB/s)";
    default:
        return "Messages/s";
    }
}

/* Runs one test in a window of its own; returns 0 when all data was
 * right.  Collective. */
static int run_test(struct osc_state *st, const struct test_desc *t)
{
    const struct options *opt = st->opt;
    struct bench_sizes atomic_size = { .v = { sizeof(int64_t) }, .n = 1 };
    const struct bench_sizes *sizes = is_atomic(t) ? &atomic_size : &opt->sizes;
    size_t win_len = bench_sizes_max(sizes), exposed;
    /* with one pair the rows stay as they were before there were more */
    bool several = st->lay.origins > 1;
    int status = 0;
    char words[96];

    st->t = t;
    if (win_len < sizeof(int64_t))
        win_len = sizeof(int64_t);
    st->win_len = win_len;
    /* many-to-one puts: a slot per origin, so that each one's data can be
     * checked */
    st->slots = many_to_one(st) && t->op == OP_PUT && is_target(st) ? st->lay.nranks - 1 : 1;
    exposed =
        t->busy_target ? busy_flag_offset(win_len) + sizeof(int64_t) : win_len * (size_t) st->slots;
    st->origin_buf = bench_alloc(win_len);
    if (!st->origin_buf || create_window(st, exposed)) {
        fprintf(stderr, "osc_bench: rank %d: cannot create a %s window of %zu bytes\n", st->rank,
                flavour_names[opt->flavour], exposed);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    st->data_disp = st->peer_base;
    if (many_to_one(st) && t->op == OP_PUT && is_origin(st))
        st->data_disp += (MPI_Aint) ((size_t) (st->rank - 1) * win_len);

    if (st->rank == 0) {
        printf("# osc_bench %s: %s\n", t->name, t->what);
        printf("# window=%s sync=lock_all %s%s\n", flavour_names[opt->flavour],
               bench_layout_words(&st->lay, words, sizeof(words)),
               opt->common.quick ? " quick" : "");
        if (opt->pairs_timed && opt->pairs_timed < st->lay.nranks / 2)
            printf("# pairs timed: %d of %d; the other ranks wait asleep\n", opt->pairs_timed,
                   st->lay.nranks / 2);
        if (t->kind != BENCH_LATENCY && opt->window != BENCH_WINDOW)
            printf("# %d operations per flush (-W), not %d\n", opt->window, BENCH_WINDOW);
        if (several)
            bench_print_combination(
                t->kind, t->both_ranks_origin ? 2 * st->lay.origins : st->lay.origins, "origins");
        printf("%-10s%20s\n", "# Size", value_column(t));
        fflush(stdout);
    }
    for (int i = 0; i < sizes->n; i++) {
        size_t size = sizes->v[i];
        double value;

        if (size == 0)
            continue;
        struct bench_summary sum;

        value = measure_size(st, size);
        if (value == BUSY_TARGET_CAPPED) {
            /* no row: the driver reads this line and shows 'capped' */
            if (st->rank == 0)
                printf("# %s %zu: target capped: it computed %.0f s and stopped before the "
                       "origin's flag arrived\n",
                       t->name, size, BUSY_MAX_SECS);
            continue;
        }
        if (value < 0) {
            if (st->rank == 0)
                fprintf(stderr, "osc_bench: %s: wrong data at %zu bytes, stopping\n", t->name,
                        size);
            status = 1;
            break;
        }
        bench_summarise(value, is_origin(st), t->kind, MPI_COMM_WORLD, &sum);
        if (st->rank == 0) {
            bench_print_row(size, sum.row);
            if (several)
                bench_print_spread(size, &sum);
            fflush(stdout);
        }
    }
    bench_report_btl_ofi_pvars(MPI_COMM_WORLD);
    free_window(st);
    free(st->origin_buf);
    st->origin_buf = NULL;
    st->win_buf = NULL;
    return status;
}

/* -p: pair i (rank i and rank i + N/2) times when i < pairs. */
static int pick_timed_pairs(struct osc_state *st, int pairs)
{
    int half = st->lay.nranks / 2;

    if (pairs > half) {
        if (st->rank == 0)
            fprintf(stderr, "osc_bench: -p %d: the job has %d pairs\n", pairs, half);
        return -1;
    }
    st->bystander = st->rank % half >= pairs;
    st->lay.origins = pairs;
    return 0;
}

int main(int argc, char **argv)
{
    struct options opt;
    struct osc_state st;
    int status = 0;

    MPI_Init(&argc, &argv);
    bench_pvars_begin();
    memset(&st, 0, sizeof(st));
    MPI_Comm_rank(MPI_COMM_WORLD, &st.rank);
    if (parse_options(argc, argv, &opt) || bench_layout_init(&st.lay, opt.pattern, "osc_bench")) {
        MPI_Finalize();
        return 2;
    }
    bench_arm_watchdog(opt.common.timeout, "osc_bench");
    st.opt = &opt;
    st.peer = st.lay.peer;
    if (opt.pairs_timed && pick_timed_pairs(&st, opt.pairs_timed)) {
        MPI_Finalize();
        return 2;
    }
    st.bases = calloc((size_t) st.lay.nranks, sizeof(*st.bases));
    st.ops_by_rank = calloc((size_t) st.lay.nranks, sizeof(*st.ops_by_rank));
    if (!st.bases || !st.ops_by_rank) {
        fprintf(stderr, "osc_bench: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    st.one = 1;

    for (size_t i = 0; i < NUM_TESTS && status == 0; i++)
        if (opt.selected[i])
            status = run_test(&st, &tests[i]);

    bench_pvars_end();
    free(st.bases);
    free(st.ops_by_rank);
    free(st.fetched);
    alarm(0);
    MPI_Finalize();
    return status;
}
