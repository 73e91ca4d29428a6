/*
 * Helpers shared by the MPI benchmarks (osc_bench, p2p_bench): option
 * parsing, OSU-like iteration plans, data patterns, a watchdog and the
 * report of btl/ofi's MPI_T counters.
 */
#ifndef BTL_OFI_MPI_BENCH_UTIL_H
#define BTL_OFI_MPI_BENCH_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

/* Same thresholds and caps as bench/fi_bench.c, so that the three columns
 * of contrib/bench are measured the same way. */
#define BENCH_WINDOW          64
#define BENCH_LARGE_MSG       65536
#define BENCH_POINT_TIME_CAP  0.1
#define BENCH_WARMUP_TIME_CAP 0.05
#define BENCH_LATENCY_WARMUP  2000 /* operations before a small latency row */
#define BENCH_DEFAULT_TIMEOUT 120
#define BENCH_MAX_SIZE_LIMIT  ((size_t) 1 << 30)

enum bench_kind { BENCH_LATENCY, BENCH_BANDWIDTH, BENCH_RATE };

struct bench_common_opts {
    long iters;      /* <= 0: default plan */
    long warmup;     /* < 0: default plan */
    double time_cap; /* < 0: default cap; 0: never cut short */
    bool quick;
    int timeout; /* seconds before the watchdog aborts the job */
};

struct bench_plan {
    long iters; /* latency: operations; bw/rate: windows */
    long warmup;
    double timed_cap; /* seconds; 0 = no cap */
    double warmup_cap;
};

void bench_common_defaults(struct bench_common_opts *o);

/* "4096", "4k", "1m"; returns 0 on success. */
int bench_parse_size(const char *s, size_t *out);

/* "[MIN:]MAX" */
int bench_parse_range(const char *s, size_t *min, size_t *max);

#define BENCH_MAX_SIZES 64

/* The message sizes of a run: 0 (when asked for) then powers of two from
 * MIN to MAX, or an explicit list. */
struct bench_sizes {
    size_t v[BENCH_MAX_SIZES];
    int n;
};

/* "[MIN:]MAX" (powers of two; MIN 0 adds a zero-byte size) or
 * "A,B,C..." (exactly these); returns 0 on success. */
int bench_parse_sizes(const char *s, struct bench_sizes *out);

void bench_sizes_range(struct bench_sizes *out, size_t min, size_t max);

size_t bench_sizes_max(const struct bench_sizes *s);

/* The integer value of option -OPT, at least LOWEST; anything else
 * (trailing characters included) says so on stderr and exits with 2. */
long bench_parse_count(const char *arg, const char *prog, char opt, long lowest);

/* Handles -i -w -c -q -T; returns true when it consumed the option. */
bool bench_common_option(struct bench_common_opts *o, int opt, const char *arg, const char *prog);

void bench_plan_for(const struct bench_common_opts *o, enum bench_kind kind, size_t size,
                    struct bench_plan *plan);

void bench_fill_pattern(void *buf, size_t len, unsigned seed);

/* Offset + 1 of the first byte that differs from the pattern, 0 if none. */
size_t bench_check_pattern(const void *buf, size_t len, unsigned seed);

/* Aborts the whole job with a message after `seconds` (0: never). */
void bench_arm_watchdog(int seconds, const char *what);

/* Right after MPI_Init: starts watching btl/ofi's MPI_T counters. */
void bench_pvars_begin(void);

/* Collective over comm: prints on rank 0 one trailing '#' line with the sum
 * over ranks of how much btl/ofi's MPI_T counters grew since the previous
 * report, or says they are absent (upstream registers none).  Never fails
 * the run. */
void bench_report_btl_ofi_pvars(MPI_Comm comm);

/* Before MPI_Finalize. */
void bench_pvars_end(void);

/* The progress thread's counters, for what served a computing target:
 * looks, those its timer began, those a waiting origin's datagram began,
 * waits that ended late, and the nudges that rescued them. */
#define BENCH_LOOK_COUNTERS 5
typedef struct {
    long values[BENCH_LOOK_COUNTERS]; /* -1 where the counter is absent */
} bench_look_counters_t;

void bench_look_counters_read(bench_look_counters_t *now);

/* Collective over comm: rank 0 prints one '# NAME target thread:' line
 * with how much the counters grew from *before to *after on the ranks
 * where `mine` is true (the targets); nothing where btl/ofi's counters
 * are absent. */
void bench_report_look_counters(const char *name, const bench_look_counters_t *before,
                                const bench_look_counters_t *after, bool mine, MPI_Comm comm);

void *bench_alloc(size_t len);

/* One OSU-style result line; small values keep four decimals, so that the
 * bandwidth of tiny messages over slow transports does not print as 0. */
void bench_print_row(size_t size, double value);

/* How the ranks of a job are matched when there are more than two. */
enum bench_pattern {
    /* N even: rank i and rank i + N/2 are a pair, all pairs at once.  With
     * contrib/mpirun --hosts 2 (or a hostfile mapped ppr:N/2:node) the
     * first half of the ranks is on one host and the second half on the
     * other, so every pair crosses the hosts. */
    BENCH_PAIRS,
    /* Every rank but 0 is an origin and rank 0 the one target. */
    BENCH_MANY_TO_ONE
};

struct bench_layout {
    enum bench_pattern pattern;
    int rank, nranks;
    int peer;    /* pairs: the partner; many-to-one: 0 (rank 0 itself: -1) */
    int origins; /* ranks that time (one side of each pair; N - 1) */
};

/* Collective over MPI_COMM_WORLD.  Returns 0, or -1 after rank 0 said why
 * the job cannot run this pattern (pairs: an odd number of ranks). */
int bench_layout_init(struct bench_layout *l, enum bench_pattern pattern, const char *prog);

/* The rank that is the first side (origin, sender) of a pair or one of the
 * many-to-one origins. */
bool bench_layout_is_origin(const struct bench_layout *l);

/* The words that describe the ranks in the header of a test: "ranks=2"
 * for one pair, as before there were more. */
const char *bench_layout_words(const struct bench_layout *l, char *buf, size_t len);

/* Combines each timing rank's own value on rank 0; collective over comm
 * (out is zero elsewhere).  The row is the mean over the timing ranks for
 * latency (what one of them sees) and their sum for bandwidth and rate
 * (what all of them move together). */
struct bench_summary {
    double row, min, mean, max;
    int n; /* ranks that timed */
};

void bench_summarise(double value, bool timed, enum bench_kind kind, MPI_Comm comm,
                     struct bench_summary *out);

/* Rank 0, the header: with more than one timing rank, one '#' line that
 * says how the rows combine them (nothing with one, as for two ranks). */
void bench_print_combination(enum bench_kind kind, int timing_ranks, const char *whose);

/* Rank 0, after a row: with more than one timing rank, one
 * "# per-origin SIZE: min .. mean .. max .. (N origins)" line. */
void bench_print_spread(size_t size, const struct bench_summary *s);

#endif
