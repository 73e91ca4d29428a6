/*
 * Every synchronisation mode of MPI one-sided communication, each checked by
 * the values it must make visible: fence, post/start/complete/wait, lock and
 * unlock (exclusive and shared), lock_all with flush, flush_all and
 * flush_local, and the request-based rput, rget, raccumulate and
 * rget_accumulate.  Runs over all three window flavours.
 *
 * The window is an array of int64 slots: one region per test with a slot
 * per origin rank, so that each slot has exactly one writer, and a few
 * counters that all ranks update.
 */
#include "common.h"

enum region {
    REG_FENCE,
    REG_PSCW_RING,
    REG_PSCW_ALL,
    REG_LOCK_SHARED,
    REG_FLUSH,
    REG_FLUSH_ALL,
    REG_FLUSH_LOCAL,
    REG_RPUT,
    NUM_REGIONS
};

enum counter {
    CNT_EXCLUSIVE,   /* read-modify-write under an exclusive lock */
    CNT_RACCUMULATE, /* MPI_Raccumulate SUM */
    CNT_RGET_ACC,    /* MPI_Rget_accumulate SUM, fetched values checked */
    CNT_CONSTANT,    /* read-only, for gets */
    NUM_COUNTERS
};

#define EXCLUSIVE_ROUNDS 40
#define RGET_ACC_ROUNDS  20

static size_t slot_of(enum region r, int origin)
{
    return (size_t) r * (size_t) tc_size + (size_t) origin;
}

static size_t counter_slot(enum counter c)
{
    return (size_t) NUM_REGIONS * (size_t) tc_size + (size_t) c;
}

static MPI_Aint slot_disp(const tc_window_t *w, int target, size_t slot)
{
    return tc_disp(w, target, slot * sizeof(int64_t));
}

/* distinct for every region, origin, target and round; negative half the
 * time so that sign handling shows */
static int64_t value_of(enum region r, int origin, int target, int round)
{
    int64_t v = ((int64_t) r << 40) | ((int64_t) origin << 24) | ((int64_t) target << 8) | round;
    return (origin + round) % 2 ? -v : v;
}

static int64_t *slots(const tc_window_t *w)
{
    return (int64_t *) w->base;
}

static void check_region(const tc_window_t *w, enum region r, int round, const char *mode,
                         int only_origin)
{
    char what[160];
    for (int o = 0; o < tc_size; ++o) {
        if (only_origin >= 0 && o != only_origin) {
            continue;
        }
        snprintf(what, sizeof(what), "%s window, %s: slot written by rank %d",
                 tc_flavour_names[w->flavour], mode, o);
        TC_CHECK_EQ_INT(what, value_of(r, o, tc_rank, round), slots(w)[slot_of(r, o)]);
    }
}

static void test_fence(tc_window_t *w)
{
    int64_t *vals = tc_malloc((size_t) tc_size * sizeof(int64_t));

    for (int round = 0; round < 3; ++round) {
        TC_MPI(MPI_Win_fence(MPI_MODE_NOPRECEDE, w->win));
        for (int t = 0; t < tc_size; ++t) {
            vals[t] = value_of(REG_FENCE, tc_rank, t, round);
            TC_MPI(MPI_Put(&vals[t], 1, MPI_INT64_T, t,
                           slot_disp(w, t, slot_of(REG_FENCE, tc_rank)), 1, MPI_INT64_T, w->win));
        }
        TC_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, w->win));
        check_region(w, REG_FENCE, round, "fence", -1);
    }
    free(vals);
}

static void test_pscw(tc_window_t *w)
{
    const int left = (tc_rank + tc_size - 1) % tc_size, right = (tc_rank + 1) % tc_size;
    MPI_Group world, left_group, right_group;
    int64_t v, got[2] = { 0, 0 };

    TC_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    TC_MPI(MPI_Group_incl(world, 1, &left, &left_group));
    TC_MPI(MPI_Group_incl(world, 1, &right, &right_group));

    /* ring: expose to the left neighbour, access the right one */
    v = value_of(REG_PSCW_RING, tc_rank, right, 0);
    TC_MPI(MPI_Win_post(left_group, 0, w->win));
    TC_MPI(MPI_Win_start(right_group, 0, w->win));
    TC_MPI(MPI_Put(&v, 1, MPI_INT64_T, right, slot_disp(w, right, slot_of(REG_PSCW_RING, tc_rank)),
                   1, MPI_INT64_T, w->win));
    TC_MPI(MPI_Get(&got[0], 1, MPI_INT64_T, right, slot_disp(w, right, counter_slot(CNT_CONSTANT)),
                   1, MPI_INT64_T, w->win));
    TC_MPI(MPI_Win_complete(w->win));
    TC_MPI(MPI_Win_wait(w->win));
    check_region(w, REG_PSCW_RING, 0, "post/start/complete/wait ring", left);
    TC_CHECK_EQ_INT("post/start/complete/wait: get of the right neighbour's constant", 1000 + right,
                    got[0]);

    /* everybody with everybody, with MPI_Win_test polling for the end */
    int64_t *vals = tc_malloc((size_t) tc_size * sizeof(int64_t));
    TC_MPI(MPI_Win_post(world, 0, w->win));
    TC_MPI(MPI_Win_start(world, 0, w->win));
    for (int t = 0; t < tc_size; ++t) {
        vals[t] = value_of(REG_PSCW_ALL, tc_rank, t, 1);
        TC_MPI(MPI_Put(&vals[t], 1, MPI_INT64_T, t, slot_disp(w, t, slot_of(REG_PSCW_ALL, tc_rank)),
                       1, MPI_INT64_T, w->win));
    }
    TC_MPI(MPI_Get(&got[1], 1, MPI_INT64_T, left, slot_disp(w, left, counter_slot(CNT_CONSTANT)), 1,
                   MPI_INT64_T, w->win));
    TC_MPI(MPI_Win_complete(w->win));
    int done = 0;
    while (!done) {
        TC_MPI(MPI_Win_test(w->win, &done));
    }
    free(vals);
    check_region(w, REG_PSCW_ALL, 1, "post/start/complete/test all", -1);
    TC_CHECK_EQ_INT("post/start/complete/test: get of the left neighbour's constant", 1000 + left,
                    got[1]);

    MPI_Group_free(&left_group);
    MPI_Group_free(&right_group);
    MPI_Group_free(&world);
}

/* A non-atomic read-modify-write of one counter on each of two targets,
 * protected only by the exclusive lock: any overlap loses increments. */
static void test_lock_exclusive(tc_window_t *w)
{
    const int targets[2] = { 0, tc_size - 1 };

    for (int round = 0; round < EXCLUSIVE_ROUNDS; ++round) {
        for (int i = 0; i < 2; ++i) {
            int t = targets[i];
            int64_t value = -1;
            TC_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, w->win));
            TC_MPI(MPI_Get(&value, 1, MPI_INT64_T, t, slot_disp(w, t, counter_slot(CNT_EXCLUSIVE)),
                           1, MPI_INT64_T, w->win));
            TC_MPI(MPI_Win_flush(t, w->win));
            ++value;
            TC_MPI(MPI_Put(&value, 1, MPI_INT64_T, t, slot_disp(w, t, counter_slot(CNT_EXCLUSIVE)),
                           1, MPI_INT64_T, w->win));
            TC_MPI(MPI_Win_unlock(t, w->win));
        }
    }
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (0 == tc_rank || tc_size - 1 == tc_rank) {
        /* at one process both targets are the same rank */
        int64_t expected = (int64_t) tc_size * EXCLUSIVE_ROUNDS * (1 == tc_size ? 2 : 1);
        /* the window is read through a lock on itself, as MPI wants for
         * local loads of memory that others update with RMA */
        TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, tc_rank, 0, w->win));
        int64_t got = slots(w)[counter_slot(CNT_EXCLUSIVE)];
        TC_MPI(MPI_Win_unlock(tc_rank, w->win));
        TC_CHECK_EQ_INT("exclusive lock: get+put increments of the shared counter", expected, got);
    }
}

static void test_lock_shared(tc_window_t *w)
{
    for (int i = 0; i < tc_size; ++i) {
        int t = (tc_rank + i) % tc_size;
        int64_t v = value_of(REG_LOCK_SHARED, tc_rank, t, 2);
        TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, t, 0, w->win));
        TC_MPI(MPI_Put(&v, 1, MPI_INT64_T, t, slot_disp(w, t, slot_of(REG_LOCK_SHARED, tc_rank)), 1,
                       MPI_INT64_T, w->win));
        TC_MPI(MPI_Win_unlock(t, w->win));
    }
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, tc_rank, 0, w->win));
    check_region(w, REG_LOCK_SHARED, 2, "shared lock", -1);
    TC_MPI(MPI_Win_unlock(tc_rank, w->win));
}

/* lock_all epochs: a put is visible to a get of the same origin after
 * flush; flush_all does the same for every target; after flush_local the
 * origin buffer may be overwritten without changing what arrives. */
static void test_lock_all_flush(tc_window_t *w)
{
    const int right = (tc_rank + 1) % tc_size;
    int64_t *out = tc_malloc((size_t) tc_size * sizeof(int64_t));
    int64_t *in = tc_malloc((size_t) tc_size * sizeof(int64_t));
    char what[160];

    TC_MPI(MPI_Win_lock_all(0, w->win));

    /* flush: put, flush, get back, flush */
    for (int round = 0; round < 5; ++round) {
        out[0] = value_of(REG_FLUSH, tc_rank, right, round);
        in[0] = 0;
        TC_MPI(MPI_Put(&out[0], 1, MPI_INT64_T, right,
                       slot_disp(w, right, slot_of(REG_FLUSH, tc_rank)), 1, MPI_INT64_T, w->win));
        TC_MPI(MPI_Win_flush(right, w->win));
        TC_MPI(MPI_Get(&in[0], 1, MPI_INT64_T, right,
                       slot_disp(w, right, slot_of(REG_FLUSH, tc_rank)), 1, MPI_INT64_T, w->win));
        TC_MPI(MPI_Win_flush(right, w->win));
        snprintf(what, sizeof(what), "%s window, flush: round %d, value read back from rank %d",
                 tc_flavour_names[w->flavour], round, right);
        TC_CHECK_EQ_INT(what, out[0], in[0]);
    }

    /* flush_all: put to everybody, flush_all, get everything back */
    for (int t = 0; t < tc_size; ++t) {
        out[t] = value_of(REG_FLUSH_ALL, tc_rank, t, 3);
        in[t] = 0;
        TC_MPI(MPI_Put(&out[t], 1, MPI_INT64_T, t, slot_disp(w, t, slot_of(REG_FLUSH_ALL, tc_rank)),
                       1, MPI_INT64_T, w->win));
    }
    TC_MPI(MPI_Win_flush_all(w->win));
    for (int t = 0; t < tc_size; ++t) {
        TC_MPI(MPI_Get(&in[t], 1, MPI_INT64_T, t, slot_disp(w, t, slot_of(REG_FLUSH_ALL, tc_rank)),
                       1, MPI_INT64_T, w->win));
    }
    TC_MPI(MPI_Win_flush_all(w->win));
    for (int t = 0; t < tc_size; ++t) {
        snprintf(what, sizeof(what), "%s window, flush_all: value read back from rank %d",
                 tc_flavour_names[w->flavour], t);
        TC_CHECK_EQ_INT(what, out[t], in[t]);
    }

    /* flush_local: reuse the buffer before remote completion */
    for (int t = 0; t < tc_size; ++t) {
        out[t] = value_of(REG_FLUSH_LOCAL, tc_rank, t, 4);
        TC_MPI(MPI_Put(&out[t], 1, MPI_INT64_T, t,
                       slot_disp(w, t, slot_of(REG_FLUSH_LOCAL, tc_rank)), 1, MPI_INT64_T, w->win));
        TC_MPI(MPI_Win_flush_local(t, w->win));
        out[t] = 0x0BADBADBADBAD;
    }
    TC_MPI(MPI_Win_flush_local_all(w->win));
    TC_MPI(MPI_Win_unlock_all(w->win));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));

    TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, tc_rank, 0, w->win));
    check_region(w, REG_FLUSH_ALL, 3, "flush_all", -1);
    check_region(w, REG_FLUSH_LOCAL, 4, "flush_local then buffer reuse", -1);
    TC_MPI(MPI_Win_unlock(tc_rank, w->win));
    free(out);
    free(in);
}

static int compare_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
    return (x > y) - (x < y);
}

static void test_requests(tc_window_t *w)
{
    const int right = (tc_rank + 1) % tc_size;
    int64_t out, got = 0, one = 1;
    int64_t fetched[RGET_ACC_ROUNDS];
    MPI_Request req;
    char what[160];

    TC_MPI(MPI_Win_lock_all(0, w->win));

    /* rput: after MPI_Wait the buffer is ours again */
    for (int t = 0; t < tc_size; ++t) {
        out = value_of(REG_RPUT, tc_rank, t, 5);
        TC_MPI(MPI_Rput(&out, 1, MPI_INT64_T, t, slot_disp(w, t, slot_of(REG_RPUT, tc_rank)), 1,
                        MPI_INT64_T, w->win, &req));
        TC_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        out = 0x0BADBADBADBAD;
    }

    /* rget: after MPI_Wait the data is there, no flush needed */
    TC_MPI(MPI_Rget(&got, 1, MPI_INT64_T, right, slot_disp(w, right, counter_slot(CNT_CONSTANT)), 1,
                    MPI_INT64_T, w->win, &req));
    TC_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    snprintf(what, sizeof(what), "%s window, rget of rank %d's constant",
             tc_flavour_names[w->flavour], right);
    TC_CHECK_EQ_INT(what, 1000 + right, got);

    /* raccumulate: one SUM of (rank + 1) into every rank's counter */
    for (int t = 0; t < tc_size; ++t) {
        int64_t add = tc_rank + 1;
        TC_MPI(MPI_Raccumulate(&add, 1, MPI_INT64_T, t,
                               slot_disp(w, t, counter_slot(CNT_RACCUMULATE)), 1, MPI_INT64_T,
                               MPI_SUM, w->win, &req));
        TC_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    }

    /* rget_accumulate: increments of rank 0's counter, each fetched value
     * is that of a distinct moment */
    for (int i = 0; i < RGET_ACC_ROUNDS; ++i) {
        TC_MPI(MPI_Rget_accumulate(&one, 1, MPI_INT64_T, &fetched[i], 1, MPI_INT64_T, 0,
                                   slot_disp(w, 0, counter_slot(CNT_RGET_ACC)), 1, MPI_INT64_T,
                                   MPI_SUM, w->win, &req));
        TC_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    }
    TC_MPI(MPI_Win_unlock_all(w->win));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));

    TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, tc_rank, 0, w->win));
    check_region(w, REG_RPUT, 5, "rput then buffer reuse", -1);
    snprintf(what, sizeof(what), "%s window, raccumulate SUM of rank+1 from all ranks",
             tc_flavour_names[w->flavour]);
    TC_CHECK_EQ_INT(what, (int64_t) tc_size * (tc_size + 1) / 2,
                    slots(w)[counter_slot(CNT_RACCUMULATE)]);
    if (0 == tc_rank) {
        snprintf(what, sizeof(what), "%s window, rget_accumulate final counter",
                 tc_flavour_names[w->flavour]);
        TC_CHECK_EQ_INT(what, (int64_t) tc_size * RGET_ACC_ROUNDS,
                        slots(w)[counter_slot(CNT_RGET_ACC)]);
    }
    TC_MPI(MPI_Win_unlock(tc_rank, w->win));

    /* the fetched values of all ranks together are 0 .. n-1, each once */
    int64_t *all =
        0 == tc_rank ? tc_malloc((size_t) tc_size * RGET_ACC_ROUNDS * sizeof(int64_t)) : NULL;
    TC_MPI(MPI_Gather(fetched, RGET_ACC_ROUNDS, MPI_INT64_T, all, RGET_ACC_ROUNDS, MPI_INT64_T, 0,
                      MPI_COMM_WORLD));
    if (0 == tc_rank) {
        qsort(all, (size_t) tc_size * RGET_ACC_ROUNDS, sizeof(int64_t), compare_int64);
        for (int i = 0; i < tc_size * RGET_ACC_ROUNDS; ++i) {
            if (all[i] != i) {
                TC_FAIL("%s window, rget_accumulate: sorted fetched value %d is %" PRId64
                        " (values fetched twice or skipped)",
                        tc_flavour_names[w->flavour], i, all[i]);
                break;
            }
        }
        free(all);
    }
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "rma_sync");
    const size_t win_bytes = counter_slot(NUM_COUNTERS) * sizeof(int64_t);

    for (int f = 0; f < TC_NUM_FLAVOURS; ++f) {
        tc_window_t w;
        tc_window_open(&w, (enum tc_flavour) f, win_bytes);
        /* peers read it only after the barrier below */
        slots(&w)[counter_slot(CNT_CONSTANT)] = 1000 + tc_rank;
        TC_MPI(MPI_Barrier(MPI_COMM_WORLD));

        test_fence(&w);
        test_pscw(&w);
        test_lock_exclusive(&w);
        test_lock_shared(&w);
        test_lock_all_flush(&w);
        test_requests(&w);
        tc_window_close(&w);
        tc_phase("%s window done", tc_flavour_names[f]);
        if (TC_WIN_DYNAMIC == f) {
            /* allocate windows use shared memory on one node */
            tc_expect_pvars(TC_PVAR_THIS_RANK, "put_count get_count atomic_count");
        }
    }
    return tc_finish();
}
