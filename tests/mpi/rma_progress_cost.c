/*
 * What the progress thread costs ranks that compute, from its own MPI_T
 * counters.  Every rank computes for PHASE seconds (-s, default 1) with no
 * MPI call, three times:
 *
 *   1. before any window: nothing of ours takes remote access, so no peer
 *      can aim an operation at us: the thread looks only while the last
 *      sends before the phase are watched, at most a linger time
 *      (expose_count stays 0);
 *   2. with an MPI_Win_create window and an MPI_Win_lock_all epoch, nothing
 *      aimed at anyone: the thread may look, but far less often than once
 *      per btl_ofi_progress_idle_us (at most a quarter of the looks a
 *      100 us timer would make: a sleeping thread makes about 1 %);
 *   3. after MPI_Win_free: again only the few looks after the last sends.
 *
 * Then a put to the right neighbour and a flush check that the window
 * works, and the counters show our btl/ofi carried it.  Counts, not
 * times, are checked: a loaded machine only makes the thread look less.
 *
 * The pause after an application's progress pass that found nothing
 * (empty_pause_count) is gated: before any window a rank awaits nothing of
 * ours and exposes nothing, so however often its barriers poll, it never
 * pauses.  With -P 1 (shm) the window's flushes must pause, with -P 0
 * (network providers) nothing ever does.
 */
#include "common.h"

/* The sends just before a phase (the barrier's) are watched in case the
 * provider holds one: while one is in flight (to a peer that computes,
 * until it progresses) for at most btl_ofi_progress_linger_us, 10 ms of
 * looks every 100 us, then 4 periods more, with a margin. */
#define SEND_WATCH_LOOKS 150

/* barriers and flushes of the pause checks: one that completes on its
 * first pass is possible, hundreds are not */
#define PAUSE_BARRIERS 500
#define PAUSE_FLUSHES  100

static void compute_for(double seconds)
{
    volatile double x = 1.0;
    double end = tc_now() + seconds;

    while (tc_now() < end) {
        tc_compute_slice(&x);
    }
}

static unsigned long counter(const char *name)
{
    unsigned long value = 0;

    (void) btl_ofi_pvars_read(name, &value);
    return value;
}

/* The thread's looks while this rank computes for @p seconds. */
static unsigned long looks_while_computing(double seconds)
{
    unsigned long before;

    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    before = counter("look_count");
    compute_for(seconds);
    return counter("look_count") - before;
}

int main(int argc, char **argv)
{
    double phase = 1.0;
    unsigned long bare, exposed, after, timer_looks, paused_bare, paused;
    int64_t value, *slots;
    int opt, right, expect_pauses = -1;
    tc_window_t w;

    tc_init(&argc, &argv, "rma_progress_cost");
    while ((opt = getopt(argc, argv, "s:P:")) != -1) {
        if ('s' == opt) {
            phase = atof(optarg);
        } else if ('P' == opt) {
            expect_pauses = atoi(optarg);
        }
    }
    timer_looks = (unsigned long) (phase * 1e6 / 100.0);

    bare = looks_while_computing(phase);
    TC_CHECK(0 == counter("expose_count"), "memory was exposed %lu time(s) before any window",
             counter("expose_count"));

    for (int i = 0; i < PAUSE_BARRIERS; ++i) {
        TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    paused_bare = counter("empty_pause_count");
    tc_window_open(&w, TC_WIN_CREATE, (size_t) tc_size * sizeof(int64_t));
    TC_MPI(MPI_Win_lock_all(0, w.win));
    exposed = looks_while_computing(phase);
    right = (tc_rank + 1) % tc_size;
    for (int i = 0; i < PAUSE_FLUSHES; ++i) {
        value = 1000 + tc_rank + i;
        TC_MPI(MPI_Put(&value, 1, MPI_INT64_T, right,
                       tc_disp(&w, right, (size_t) tc_rank * sizeof(int64_t)), 1, MPI_INT64_T,
                       w.win));
        TC_MPI(MPI_Win_flush(right, w.win));
    }
    TC_MPI(MPI_Win_unlock_all(w.win));
    paused = counter("empty_pause_count");
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    slots = (int64_t *) w.base;
    {
        int left = (tc_rank + tc_size - 1) % tc_size;
        int last = 1000 + left + PAUSE_FLUSHES - 1;
        TC_CHECK(slots[left] == last, "slot %d holds %" PRId64 ", expected %d", left, slots[left],
                 last);
    }
    tc_expect_pvars(TC_PVAR_SUM, "put_count");
    tc_window_close(&w);

    after = looks_while_computing(phase);
    printf("rank %d: progress thread looks while computing %.1f s: %lu before any window, %lu "
           "with a window nobody addressed, %lu after it was freed (a %d us timer: %lu); "
           "memory exposed %lu time(s)\n",
           tc_rank, phase, bare, exposed, after, 100, timer_looks, counter("expose_count"));
    fflush(stdout);
    if (!tc_stock_run()) {
        TC_CHECK(bare <= SEND_WATCH_LOOKS,
                 "the thread looked %lu times before anything was exposed", bare);
        TC_CHECK(exposed <= timer_looks / 4,
                 "the thread looked %lu times in %.1f s with nothing aimed at this rank "
                 "(a 100 us timer: %lu)",
                 exposed, phase, timer_looks);
        TC_CHECK(after <= SEND_WATCH_LOOKS + 1,
                 "the thread looked %lu times after the window was freed", after);
        TC_CHECK(0 == paused_bare,
                 "%lu empty progress passes paused before anything was awaited or exposed",
                 paused_bare);
        TC_CHECK(expect_pauses < 0 || (expect_pauses > 0) == (paused > 0),
                 "%lu empty progress passes paused during %d flushes (-P %d)", paused,
                 PAUSE_FLUSHES, expect_pauses);
    }
    btl_ofi_pvars_print(stdout, tc_rank);
    return tc_finish();
}
