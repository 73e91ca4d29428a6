/*
 * Passive-target RMA while the target computes without MPI calls.
 *
 * Rank 0 computes for COMPUTE seconds (-s, default 3) with no MPI call.
 * Meanwhile every other rank runs ROUNDS (-r, default 100) rounds of
 * MPI_Fetch_and_op (SUM) on a counter of rank 0, MPI_Put of a value into
 * its own slot there and MPI_Get of it back, each followed by
 * MPI_Win_flush, on an MPI_Win_create window (through the BTL).
 *
 * Checks: the values an origin fetches from the counter increase and the
 * counter ends at ROUNDS x origins; each get returns what the put before it
 * wrote; and every origin finishes its rounds while rank 0 is still
 * computing (the operations completed without the target's MPI calls).
 * Each origin prints its slowest operation and its 99th percentile, and
 * every rank its btl/ofi counters, for the log; how fast is for the
 * benchmarks to say.
 *
 * With -q QUIET the origins first sleep QUIET seconds, no MPI call, while
 * rank 0 already computes (QUIET + COMPUTE seconds in all): a target whose
 * progress thread sleeps while nothing is aimed at it must still serve the
 * first operation and every later one while it computes.
 */
#include "common.h"

enum { SLOT_COUNTER, SLOT_FIRST_ORIGIN };

/* Busy work the compiler cannot drop; no MPI call inside. */
static double compute_for(double seconds)
{
    volatile double x = 1.0;
    double end = tc_now() + seconds;

    while (tc_now() < end) {
        tc_compute_slice(&x);
    }
    return x;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

static double timed_flush(MPI_Win win, double *slowest)
{
    double t0 = tc_now(), dt;

    TC_MPI(MPI_Win_flush(0, win));
    dt = tc_now() - t0;
    if (dt > *slowest) {
        *slowest = dt;
    }
    return dt;
}

static void run_origin(tc_window_t *w, int rounds, double compute, double start)
{
    double first = 0.0;
    int64_t one = 1, *fetched = tc_malloc((size_t) rounds * sizeof(int64_t));
    double *lat = tc_malloc((size_t) rounds * 3 * sizeof(double)), slowest = 0.0, done;
    MPI_Aint counter = tc_disp(w, 0, SLOT_COUNTER * sizeof(int64_t));
    MPI_Aint mine = tc_disp(w, 0, (size_t) (SLOT_FIRST_ORIGIN + tc_rank) * sizeof(int64_t));
    int n = 0;

    for (int r = 0; r < rounds; ++r) {
        int64_t value = ((int64_t) tc_rank << 32) | (int64_t) r, back = -1;
        double t0 = tc_now();

        TC_MPI(MPI_Fetch_and_op(&one, &fetched[r], MPI_INT64_T, 0, counter, MPI_SUM, w->win));
        timed_flush(w->win, &slowest);
        lat[n++] = tc_now() - t0;
        if (0 == r) {
            first = lat[0];
        }
        t0 = tc_now();
        TC_MPI(MPI_Put(&value, 1, MPI_INT64_T, 0, mine, 1, MPI_INT64_T, w->win));
        timed_flush(w->win, &slowest);
        lat[n++] = tc_now() - t0;
        t0 = tc_now();
        TC_MPI(MPI_Get(&back, 1, MPI_INT64_T, 0, mine, 1, MPI_INT64_T, w->win));
        timed_flush(w->win, &slowest);
        lat[n++] = tc_now() - t0;
        TC_CHECK(back == value, "round %d: get returned 0x%" PRIx64 " after a put of 0x%" PRIx64, r,
                 back, value);
    }
    done = tc_now() - start;
    qsort(lat, (size_t) n, sizeof(double), compare_double);
    printf("rank %d: %d rounds done %.3f s after the start (target computes %.1f s); first "
           "operation %.3f ms, slowest %.3f ms, 99th percentile %.3f ms, median %.3f ms\n",
           tc_rank, rounds, done, compute, 1e3 * first, 1e3 * lat[n - 1], 1e3 * lat[(n * 99) / 100],
           1e3 * lat[n / 2]);
    fflush(stdout);
    TC_CHECK(done < compute,
             "finished %.3f s after the start, when the target had stopped computing (%.1f s): "
             "operations waited for the target's MPI calls",
             done, compute);
    for (int r = 1; r < rounds; ++r) {
        TC_CHECK(fetched[r] > fetched[r - 1],
                 "round %d fetched %" PRId64 " after %" PRId64 ": the counter went backwards", r,
                 fetched[r], fetched[r - 1]);
    }
    free(fetched);
    free(lat);
}

int main(int argc, char **argv)
{
    int rounds = 100, opt;
    double compute = 3.0, quiet = 0.0, start;
    tc_window_t w;

    tc_init(&argc, &argv, "rma_busy_target");
    while ((opt = getopt(argc, argv, "r:s:q:")) != -1) {
        if ('r' == opt) {
            rounds = atoi(optarg);
        } else if ('s' == opt) {
            compute = atof(optarg);
        } else if ('q' == opt) {
            quiet = atof(optarg);
        }
    }
    TC_CHECK(tc_size >= 2, "needs at least 2 ranks");
    tc_window_open(&w, TC_WIN_CREATE, (size_t) (SLOT_FIRST_ORIGIN + tc_size) * sizeof(int64_t));
    TC_MPI(MPI_Win_lock_all(0, w.win));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    start = tc_now();
    if (0 == tc_rank) {
        (void) compute_for(quiet + compute);
    } else {
        if (quiet > 0.0) {
            (void) usleep((useconds_t) (quiet * 1e6));
        }
        run_origin(&w, rounds, quiet + compute, start);
    }
    TC_MPI(MPI_Win_unlock_all(w.win));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (0 == tc_rank) {
        int64_t *slots = (int64_t *) w.base;
        TC_CHECK(slots[SLOT_COUNTER] == (int64_t) rounds * (tc_size - 1),
                 "counter is %" PRId64 ", expected %" PRId64, slots[SLOT_COUNTER],
                 (int64_t) rounds * (tc_size - 1));
        for (int r = 1; r < tc_size; ++r) {
            int64_t expected = ((int64_t) r << 32) | (int64_t) (rounds - 1);
            TC_CHECK(slots[SLOT_FIRST_ORIGIN + r] == expected,
                     "slot of rank %d holds 0x%" PRIx64 ", expected 0x%" PRIx64, r,
                     slots[SLOT_FIRST_ORIGIN + r], expected);
        }
    }
    tc_expect_pvars(TC_PVAR_SUM, "put_count get_count atomic_count");
    /* who woke whom: tests/params/progress_wake.sh reads the wake counts */
    btl_ofi_pvars_print(stdout, tc_rank);
    tc_window_close(&w);
    return tc_finish();
}
