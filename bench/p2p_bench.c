/*
 * p2p_bench: MPI two-sided benchmarks in the manner of OSU's osu_latency
 * and osu_bw, for comparing btl/ofi's two-sided path (pml ob1) with
 * upstream's.
 *
 *   p2p_bench -t pingpong|bw|pingpong,bw [-m [MIN:]MAX | -m A,B,...]
 *             [-W WINDOW] [-i ITERS] [-w WARMUP] [-c CAP] [-q] [-T SECS] [-M]
 *
 * pingpong: rank 0 sends, rank 1 answers with a message of the same size;
 *           half the round trip in microseconds (sizes 0..4 MiB).
 * bw:       rank 0 posts 64 MPI_Isend of one size, rank 1 64 MPI_Irecv,
 *           then rank 1 acknowledges with a 4-byte message; MB/s with
 *           MB = 1e6 bytes (sizes 1 B..4 MiB).
 *
 * Both ranks take part in every iteration, so when the timed loop is cut
 * short after CAP seconds, rank 0 decides and tells rank 1 between chunks
 * of iterations; the decision is not timed.  Received data is checked.
 *
 * More ranks, an even number N: rank i (in the role of rank 0 above) and
 * rank i + N/2 are a pair, and all pairs run at once, the same number of
 * iterations (rank 0 decides for all).  -M (bw only): ranks 1..N-1 all
 * send their windows to rank 0, which acknowledges each.  A row is then
 * the mean of the senders' latencies or the sum of their bandwidths, and a
 * '# per-origin' line gives their min, mean and max.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "mpi_bench_util.h"

#define TAG_DATA 1
#define TAG_ACK  2
/* A chunk of iterations between two stop-or-go decisions aims at this
 * fraction of the time cap. */
#define CHUNK_CAP_FRACTION 8
#define MAX_CHUNK          1024

enum p2p_test { TEST_PINGPONG, TEST_BW };

struct options {
    int window; /* isends per acknowledgement in bw */
    enum bench_pattern pattern;
    bool selected[2];
    struct bench_sizes sizes;
    bool sizes_set;
    struct bench_common_opts common;
};

struct p2p_state {
    const struct options *opt;
    enum p2p_test test;
    struct bench_layout lay;
    int rank, peer;
    unsigned char *sbuf, *rbuf; /* rank 0 of many-to-one: a slot per sender */
    size_t slot_len;
    MPI_Request *reqs;
};

static bool many_to_one(const struct p2p_state *st)
{
    return st->lay.pattern == BENCH_MANY_TO_ONE;
}

static bool is_origin(const struct p2p_state *st)
{
    return bench_layout_is_origin(&st->lay);
}

static void print_usage(FILE *f)
{
    fprintf(f,
            "usage: p2p_bench -t pingpong|bw|pingpong,bw [-m [MIN:]MAX | -m A,B,...]\n"
            "                 [-W WINDOW] [-i ITERS] [-w WARMUP] [-c CAP] [-q] [-T SECS]\n"
            "\n"
            "MPI two-sided benchmarks, OSU style.  2 ranks, or an even number N:\n"
            "pairs of rank i and i+N/2, all at once.\n"
            "  -t        pingpong (latency, us), bw (window of %d isends, MB/s), or\n"
            "            both (all)\n"
            "  -m        sizes: powers of two from MIN to MAX, MIN 0 adding 0 bytes\n"
            "            (default 0:4m pingpong, 1:4m bw), or a list; bw skips 0\n"
            "  -W N      bw: isends per acknowledgement (default %d)\n"
            "  -i ITERS  timed iterations (bw: windows); default 1000/100 (pingpong),\n"
            "            100/20 (bw), the second above 64 KiB, cut short after\n"
            "            %.2f s per size\n"
            "  -w WARMUP untimed iterations first (default 2000/10, 10/2)\n"
            "  -c CAP    seconds per size before the timed loop is cut short\n"
            "            (0 = never; ignored with -i)\n"
            "  -q        quick: a tenth of the default iterations\n"
            "  -T SECS   abort the job after SECS seconds (default %d, 0 = never)\n"
            "  -M        many-to-one (bw only): ranks 1..N-1 all send to rank 0\n"
            "Rows with several senders: latency is the mean over them, bandwidth the\n"
            "sum; a '# per-origin' line gives min, mean and max.\n",
            BENCH_WINDOW, BENCH_WINDOW, BENCH_POINT_TIME_CAP, BENCH_DEFAULT_TIMEOUT);
}

static int parse_options(int argc, char **argv, struct options *opt)
{
    int c;

    memset(opt, 0, sizeof(*opt));
    opt->window = BENCH_WINDOW;
    opt->pattern = BENCH_PAIRS;
    bench_common_defaults(&opt->common);
    while ((c = getopt(argc, argv, "t:m:W:i:w:c:qT:Mh")) != -1) {
        if (bench_common_option(&opt->common, c, optarg, "p2p_bench"))
            continue;
        switch (c) {
        case 't': {
            char buf[64], *save = NULL, *tok;
            if (strlen(optarg) >= sizeof(buf)) {
                fprintf(stderr, "p2p_bench: bad test list %s\n", optarg);
                return -1;
            }
            strcpy(buf, optarg);
            for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (strcmp(tok, "pingpong") == 0 || strcmp(tok, "lat") == 0)
                    opt->selected[TEST_PINGPONG] = true;
                else if (strcmp(tok, "bw") == 0)
                    opt->selected[TEST_BW] = true;
                else if (strcmp(tok, "all") == 0)
                    opt->selected[TEST_PINGPONG] = opt->selected[TEST_BW] = true;
                else {
                    fprintf(stderr, "p2p_bench: unknown test %s\n", tok);
                    return -1;
                }
            }
            break;
        }
        case 'm':
            if (bench_parse_sizes(optarg, &opt->sizes)) {
                fprintf(stderr, "p2p_bench: bad sizes %s\n", optarg);
                return -1;
            }
            opt->sizes_set = true;
            break;
        case 'W':
            opt->window = atoi(optarg);
            if (opt->window < 1 || opt->window > 4096) {
                fprintf(stderr, "p2p_bench: bad window %s\n", optarg);
                return -1;
            }
            break;
        case 'M':
            opt->pattern = BENCH_MANY_TO_ONE;
            break;
        case 'h':
            print_usage(stdout);
            exit(0);
        default:
            print_usage(stderr);
            return -1;
        }
    }
    if (!(opt->selected[TEST_PINGPONG] || opt->selected[TEST_BW]) || optind != argc) {
        print_usage(stderr);
        return -1;
    }
    if (opt->pattern == BENCH_MANY_TO_ONE && opt->selected[TEST_PINGPONG]) {
        fprintf(stderr, "p2p_bench: -M (many-to-one) runs bw only, not pingpong\n");
        return -1;
    }
    if (!opt->sizes_set)
        bench_sizes_range(&opt->sizes, 0, (size_t) 4 << 20);
    return 0;
}

static void pingpong_step(struct p2p_state *st, size_t size)
{
    if (is_origin(st)) {
        MPI_Send(st->sbuf, (int) size, MPI_BYTE, st->peer, TAG_DATA, MPI_COMM_WORLD);
        MPI_Recv(st->rbuf, (int) size, MPI_BYTE, st->peer, TAG_DATA, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(st->rbuf, (int) size, MPI_BYTE, st->peer, TAG_DATA, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        MPI_Send(st->sbuf, (int) size, MPI_BYTE, st->peer, TAG_DATA, MPI_COMM_WORLD);
    }
}

/* Rank 0 of many-to-one: a window from every sender, each into its own
 * slot, then an acknowledgement to each. */
static void bw_step_gather(struct p2p_state *st, size_t size)
{
    int window = st->opt->window, senders = st->lay.nranks - 1, ack = 0;

    for (int s = 0; s < senders; s++)
        for (int i = 0; i < window; i++)
            MPI_Irecv(st->rbuf + (size_t) s * st->slot_len, (int) size, MPI_BYTE, s + 1, TAG_DATA,
                      MPI_COMM_WORLD, &st->reqs[s * window + i]);
    MPI_Waitall(senders * window, st->reqs, MPI_STATUSES_IGNORE);
    for (int s = 0; s < senders; s++)
        MPI_Send(&ack, 1, MPI_INT, s + 1, TAG_ACK, MPI_COMM_WORLD);
}

static void bw_step(struct p2p_state *st, size_t size)
{
    int ack = 0;

    if (many_to_one(st) && st->rank == 0) {
        bw_step_gather(st, size);
    } else if (is_origin(st)) {
        for (int i = 0; i < st->opt->window; i++)
            MPI_Isend(st->sbuf, (int) size, MPI_BYTE, st->peer, TAG_DATA, MPI_COMM_WORLD,
                      &st->reqs[i]);
        MPI_Waitall(st->opt->window, st->reqs, MPI_STATUSES_IGNORE);
        MPI_Recv(&ack, 1, MPI_INT, st->peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        for (int i = 0; i < st->opt->window; i++)
            MPI_Irecv(st->rbuf, (int) size, MPI_BYTE, st->peer, TAG_DATA, MPI_COMM_WORLD,
                      &st->reqs[i]);
        MPI_Waitall(st->opt->window, st->reqs, MPI_STATUSES_IGNORE);
        MPI_Send(&ack, 1, MPI_INT, st->peer, TAG_ACK, MPI_COMM_WORLD);
    }
}

static void one_step(struct p2p_state *st, size_t size)
{
    if (st->test == TEST_PINGPONG)
        pingpong_step(st, size);
    else
        bw_step(st, size);
}

/* Runs up to `count` steps in chunks; between chunks rank 0 decides whether
 * to go on (count not reached, cap not spent) and broadcasts how many steps
 * come next.  Only the chunks are timed.  Returns the steps done. */
static long run_steps(struct p2p_state *st, size_t size, long count, double cap, double *secs)
{
    double elapsed = 0;
    long done = 0;

    for (;;) {
        long next = 0;
        if (st->rank == 0 && done < count && !(cap > 0 && elapsed >= cap)) {
            next = count - done;
            if (cap > 0) {
                /* Chunks sized to a slice of the cap keep the overshoot of
                 * slow transports small and the decision rare on fast ones. */
                double per_step = done > 0 ? elapsed / (double) done : 0;
                long fit = per_step > 0 ? (long) (cap / CHUNK_CAP_FRACTION / per_step) : 1;
                if (fit < 1)
                    fit = 1;
                if (fit > MAX_CHUNK)
                    fit = MAX_CHUNK;
                if (next > fit)
                    next = fit;
            }
        }
        MPI_Bcast(&next, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        if (next == 0)
            break;
        double t0 = MPI_Wtime();
        for (long i = 0; i < next; i++)
            one_step(st, size);
        elapsed += MPI_Wtime() - t0;
        done += next;
    }
    *secs = elapsed;
    return done;
}

/* Collective; returns 0 when both ranks received the expected bytes. */
static int validate_size(struct p2p_state *st, size_t size)
{
    int bad = 0, any_bad = 0;
    bool received = st->test == TEST_PINGPONG || !is_origin(st);
    int slots = many_to_one(st) && st->rank == 0 ? st->lay.nranks - 1 : 1;

    for (int slot = 0; received && slot < slots && !bad; slot++) {
        int sender = many_to_one(st) ? slot + 1 : st->peer;
        size_t off = bench_check_pattern(st->rbuf + (size_t) slot * st->slot_len, size,
                                         (unsigned) (size * 2 + (size_t) sender));
        if (off) {
            fprintf(stderr,
                    "p2p_bench: rank %d: data received from rank %d at %zu bytes is wrong at "
                    "offset %zu\n",
                    st->rank, sender, size, off - 1);
            bad = 1;
        }
    }
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any_bad ? -1 : 0;
}

static double measure_size(struct p2p_state *st, size_t size)
{
    const struct options *opt = st->opt;
    enum bench_kind kind = st->test == TEST_PINGPONG ? BENCH_LATENCY : BENCH_BANDWIDTH;
    struct bench_plan plan;
    double warm, secs = 0;
    long done;

    bench_plan_for(&opt->common, kind, size, &plan);
    bench_fill_pattern(st->sbuf, size, (unsigned) (size * 2 + st->rank));
    for (int slot = 0; slot < (many_to_one(st) && st->rank == 0 ? st->lay.nranks - 1 : 1); slot++)
        memset(st->rbuf + (size_t) slot * st->slot_len, 0, size);
    MPI_Barrier(MPI_COMM_WORLD);

    run_steps(st, size, plan.warmup, plan.warmup_cap, &warm);
    done = run_steps(st, size, plan.iters, plan.timed_cap, &secs);
    if (validate_size(st, size))
        return -1;
    if (secs <= 0)
        secs = 1e-9;
    if (kind == BENCH_LATENCY)
        return secs * 1e6 / (2.0 * (double) done);
    return (double) size * opt->window * (double) done / secs / 1e6;
}

/* Collective; returns 0 when all data was right. */
static int run_test(struct p2p_state *st, enum p2p_test test)
{
    const struct options *opt = st->opt;
    enum bench_kind kind = test == TEST_PINGPONG ? BENCH_LATENCY : BENCH_BANDWIDTH;
    /* with one pair the rows stay as they were before there were more */
    bool several = st->lay.origins > 1;
    int status = 0;
    char words[96];

    st->test = test;
    if (st->rank == 0) {
        if (test == TEST_PINGPONG)
            printf("# p2p_bench pingpong: MPI_Send/MPI_Recv latency (half round trip)\n");
        else
            printf("# p2p_bench bw: MPI_Isend bandwidth, window of %d, MB = 1e6 B\n", opt->window);
        printf("# %s%s\n", bench_layout_words(&st->lay, words, sizeof(words)),
               opt->common.quick ? " quick" : "");
        if (several)
            bench_print_combination(kind, st->lay.origins, "origins");
        printf("%-10s%20s\n", "# Size",
               test == TEST_PINGPONG ? "Latency (us)" : "Bandwidth (MB/s)");
        fflush(stdout);
    }
    for (int i = 0; i < opt->sizes.n; i++) {
        size_t size = opt->sizes.v[i];
        struct bench_summary sum;
        double value;

        if (size == 0 && test == TEST_BW)
            continue;
        value = measure_size(st, size);
        if (value < 0) {
            status = 1;
            break;
        }
        bench_summarise(value, is_origin(st), kind, MPI_COMM_WORLD, &sum);
        if (st->rank == 0) {
            bench_print_row(size, sum.row);
            if (several)
                bench_print_spread(size, &sum);
            fflush(stdout);
        }
    }
    bench_report_btl_ofi_pvars(MPI_COMM_WORLD);
    return status;
}

int main(int argc, char **argv)
{
    struct options opt;
    struct p2p_state st;
    int status = 0, slots;
    size_t len;

    MPI_Init(&argc, &argv);
    bench_pvars_begin();
    memset(&st, 0, sizeof(st));
    MPI_Comm_rank(MPI_COMM_WORLD, &st.rank);
    if (parse_options(argc, argv, &opt) || bench_layout_init(&st.lay, opt.pattern, "p2p_bench")) {
        MPI_Finalize();
        return 2;
    }
    bench_arm_watchdog(opt.common.timeout, "p2p_bench");
    st.opt = &opt;
    st.peer = st.lay.peer;
    /* rank 0 of many-to-one receives every sender's window at once */
    slots = many_to_one(&st) && st.rank == 0 ? st.lay.nranks - 1 : 1;
    len = bench_sizes_max(&opt.sizes);
    st.slot_len = len;
    st.sbuf = bench_alloc(len);
    st.rbuf = bench_alloc(len * (size_t) slots);
    st.reqs = calloc((size_t) opt.window * (size_t) slots, sizeof(*st.reqs));
    if (!st.sbuf || !st.rbuf || !st.reqs) {
        fprintf(stderr, "p2p_bench: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    if (opt.selected[TEST_PINGPONG])
        status = run_test(&st, TEST_PINGPONG);
    if (status == 0 && opt.selected[TEST_BW])
        status = run_test(&st, TEST_BW);

    bench_pvars_end();
    free(st.sbuf);
    free(st.rbuf);
    free(st.reqs);
    alarm(0);
    MPI_Finalize();
    return status;
}
