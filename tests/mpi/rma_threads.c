/*
 * MPI_THREAD_MULTIPLE: four threads per rank issue MPI_Put and
 * MPI_Fetch_and_op concurrently, to all ranks, inside one lock_all epoch of
 * an MPI_Win_create window.  Every put must land in its own slot, every
 * counter must end at the number of increments sent to it, and the values
 * fetched from a counter by all threads of all ranks must be 0 .. n-1, each
 * once.  The manifest runs it with one and with four contexts per module,
 * so that threads share a context or each get their own.
 */
#include "common.h"

#include <pthread.h>

#define NUM_THREADS 4
#define ROUNDS      100 /* puts and fetch_and_ops per thread */
#define FLUSH_EVERY 16  /* a thread flushes its targets now and then */

typedef struct {
    int tid;
    tc_window_t *w;
    int64_t fetched[ROUNDS];
    int fetched_from[ROUNDS];
    int64_t tokens[ROUNDS]; /* put origins: must live until the flush */
} worker_t;

/* Slot of round I of thread TID of rank ORIGIN: unique over the job. */
static size_t put_slot(int origin, int tid, int i)
{
    return ((size_t) origin * NUM_THREADS + (size_t) tid) * ROUNDS + (size_t) i;
}

static size_t counter_slot(void)
{
    return (size_t) tc_size * NUM_THREADS * ROUNDS;
}

static int put_target(int origin, int tid, int i)
{
    return (origin + 1 + tid + i) % tc_size;
}

static int fop_target(int origin, int tid, int i)
{
    return (origin + tid + 3 * i) % tc_size;
}

static int64_t token_of(int origin, int tid, int i)
{
    return -(((int64_t) origin << 40) | ((int64_t) tid << 32) | (int64_t) (i + 1));
}

static void *worker_main(void *arg)
{
    worker_t *me = arg;
    const int64_t one = 1;
    tc_window_t *w = me->w;

    for (int i = 0; i < ROUNDS; ++i) {
        int pt = put_target(tc_rank, me->tid, i), ft = fop_target(tc_rank, me->tid, i);
        me->tokens[i] = token_of(tc_rank, me->tid, i);
        TC_MPI(MPI_Put(&me->tokens[i], 1, MPI_INT64_T, pt,
                       tc_disp(w, pt, put_slot(tc_rank, me->tid, i) * sizeof(int64_t)), 1,
                       MPI_INT64_T, w->win));
        me->fetched_from[i] = ft;
        TC_MPI(MPI_Fetch_and_op(&one, &me->fetched[i], MPI_INT64_T, ft,
                                tc_disp(w, ft, counter_slot() * sizeof(int64_t)), MPI_SUM, w->win));
        if (i % FLUSH_EVERY == FLUSH_EVERY - 1) {
            TC_MPI(MPI_Win_flush(ft, w->win));
            TC_MPI(MPI_Win_flush(pt, w->win));
        }
    }
    TC_MPI(MPI_Win_flush_all(w->win));
    return NULL;
}

/* Increments rank TARGET's counter receives from the whole job. */
static int increments_for(int target)
{
    int n = 0;
    for (int o = 0; o < tc_size; ++o) {
        for (int tid = 0; tid < NUM_THREADS; ++tid) {
            for (int i = 0; i < ROUNDS; ++i) {
                n += fop_target(o, tid, i) == target;
            }
        }
    }
    return n;
}

static void check_results(tc_window_t *w, worker_t *workers)
{
    const int max_count = tc_size * NUM_THREADS * ROUNDS;
    const int64_t *slots = (const int64_t *) w->base;
    char what[160];

    TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, tc_rank, 0, w->win));
    for (int o = 0; o < tc_size; ++o) {
        for (int tid = 0; tid < NUM_THREADS; ++tid) {
            for (int i = 0; i < ROUNDS; ++i) {
                int mine = put_target(o, tid, i) == tc_rank;
                int64_t expected = mine ? token_of(o, tid, i) : 0;
                snprintf(what, sizeof(what), "put of rank %d thread %d round %d (slot %zu)", o, tid,
                         i, put_slot(o, tid, i));
                TC_CHECK_EQ_INT(what, expected, slots[put_slot(o, tid, i)]);
            }
        }
    }
    TC_CHECK_EQ_INT("fetch_and_op SUM counter", increments_for(tc_rank), slots[counter_slot()]);
    TC_MPI(MPI_Win_unlock(tc_rank, w->win));

    /* seen[t * max_count + v]: how often value v was fetched from rank t */
    int *seen = calloc((size_t) tc_size * max_count, sizeof(int));
    int *total = 0 == tc_rank ? calloc((size_t) tc_size * max_count, sizeof(int)) : NULL;
    if (NULL == seen || (0 == tc_rank && NULL == total)) {
        TC_FAIL("out of memory");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int tid = 0; tid < NUM_THREADS; ++tid) {
        for (int i = 0; i < ROUNDS; ++i) {
            int64_t v = workers[tid].fetched[i];
            if (v < 0 || v >= max_count) {
                TC_FAIL("thread %d round %d: fetched %" PRId64 " from rank %d, out of range", tid,
                        i, v, workers[tid].fetched_from[i]);
                continue;
            }
            ++seen[workers[tid].fetched_from[i] * max_count + (int) v];
        }
    }
    TC_MPI(MPI_Reduce(seen, total, tc_size * max_count, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD));
    if (0 == tc_rank) {
        for (int t = 0; t < tc_size; ++t) {
            int n = increments_for(t);
            for (int v = 0; v < max_count; ++v) {
                int want = v < n ? 1 : 0;
                if (total[t * max_count + v] != want) {
                    TC_FAIL("counter of rank %d: value %d fetched %d times, expected %d (an "
                            "increment was lost or doubled)",
                            t, v, total[t * max_count + v], want);
                    break;
                }
            }
        }
    }
    free(seen);
    free(total);
}

int main(int argc, char **argv)
{
    tc_window_t w;
    pthread_t threads[NUM_THREADS];
    static worker_t workers[NUM_THREADS];

    tc_init_thread(&argc, &argv, "rma_threads", MPI_THREAD_MULTIPLE);
    int provided = MPI_THREAD_SINGLE;
    TC_MPI(MPI_Query_thread(&provided));
    if (MPI_THREAD_MULTIPLE != provided) {
        /* running threads now would only crash */
        TC_FAIL("MPI_Query_thread says %d, not MPI_THREAD_MULTIPLE", provided);
        return tc_finish();
    }

    tc_window_open(&w, TC_WIN_CREATE, (counter_slot() + 1) * sizeof(int64_t));
    double t0 = MPI_Wtime();
    TC_MPI(MPI_Win_lock_all(0, w.win));
    for (int tid = 0; tid < NUM_THREADS; ++tid) {
        workers[tid].tid = tid;
        workers[tid].w = &w;
        if (0 != pthread_create(&threads[tid], NULL, worker_main, &workers[tid])) {
            TC_FAIL("pthread_create failed");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    for (int tid = 0; tid < NUM_THREADS; ++tid) {
        pthread_join(threads[tid], NULL);
    }
    TC_MPI(MPI_Win_unlock_all(w.win));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    tc_phase("%d threads x %d rounds of put + fetch_and_op in %.2fs", NUM_THREADS, ROUNDS,
             MPI_Wtime() - t0);

    check_results(&w, workers);
    tc_window_close(&w);
    tc_expect_pvars(TC_PVAR_THIS_RANK, "put_count atomic_count");
    return tc_finish();
}
