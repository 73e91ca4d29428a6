/*
 * A mutex made of MPI_Compare_and_swap on a lock word that lives on rank 0,
 * where rank 0 competes for the lock too: the pattern of PGAS runtimes and
 * distributed hash tables over MPI RMA.
 *
 * Every rank (with -t N, every one of N threads per rank, under
 * MPI_THREAD_MULTIPLE) takes the lock ITERATIONS times (-n, default 50):
 * compare-and-swap FREE -> owner id until it succeeds, then, under the
 * lock, MPI_Get of a counter on rank 0, a check that the lock word still
 * names it, MPI_Put of counter + 1, and a compare-and-swap back to FREE;
 * MPI_Win_flush after every call.  On one node rank 0's compare-and-swap
 * on its own window is done by osc/rdma in place, and its flush of itself
 * has nothing to wait for, so while it spins it never calls into the BTL's
 * progress: the holder's get and put on rank 0 must complete without it.
 * Across nodes it goes through the BTL like the others' (our patch to
 * osc/rdma: in place it was not atomic with their network swaps).
 *
 * -w allocate takes an MPI_Win_allocate window (default MPI_Win_create):
 * only across nodes, where its node's ranks reach rank 0's memory directly.
 *
 * Checks: the counter ends at ranks x threads x ITERATIONS (no update
 * lost), nobody finds another owner inside, every release finds itself;
 * across nodes, every rank's swaps reached our BTL, also those on memory
 * osc/rdma reaches directly (rank 0's own, and with -w allocate its
 * node's), which it sends without a registration: refused, they became a
 * copy-compare-copy that the other node's network swaps could interleave
 * with (about one run in a hundred on 2 simulated hosts).
 */
#include "common.h"

#include <pthread.h>
#include <sched.h>

#define LOCK_FREE 0

enum { SLOT_LOCK, SLOT_COUNTER, NUM_SLOTS };

typedef struct {
    tc_window_t *w;
    int thread;
    int threads;
    int iterations;
} worker_t;

static int64_t cas(MPI_Win win, MPI_Aint where, int64_t expected, int64_t desired)
{
    int64_t old = -1;

    TC_MPI(MPI_Compare_and_swap(&desired, &expected, &old, MPI_INT64_T, 0, where, win));
    TC_MPI(MPI_Win_flush(0, win));
    return old;
}

static void *work(void *arg)
{
    worker_t *me = arg;
    MPI_Win win = me->w->win;
    MPI_Aint lock = tc_disp(me->w, 0, SLOT_LOCK * sizeof(int64_t));
    MPI_Aint counter = tc_disp(me->w, 0, SLOT_COUNTER * sizeof(int64_t));
    int64_t id = (int64_t) tc_rank * me->threads + me->thread + 1;

    for (int i = 0; i < me->iterations; ++i) {
        int64_t value = -1, holder = -1, old;

        /* a loser yields, as real spin locks back off: on a machine with
         * fewer cores than threads the holder needs the CPU */
        while (LOCK_FREE != cas(win, lock, LOCK_FREE, id)) {
            sched_yield();
        }
        TC_MPI(MPI_Get(&value, 1, MPI_INT64_T, 0, counter, 1, MPI_INT64_T, win));
        TC_MPI(MPI_Get(&holder, 1, MPI_INT64_T, 0, lock, 1, MPI_INT64_T, win));
        TC_MPI(MPI_Win_flush(0, win));
        TC_CHECK(holder == id, "iteration %d: owner %" PRId64 " found %" PRId64 " in the lock", i,
                 id, holder);
        ++value;
        TC_MPI(MPI_Put(&value, 1, MPI_INT64_T, 0, counter, 1, MPI_INT64_T, win));
        TC_MPI(MPI_Win_flush(0, win));
        old = cas(win, lock, id, LOCK_FREE);
        TC_CHECK(old == id, "iteration %d: owner %" PRId64 " released a lock held by %" PRId64, i,
                 id, old);
    }
    return NULL;
}

/* Every rank swaps at least twice per critical section. */
static void check_swaps_reached_us(int threads, int iterations)
{
    int *nodes = tc_node_of_ranks();
    int spans = 0;
    unsigned long made = 0;

    for (int r = 0; r < tc_size; ++r) {
        spans |= nodes[r] != nodes[0];
    }
    free(nodes);
    if (!spans || tc_stock_run() || 0 != btl_ofi_pvars_read("atomic_count", &made)) {
        return;
    }
    TC_CHECK(made >= 2UL * (unsigned long) (threads * iterations),
             "%lu atomics through btl/ofi, fewer than this rank's %d swaps on rank 0's lock", made,
             2 * threads * iterations);
}

int main(int argc, char **argv)
{
    int threads = 1, iterations = 50, opt, provided;
    int flavour = TC_WIN_CREATE;
    pthread_t tid[16];
    worker_t workers[16];
    tc_window_t w;

    for (int i = 1; i < argc; ++i) {
        if (0 == strcmp(argv[i], "-t") && i + 1 < argc) {
            threads = atoi(argv[i + 1]);
        }
    }
    tc_init_thread(&argc, &argv, "rma_spin_lock",
                   threads > 1 ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE);
    optind = 1;
    while ((opt = getopt(argc, argv, "t:n:w:")) != -1) {
        if ('n' == opt) {
            iterations = atoi(optarg);
        } else if ('w' == opt && 0 == strcmp(optarg, "allocate")) {
            flavour = TC_WIN_ALLOCATE;
        } else if ('w' == opt && 0 != strcmp(optarg, "create")) {
            TC_FAIL("-w takes create or allocate, not %s", optarg);
        }
    }
    MPI_Query_thread(&provided);
    if (threads < 1 || threads > 16) {
        TC_FAIL("-t takes 1 to 16 threads, not %d", threads);
        threads = 1;
    }
    tc_window_open(&w, flavour, NUM_SLOTS * sizeof(int64_t));
    TC_MPI(MPI_Win_lock_all(0, w.win));
    for (int t = 0; t < threads; ++t) {
        workers[t] = (worker_t){ &w, t, threads, iterations };
        if (0 != pthread_create(&tid[t], NULL, work, &workers[t])) {
            TC_FAIL("pthread_create failed");
            threads = t;
            break;
        }
    }
    for (int t = 0; t < threads; ++t) {
        pthread_join(tid[t], NULL);
    }
    TC_MPI(MPI_Win_unlock_all(w.win));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (0 == tc_rank) {
        int64_t *slots = (int64_t *) w.base;
        int64_t expected = (int64_t) tc_size * threads * iterations;
        TC_CHECK(slots[SLOT_COUNTER] == expected,
                 "counter is %" PRId64 ", expected %" PRId64 ": updates under the lock were lost",
                 slots[SLOT_COUNTER], expected);
        TC_CHECK(slots[SLOT_LOCK] == LOCK_FREE, "lock word is %" PRId64 " at the end",
                 slots[SLOT_LOCK]);
        tc_phase("%d ranks x %d threads x %d critical sections, counter %" PRId64
                 " (thread level %d)",
                 tc_size, threads, iterations, slots[SLOT_COUNTER], provided);
    }
    check_swaps_reached_us(threads, iterations);
    /* on one node osc/rdma makes compare-and-swap a get and a put under a
     * lock of its own, never a BTL atomic */
    tc_expect_pvars(TC_PVAR_SUM, "put_count get_count");
    tc_window_close(&w);
    return tc_finish();
}
