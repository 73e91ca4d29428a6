/*
 * MPI_Fetch_and_op and MPI_Compare_and_swap under contention from all ranks:
 *  - fetch-and-add on int64 and int32 counters of every rank: each counter
 *    ends at the number of increments, and the values fetched from it are
 *    0 .. n-1, each exactly once;
 *  - fetch-and-op REPLACE chains: every token swapped in comes out exactly
 *    once (or is the last one standing);
 *  - a spin lock made of compare-and-swap: a counter updated with plain
 *    get and put inside the lock ends exact, and nobody ever finds another
 *    owner inside;
 *  - rounds in which every rank tries the same compare-and-swap: exactly one
 *    wins, and every loser fetches the winner's value.
 */
#include "common.h"

#include <sched.h>

#define FADD_ROUNDS 100 /* increments per rank per target */
#define SWAP_ROUNDS 50  /* tokens per rank */
#define LOCK_ROUNDS 25  /* critical sections per rank */
#define CAS_ROUNDS  60  /* contested compare-and-swap rounds */
#define LOCK_FREE   0

enum slot {
    SLOT_FADD64,
    SLOT_FADD32, /* two int32 halves: counter, then a neighbour that must stay 0 */
    SLOT_SWAP,
    SLOT_LOCK,
    SLOT_PROTECTED,
    SLOT_CAS,
    NUM_SLOTS
};

static MPI_Aint slot_disp(const tc_window_t *w, int target, enum slot s)
{
    return tc_disp(w, target, (size_t) s * sizeof(int64_t));
}

static int64_t *slots(const tc_window_t *w)
{
    return (int64_t *) w->base;
}

static int compare_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
    return (x > y) - (x < y);
}

/* Rank 0 gets every rank's fetched values for each target and checks that
 * they are 0 .. n-1 once each.  FETCHED is [target][round] on each rank. */
static void check_fetched_sequence(const char *what, const int64_t *fetched, int rounds)
{
    const size_t per_rank = (size_t) tc_size * (size_t) rounds;
    int64_t *all = 0 == tc_rank ? tc_malloc(per_rank * (size_t) tc_size * sizeof(int64_t)) : NULL;
    int64_t *column = 0 == tc_rank ? tc_malloc((size_t) tc_size * rounds * sizeof(int64_t)) : NULL;

    TC_MPI(MPI_Gather(fetched, (int) per_rank, MPI_INT64_T, all, (int) per_rank, MPI_INT64_T, 0,
                      MPI_COMM_WORLD));
    if (0 != tc_rank) {
        return;
    }
    for (int t = 0; t < tc_size; ++t) {
        for (int r = 0; r < tc_size; ++r) {
            memcpy(column + (size_t) r * rounds, all + (size_t) r * per_rank + (size_t) t * rounds,
                   (size_t) rounds * sizeof(int64_t));
        }
        qsort(column, (size_t) tc_size * rounds, sizeof(int64_t), compare_int64);
        for (int i = 0; i < tc_size * rounds; ++i) {
            if (column[i] != i) {
                TC_FAIL("%s on rank %d: sorted fetched value %d is %" PRId64
                        " (a value fetched twice or never: an increment was not atomic)",
                        what, t, i, column[i]);
                break;
            }
        }
    }
    free(all);
    free(column);
}

static void test_fetch_add(tc_window_t *w)
{
    int64_t *fetched64 = tc_malloc((size_t) tc_size * FADD_ROUNDS * sizeof(int64_t));
    int64_t *fetched32 = tc_malloc((size_t) tc_size * FADD_ROUNDS * sizeof(int64_t));
    int32_t *results32 = tc_malloc((size_t) tc_size * FADD_ROUNDS * sizeof(int32_t));
    const int64_t one64 = 1;
    const int32_t one32 = 1;

    TC_MPI(MPI_Win_lock_all(0, w->win));
    for (int i = 0; i < FADD_ROUNDS; ++i) {
        for (int k = 0; k < tc_size; ++k) {
            int t = (tc_rank + k) % tc_size;
            TC_MPI(MPI_Fetch_and_op(&one64, &fetched64[t * FADD_ROUNDS + i], MPI_INT64_T, t,
                                    slot_disp(w, t, SLOT_FADD64), MPI_SUM, w->win));
            TC_MPI(MPI_Fetch_and_op(&one32, &results32[t * FADD_ROUNDS + i], MPI_INT32_T, t,
                                    slot_disp(w, t, SLOT_FADD32), MPI_SUM, w->win));
        }
        /* a flush now and then: results are checked only at the end, but
         * completions should be reaped during the run, not all at once */
        if (i % 10 == 9) {
            TC_MPI(MPI_Win_flush_all(w->win));
        }
    }
    TC_MPI(MPI_Win_unlock_all(w->win));
    for (int i = 0; i < tc_size * FADD_ROUNDS; ++i) {
        fetched32[i] = results32[i];
    }
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));

    TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, tc_rank, 0, w->win));
    int32_t halves[2];
    memcpy(halves, &slots(w)[SLOT_FADD32], sizeof(halves));
    TC_CHECK_EQ_INT("int64 fetch_and_op SUM: final counter", (int64_t) tc_size * FADD_ROUNDS,
                    slots(w)[SLOT_FADD64]);
    TC_CHECK_EQ_INT("int32 fetch_and_op SUM: final counter", tc_size * FADD_ROUNDS, halves[0]);
    TC_CHECK_EQ_INT("int32 fetch_and_op SUM: the int32 next to the counter", 0, halves[1]);
    TC_MPI(MPI_Win_unlock(tc_rank, w->win));

    check_fetched_sequence("int64 fetch_and_op SUM", fetched64, FADD_ROUNDS);
    check_fetched_sequence("int32 fetch_and_op SUM", fetched32, FADD_ROUNDS);
    free(fetched64);
    free(fetched32);
    free(results32);
}

/* Tokens are unique over the job; the slot starts at -1.  Every token
 * swapped in is later swapped out by somebody, except the last one. */
static void test_swap_chain(tc_window_t *w)
{
    const int target = tc_size - 1;
    int64_t out[SWAP_ROUNDS];

    TC_MPI(MPI_Win_lock_all(0, w->win));
    for (int i = 0; i < SWAP_ROUNDS; ++i) {
        int64_t token = (int64_t) tc_rank * SWAP_ROUNDS + i;
        TC_MPI(MPI_Fetch_and_op(&token, &out[i], MPI_INT64_T, target,
                                slot_disp(w, target, SLOT_SWAP), MPI_REPLACE, w->win));
        TC_MPI(MPI_Win_flush(target, w->win));
    }
    TC_MPI(MPI_Win_unlock_all(w->win));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));

    int64_t last = 0;
    if (target == tc_rank) {
        TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, tc_rank, 0, w->win));
        last = slots(w)[SLOT_SWAP];
        TC_MPI(MPI_Win_unlock(tc_rank, w->win));
    }
    TC_MPI(MPI_Bcast(&last, 1, MPI_INT64_T, target, MPI_COMM_WORLD));

    const int n = tc_size * SWAP_ROUNDS;
    int64_t *all = 0 == tc_rank ? tc_malloc(((size_t) n + 1) * sizeof(int64_t)) : NULL;
    TC_MPI(MPI_Gather(out, SWAP_ROUNDS, MPI_INT64_T, all, SWAP_ROUNDS, MPI_INT64_T, 0,
                      MPI_COMM_WORLD));
    if (0 == tc_rank) {
        /* fetched values plus the final one are the start value -1 and
         * every token, each once */
        all[n] = last;
        qsort(all, (size_t) n + 1, sizeof(int64_t), compare_int64);
        for (int i = 0; i <= n; ++i) {
            if (all[i] != i - 1) {
                TC_FAIL("fetch_and_op REPLACE chain: sorted value %d is %" PRId64
                        ", expected %d (a swap lost or duplicated a token)",
                        i, all[i], i - 1);
                break;
            }
        }
        free(all);
    }
}

static void test_cas_lock(tc_window_t *w)
{
    const int lock_rank = 0, data_rank = tc_size - 1;
    const int64_t me = tc_rank + 1, free_value = LOCK_FREE, ignored = 0;
    long spins = 0;

    TC_MPI(MPI_Win_lock_all(0, w->win));
    for (int i = 0; i < LOCK_ROUNDS; ++i) {
        int64_t previous = -1;
        do {
            TC_MPI(MPI_Compare_and_swap(&me, &free_value, &previous, MPI_INT64_T, lock_rank,
                                        slot_disp(w, lock_rank, SLOT_LOCK), w->win));
            TC_MPI(MPI_Win_flush(lock_rank, w->win));
            ++spins;
            if (LOCK_FREE != previous) {
                /* oversubscribed, the owner needs the core we spin on */
                sched_yield();
            }
        } while (LOCK_FREE != previous);

        /* inside: the lock must name us */
        int64_t owner = -1;
        TC_MPI(MPI_Fetch_and_op(&ignored, &owner, MPI_INT64_T, lock_rank,
                                slot_disp(w, lock_rank, SLOT_LOCK), MPI_NO_OP, w->win));
        TC_MPI(MPI_Win_flush(lock_rank, w->win));
        TC_CHECK_EQ_INT("CAS lock: owner seen inside the critical section", me, owner);

        /* a read-modify-write that is not atomic by itself */
        int64_t value = -1;
        TC_MPI(MPI_Get(&value, 1, MPI_INT64_T, data_rank, slot_disp(w, data_rank, SLOT_PROTECTED),
                       1, MPI_INT64_T, w->win));
        TC_MPI(MPI_Win_flush(data_rank, w->win));
        ++value;
        TC_MPI(MPI_Put(&value, 1, MPI_INT64_T, data_rank, slot_disp(w, data_rank, SLOT_PROTECTED),
                       1, MPI_INT64_T, w->win));
        /* the put must land before anybody else can take the lock */
        TC_MPI(MPI_Win_flush(data_rank, w->win));

        int64_t released = -1;
        TC_MPI(MPI_Compare_and_swap(&free_value, &me, &released, MPI_INT64_T, lock_rank,
                                    slot_disp(w, lock_rank, SLOT_LOCK), w->win));
        TC_MPI(MPI_Win_flush(lock_rank, w->win));
        TC_CHECK_EQ_INT("CAS lock: lock word when releasing", me, released);
    }
    TC_MPI(MPI_Win_unlock_all(w->win));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));

    if (data_rank == tc_rank) {
        TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, tc_rank, 0, w->win));
        TC_CHECK_EQ_INT("CAS lock: counter updated by get+put under the lock",
                        (int64_t) tc_size * LOCK_ROUNDS, slots(w)[SLOT_PROTECTED]);
        TC_MPI(MPI_Win_unlock(tc_rank, w->win));
    }
    long total_spins = 0;
    TC_MPI(MPI_Reduce(&spins, &total_spins, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
    tc_phase("CAS lock: %d critical sections, %ld compare-and-swap attempts", tc_size * LOCK_ROUNDS,
             total_spins);
}

static void test_cas_rounds(tc_window_t *w)
{
    TC_MPI(MPI_Win_lock_all(0, w->win));
    for (int round = 0; round < CAS_ROUNDS; ++round) {
        const int target = round % tc_size;
        /* the word at TARGET counts the rounds it has hosted */
        const int64_t expect = round / tc_size, next = expect + 1;
        int64_t fetched = -1;

        TC_MPI(MPI_Compare_and_swap(&next, &expect, &fetched, MPI_INT64_T, target,
                                    slot_disp(w, target, SLOT_CAS), w->win));
        TC_MPI(MPI_Win_flush(target, w->win));
        int won = fetched == expect, winners = 0;
        TC_MPI(MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        if (0 == tc_rank && 1 != winners) {
            TC_FAIL("compare_and_swap round %d on rank %d: %d winners, expected exactly 1", round,
                    target, winners);
        }
        if (!won) {
            char what[96];
            snprintf(what, sizeof(what), "compare_and_swap round %d on rank %d: loser's fetch",
                     round, target);
            TC_CHECK_EQ_INT(what, next, fetched);
        }
    }
    TC_MPI(MPI_Win_unlock_all(w->win));
}

int main(int argc, char **argv)
{
    tc_window_t w;

    tc_init(&argc, &argv, "rma_atomics");
    tc_window_open(&w, TC_WIN_CREATE, NUM_SLOTS * sizeof(int64_t));
    TC_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, tc_rank, 0, w.win));
    slots(&w)[SLOT_SWAP] = -1;
    slots(&w)[SLOT_LOCK] = LOCK_FREE;
    TC_MPI(MPI_Win_unlock(tc_rank, w.win));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));

    test_fetch_add(&w);
    tc_phase("fetch_and_op SUM done");
    test_swap_chain(&w);
    tc_phase("fetch_and_op REPLACE done");
    test_cas_lock(&w);
    tc_phase("compare_and_swap lock done");
    test_cas_rounds(&w);
    tc_phase("compare_and_swap rounds done");

    tc_window_close(&w);
    tc_expect_pvars(TC_PVAR_THIS_RANK, "atomic_count");
    return tc_finish();
}
