/*
 * Many operations outstanding at once: 100 000 puts, with an atomic
 * accumulate after every 100th, to the right neighbour, all issued before a
 * single flush, on an MPI_Win_create window.  The provider's queues fill
 * long before the end, so the BTL's "try again later" path carries many of
 * them; every put must land in its slot and every increment must count.
 *
 * Only the puts stay outstanding: osc/rdma waits for each accumulate that it
 * hands to the BTL's atomics before returning, so an atomic costs a full
 * round trip (about a millisecond on a loaded two-core machine with the
 * socket-based providers), which is why there are fewer of them.
 */
#include "common.h"

#define NUM_PUTS     100000
#define ATOMIC_EVERY 100
#define NUM_ATOMICS  (NUM_PUTS / ATOMIC_EVERY)
#define NUM_COUNTERS 64

static int64_t put_value(int origin, int i)
{
    return ((int64_t) origin << 32) ^ ((int64_t) i * 2654435761ll);
}

int main(int argc, char **argv)
{
    tc_window_t w;
    const size_t win_bytes = (NUM_PUTS + NUM_COUNTERS) * sizeof(int64_t);

    tc_init(&argc, &argv, "rma_many_ops");
    const int right = (tc_rank + 1) % tc_size, left = (tc_rank + tc_size - 1) % tc_size;
    int64_t *values = tc_malloc(NUM_PUTS * sizeof(int64_t));
    int64_t *increments = tc_malloc(NUM_ATOMICS * sizeof(int64_t));
    for (int i = 0; i < NUM_PUTS; ++i) {
        values[i] = put_value(tc_rank, i);
    }
    for (int i = 0; i < NUM_ATOMICS; ++i) {
        increments[i] = i + 1;
    }

    tc_window_open(&w, TC_WIN_CREATE, win_bytes);
    double t0 = MPI_Wtime();
    TC_MPI(MPI_Win_lock_all(0, w.win));
    for (int i = 0; i < NUM_PUTS; ++i) {
        TC_MPI(MPI_Put(&values[i], 1, MPI_INT64_T, right,
                       tc_disp(&w, right, (size_t) i * sizeof(int64_t)), 1, MPI_INT64_T, w.win));
        if (i % ATOMIC_EVERY == ATOMIC_EVERY - 1) {
            /* between the puts, so that atomics meet full queues */
            int a = i / ATOMIC_EVERY;
            size_t counter = NUM_PUTS + (size_t) (a % NUM_COUNTERS);
            TC_MPI(MPI_Accumulate(&increments[a], 1, MPI_INT64_T, right,
                                  tc_disp(&w, right, counter * sizeof(int64_t)), 1, MPI_INT64_T,
                                  MPI_SUM, w.win));
        }
    }
    double t1 = MPI_Wtime();
    TC_MPI(MPI_Win_flush(right, w.win));
    double t2 = MPI_Wtime();
    TC_MPI(MPI_Win_unlock_all(w.win));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    tc_phase("%d puts and %d atomics issued in %.2fs, flushed in %.2fs", NUM_PUTS, NUM_ATOMICS,
             t1 - t0, t2 - t1);

    TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, tc_rank, 0, w.win));
    const int64_t *slots = (const int64_t *) w.base;
    for (int i = 0; i < NUM_PUTS; ++i) {
        if (slots[i] != put_value(left, i)) {
            TC_FAIL("put %d of %d from rank %d: slot %d: expected %" PRId64 " got %" PRId64, i,
                    NUM_PUTS, left, i, put_value(left, i), slots[i]);
        }
    }
    for (int c = 0; c < NUM_COUNTERS; ++c) {
        int64_t expected = 0;
        for (int i = c; i < NUM_ATOMICS; i += NUM_COUNTERS) {
            expected += i + 1;
        }
        char what[96];
        snprintf(what, sizeof(what), "accumulate SUM counter %d from rank %d", c, left);
        TC_CHECK_EQ_INT(what, expected, slots[NUM_PUTS + c]);
    }
    TC_MPI(MPI_Win_unlock(tc_rank, w.win));
    tc_window_close(&w);

    tc_expect_pvars(TC_PVAR_THIS_RANK, "put_count atomic_count");
    free(values);
    free(increments);
    return tc_finish();
}
