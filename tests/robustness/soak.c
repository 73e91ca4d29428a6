/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * soak: long-running mixed traffic under MPI_THREAD_MULTIPLE.  Every
 * thread of every rank owns a duplicate of MPI_COMM_WORLD and loops over
 * cycles of:
 *   - one lock_all epoch in a window: rounds of puts into the origin's
 *     own slots at every target, MPI_Fetch_and_op(+1) on every target's
 *     counter and gets of the slots back after a flush; checked;
 *   - an isend/irecv exchange with every other rank in sizes that take
 *     ob1's short, eager and rendezvous paths; checked.
 * The first C threads (-c, default all) churn windows: each cycle's window
 * is MPI_Win_create'd over fresh malloc'd memory and freed (MPI_Win_free,
 * free()) after its epoch.  The other threads keep one window for the
 * whole run.  Thread 0 of rank 0 decides when to stop (time budget),
 * broadcast per cycle so that every rank runs the same number of
 * collective cycles.
 *
 * With -S only thread 0 churns, and it creates and frees its window while
 * the rank's other threads wait outside MPI (a pthread barrier before and
 * after every cycle's traffic).
 *
 *   soak [-s seconds] [-t threads] [-r rounds_per_window] [-p pidfile_dir]
 *        [-m both|rma|p2p] [-c churning_threads] [-S]
 *
 * With -p, each rank writes DIR/rank.R containing its pid so that the
 * script can sample its memory.  Thread 0 prints
 *   HEAP rank=R seconds=T cycles=C windows=W inuse_kb=K mr_held=M
 * about every 5 s: C its own cycles, W the windows the rank's threads have
 * created and freed so far, K the bytes malloc'd and not freed (all arenas:
 * mallinfo2; unlike RSS it does not count freed memory that malloc keeps),
 * M the memory registrations btl/ofi holds.  Prints PVARS and RESULT lines
 * at the end.
 */

#include <malloc.h>
#include <pthread.h>
#include <unistd.h>

#include "faults_common.h"

#define SLOTS       32
#define MAX_THREADS 16

static const int msg_sizes[] = { 8, 3000, 12000, 70000 };
#define NUM_MSG_SIZES ((int) (sizeof(msg_sizes) / sizeof(msg_sizes[0])))

typedef struct {
    int index;
    MPI_Comm comm;
    int nprocs;
    int rounds;
    int do_rma, do_p2p;
    MPI_Win win; /* MPI_WIN_NULL: this thread churns windows */
    int64_t *base;
    double deadline;
    long ops;
    long cycles;
    long windows; /* created and freed by this thread */
    long mpi_errors;
    long mismatches;
} worker_t;

static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
static long windows_freed; /* by all threads of this rank; atomic */

static void thread_check(worker_t *w, int rc, const char *what)
{
    if (MPI_SUCCESS != rc) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        pthread_mutex_lock(&report_lock);
        if (++w->mpi_errors <= 5) {
            printf("MPI_ERROR rank=%d thread=%d call=%s: %s\n", fc_rank, w->index, what, msg);
            fflush(stdout);
        }
        pthread_mutex_unlock(&report_lock);
    }
}
#define TC(w, call) thread_check((w), (call), #call)

static void thread_mismatch(worker_t *w, const char *what, long long got, long long want)
{
    pthread_mutex_lock(&report_lock);
    if (++w->mismatches <= 5) {
        printf("MISMATCH rank=%d thread=%d cycle=%ld: %s = %llx, expected %llx\n", fc_rank,
               w->index, w->cycles, what, got, want);
        fflush(stdout);
    }
    pthread_mutex_unlock(&report_lock);
}

static int64_t slot_value(int origin, int thread, long cycle, int round, int slot)
{
    return ((int64_t) origin << 48) ^ ((int64_t) thread << 44) ^ ((int64_t) cycle << 16)
           ^ ((int64_t) round << 8) ^ slot;
}

/*
 * One lock_all epoch in @p win (whose local memory is @p base): rounds of
 * puts into this origin's slots at every target, a fetch_and_op on every
 * target's counter and gets of the slots back, all checked.  @p epoch
 * counts the earlier epochs in this window: the counter only grows, and a
 * barrier ends each epoch, so every value fetched now lies in this epoch's
 * range.
 */
static void rma_epoch(worker_t *w, int me, MPI_Win win, const int64_t *base, long epoch,
                      bool epoch_ends_in_barrier)
{
    int n = w->nprocs;
    int64_t src[SLOTS], got[SLOTS], one = 1, fetched;
    int64_t per_epoch = (int64_t) n * w->rounds;

    TC(w, MPI_Win_lock_all(0, win));
    for (int r = 0; r < w->rounds; ++r) {
        for (int k = 0; k < n; ++k) {
            int t = (me + k) % n;
            for (int s = 0; s < SLOTS; ++s) {
                src[s] = slot_value(me, w->index, w->cycles, r, s);
                TC(w, MPI_Put(src + s, 1, MPI_INT64_T, t, (MPI_Aint) (me * SLOTS + s), 1,
                              MPI_INT64_T, win));
            }
            /* sentinels: an operation that silently did nothing shows here,
             * not only at the target */
            fetched = -1;
            memset(got, 0xff, sizeof(got));
            TC(w, MPI_Fetch_and_op(&one, &fetched, MPI_INT64_T, t, (MPI_Aint) (n * SLOTS), MPI_SUM,
                                   win));
            TC(w, MPI_Win_flush(t, win));
            if (fetched < per_epoch * epoch || fetched >= per_epoch * (epoch + 1)) {
                thread_mismatch(w, "fetch_and_op result", fetched, per_epoch * epoch);
            }
            TC(w, MPI_Get(got, SLOTS, MPI_INT64_T, t, (MPI_Aint) (me * SLOTS), SLOTS, MPI_INT64_T,
                          win));
            TC(w, MPI_Win_flush(t, win));
            for (int s = 0; s < SLOTS; ++s) {
                if (got[s] != src[s]) {
                    thread_mismatch(w, "get after put", got[s], src[s]);
                    break;
                }
            }
            w->ops += SLOTS + 2;
        }
    }
    TC(w, MPI_Win_unlock_all(win));
    TC(w, MPI_Barrier(w->comm));
    if (base[(size_t) n * SLOTS] != per_epoch * (epoch + 1)) {
        thread_mismatch(w, "counter", base[(size_t) n * SLOTS], per_epoch * (epoch + 1));
    }
    for (int o = 0; o < n; ++o) {
        int64_t want = slot_value(o, w->index, w->cycles, w->rounds - 1, SLOTS - 1);
        if (base[(size_t) o * SLOTS + SLOTS - 1] != want) {
            thread_mismatch(w, "last slot", base[(size_t) o * SLOTS + SLOTS - 1], want);
        }
    }
    /* a window that outlives the epoch: nobody starts the next one in it
     * before everybody has checked this one */
    if (epoch_ends_in_barrier) {
        TC(w, MPI_Barrier(w->comm));
    }
}

static size_t window_elems(const worker_t *w)
{
    return (size_t) w->nprocs * SLOTS + 1; /* slots of every origin, then a counter */
}

static int window_open(worker_t *w, int64_t **base, MPI_Win *win)
{
    size_t elems = window_elems(w);

    *base = calloc(elems, sizeof(int64_t));
    int rc = MPI_Win_create(*base, (MPI_Aint) (elems * sizeof(int64_t)), sizeof(int64_t),
                            MPI_INFO_NULL, w->comm, win);
    if (MPI_SUCCESS == rc) {
        MPI_Win_set_errhandler(*win, MPI_ERRORS_RETURN);
    }
    return rc;
}

static void window_close(worker_t *w, int64_t *base, MPI_Win *win)
{
    TC(w, MPI_Win_free(win));
    free(base);
    __atomic_fetch_add(&windows_freed, 1, __ATOMIC_RELAXED);
}

/* A churning thread's window lives for one cycle over fresh memory; the
 * others' window lives for the whole run. */
static void rma_cycle(worker_t *w, int me)
{
    if (MPI_WIN_NULL != w->win) {
        rma_epoch(w, me, w->win, w->base, w->cycles, true);
        return;
    }
    int64_t *base;
    MPI_Win win;
    TC(w, window_open(w, &base, &win));
    rma_epoch(w, me, win, base, 0, false);
    window_close(w, base, &win);
    ++w->windows;
}

static unsigned char byte_for(int from, int to, long cycle, int thread, int i)
{
    return (unsigned char) (from * 13 + to * 7 + cycle * 3 + thread * 5 + i);
}

static void p2p_cycle(worker_t *w, int me)
{
    int n = w->nprocs, size = msg_sizes[w->cycles % NUM_MSG_SIZES], nreq = 0;
    unsigned char *out = malloc((size_t) size * n), *in = malloc((size_t) size * n);
    MPI_Request *reqs = malloc(2 * (size_t) n * sizeof(MPI_Request));

    for (int p = 0; p < n; ++p) {
        if (p == me) {
            continue;
        }
        for (int i = 0; i < size; ++i) {
            out[(size_t) p * size + i] = byte_for(me, p, w->cycles, w->index, i);
        }
        TC(w, MPI_Irecv(in + (size_t) p * size, size, MPI_BYTE, p, 3, w->comm, reqs + nreq++));
        TC(w, MPI_Isend(out + (size_t) p * size, size, MPI_BYTE, p, 3, w->comm, reqs + nreq++));
    }
    TC(w, MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE));
    for (int p = 0; p < n; ++p) {
        if (p == me) {
            continue;
        }
        for (int i = 0; i < size; ++i) {
            if (in[(size_t) p * size + i] != byte_for(p, me, w->cycles, w->index, i)) {
                thread_mismatch(w, "message byte", in[(size_t) p * size + i],
                                byte_for(p, me, w->cycles, w->index, i));
                break;
            }
        }
    }
    w->ops += nreq;
    free(out);
    free(in);
    free(reqs);
}

static double start_time;

static void report_heap(worker_t *w)
{
    static double next_report;
    double now = fc_now() - start_time;

    if (now < next_report) {
        return;
    }
    next_report = now + 5.0;
    struct mallinfo2 mi = mallinfo2();
    printf("HEAP rank=%d seconds=%.1f cycles=%ld windows=%ld inuse_kb=%zu mr_held=%ld\n", fc_rank,
           now, w->cycles, __atomic_load_n(&windows_freed, __ATOMIC_RELAXED),
           (mi.uordblks + mi.hblkhd) / 1024, btl_ofi_pvars_mr_held());
    fflush(stdout);
}

/* rank 0's clock decides for everyone */
static int go_on(worker_t *w)
{
    int go = fc_now() < w->deadline;

    TC(w, MPI_Bcast(&go, 1, MPI_INT, 0, w->comm));
    return go;
}

/* One cycle's traffic; @p win, unless MPI_WIN_NULL, was made for this
 * cycle alone (its memory at @p base). */
static void cycle_traffic(worker_t *w, int me, MPI_Win win, const int64_t *base)
{
    if (w->do_rma) {
        if (MPI_WIN_NULL != win) {
            rma_epoch(w, me, win, base, 0, false);
        } else {
            rma_cycle(w, me);
        }
    }
    if (w->do_p2p) {
        p2p_cycle(w, me);
    }
    ++w->cycles;
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    int me;

    MPI_Comm_rank(w->comm, &me);
    for (;;) {
        if (0 == w->index) {
            report_heap(w);
        }
        if (!go_on(w)) {
            break;
        }
        cycle_traffic(w, me, MPI_WIN_NULL, NULL);
    }
    return NULL;
}

/* -S: the rank's threads meet here around the window creation and free */
static pthread_barrier_t phase;
static int serial_go;

/*
 * A cycle with -S: thread 0 decides whether to go on and creates this
 * cycle's window while the rank's other threads wait outside MPI; then
 * every thread runs its traffic; then thread 0 frees the window while the
 * others wait again.
 */
static void *worker_serial_main(void *arg)
{
    worker_t *w = arg;
    int64_t *base = NULL;
    MPI_Win win = MPI_WIN_NULL;
    int me;

    MPI_Comm_rank(w->comm, &me);
    for (;;) {
        if (0 == w->index) {
            report_heap(w);
            serial_go = go_on(w);
            if (serial_go && w->do_rma) {
                TC(w, window_open(w, &base, &win));
            }
        }
        pthread_barrier_wait(&phase);
        if (!serial_go) {
            break;
        }
        cycle_traffic(w, me, win, base);
        pthread_barrier_wait(&phase);
        if (0 == w->index && MPI_WIN_NULL != win) {
            window_close(w, base, &win);
            ++w->windows;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int seconds = 30, nthreads = 4, rounds = 4, churners = -1, provided, c;
    const char *piddir = NULL, *mix = "both";
    bool serial = false;
    worker_t workers[MAX_THREADS];
    pthread_t threads[MAX_THREADS];

    while ((c = getopt(argc, argv, "s:t:r:p:m:c:S")) != -1) {
        switch (c) {
        case 's':
            seconds = atoi(optarg);
            break;
        case 't':
            nthreads = atoi(optarg);
            break;
        case 'r':
            rounds = atoi(optarg);
            break;
        case 'p':
            piddir = optarg;
            break;
        case 'm':
            mix = optarg;
            break;
        case 'c':
            churners = atoi(optarg);
            break;
        case 'S':
            serial = true;
            break;
        default:
            fprintf(stderr,
                    "usage: %s [-s seconds] [-t threads] [-r rounds] [-p dir] [-m both|rma|p2p] "
                    "[-c churning_threads] [-S]\n",
                    argv[0]);
            return 1;
        }
    }
    if (nthreads < 1 || nthreads > MAX_THREADS) {
        nthreads = 4;
    }
    if (churners < 0 || churners > nthreads) {
        churners = nthreads;
    }
    if (serial) {
        churners = 1;
        pthread_barrier_init(&phase, NULL, (unsigned) nthreads);
    }
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    fc_pvars_init();
    MPI_Comm_rank(MPI_COMM_WORLD, &fc_rank);
    if (MPI_THREAD_MULTIPLE != provided) {
        printf("SKIP rank=%d: MPI_THREAD_MULTIPLE not provided (%d)\n", fc_rank, provided);
        MPI_Finalize();
        return 1;
    }
    if (NULL != piddir) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/rank.%d", piddir, fc_rank);
        FILE *f = fopen(path, "w");
        if (NULL != f) {
            fprintf(f, "%d\n", (int) getpid());
            fclose(f);
        }
    }
    double t0 = fc_now();
    start_time = t0;
    for (int i = 0; i < nthreads; ++i) {
        memset(&workers[i], 0, sizeof(workers[i]));
        workers[i].index = i;
        workers[i].rounds = rounds;
        workers[i].do_rma = 0 != strcmp(mix, "p2p");
        workers[i].do_p2p = 0 != strcmp(mix, "rma");
        workers[i].deadline = t0 + seconds;
        MPI_Comm_dup(MPI_COMM_WORLD, &workers[i].comm);
        MPI_Comm_set_errhandler(workers[i].comm, MPI_ERRORS_RETURN);
        MPI_Comm_size(workers[i].comm, &workers[i].nprocs);
        workers[i].win = MPI_WIN_NULL;
        /* created here, one after another, so every rank creates them in
         * the same order */
        if (workers[i].do_rma && i >= churners) {
            thread_check(&workers[i], window_open(&workers[i], &workers[i].base, &workers[i].win),
                         "window_open");
        }
    }
    for (int i = 0; i < nthreads; ++i) {
        pthread_create(&threads[i], NULL, serial ? worker_serial_main : worker_main, &workers[i]);
    }
    long ops = 0, cycles = 0, windows = 0;
    for (int i = 0; i < nthreads; ++i) {
        pthread_join(threads[i], NULL);
        ops += workers[i].ops;
        cycles += workers[i].cycles;
        windows += workers[i].windows;
        if (MPI_WIN_NULL != workers[i].win) {
            window_close(&workers[i], workers[i].base, &workers[i].win);
        }
        fc_mpi_errors += workers[i].mpi_errors;
        fc_mismatches += workers[i].mismatches;
        MPI_Comm_free(&workers[i].comm);
    }
    printf("SOAK rank=%d threads=%d cycles=%ld windows=%ld seconds=%.1f\n", fc_rank, nthreads,
           cycles, windows, fc_now() - t0);
    fc_print_pvars();
    int rc = fc_result(ops);
    if (serial) {
        pthread_barrier_destroy(&phase);
    }
    fc_pvars_fini();
    MPI_Finalize();
    return rc;
}
