/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * peer_death: one rank SIGKILLs itself in the middle of communication;
 * the others keep talking to it.  The runtime must end the job; what we
 * check from the outside is that it does so quickly, that no process is
 * left behind and that nothing hangs in btl/ofi's progress or finalize.
 *
 *   peer_death rma|p2p [-v victim_rank] [-i iterations_before_kill] [-t max_seconds]
 *
 * rma: lock_all epoch, puts to every rank then flush_all, in a loop.
 * p2p: every rank exchanges isend/irecv with every other rank, in a loop.
 * The victim prints "KILL rank=R at=<epoch seconds>" just before the
 * signal.  A survivor that is still running after max_seconds prints
 * "SURVIVED" and exits 4: the runtime failed to end the job.
 */

#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include "faults_common.h"

static double wall_clock(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double) tv.tv_sec + 1e-6 * (double) tv.tv_usec;
}

static void die_now(int iteration)
{
    printf("KILL rank=%d iteration=%d at=%.3f\n", fc_rank, iteration, wall_clock());
    fflush(stdout);
    fflush(stderr);
    raise(SIGKILL);
}

static void rma_loop(int nprocs, int victim, int kill_at, double deadline)
{
    const int per_target = 64;
    int64_t *base = calloc((size_t) nprocs * per_target, sizeof(int64_t));
    int64_t *src = calloc(per_target, sizeof(int64_t));
    MPI_Win win;

    MPI_Win_create(base, (MPI_Aint) ((size_t) nprocs * per_target * sizeof(int64_t)),
                   sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    MPI_Win_lock_all(0, win);
    for (int it = 0; fc_now() < deadline; ++it) {
        if (fc_rank == victim && it == kill_at) {
            die_now(it);
        }
        for (int t = 0; t < nprocs; ++t) {
            for (int i = 0; i < per_target; ++i) {
                src[i] = it;
                MPI_Put(src + i, 1, MPI_INT64_T, t, (MPI_Aint) (fc_rank * per_target + i), 1,
                        MPI_INT64_T, win);
            }
        }
        MPI_Win_flush_all(win);
    }
    /* the window and its memory stay: no collective with a dead peer */
    MPI_Win_unlock_all(win);
}

static void p2p_loop(int nprocs, int victim, int kill_at, double deadline)
{
    const int size = 20000;
    char *sendbuf = malloc((size_t) size * nprocs), *recvbuf = malloc((size_t) size * nprocs);
    MPI_Request *reqs = malloc(2 * (size_t) nprocs * sizeof(MPI_Request));

    for (int it = 0; fc_now() < deadline; ++it) {
        int n = 0;
        if (fc_rank == victim && it == kill_at) {
            die_now(it);
        }
        for (int p = 0; p < nprocs; ++p) {
            if (p == fc_rank) {
                continue;
            }
            memset(sendbuf + (size_t) p * size, it & 0xff, size);
            MPI_Irecv(recvbuf + (size_t) p * size, size, MPI_BYTE, p, 7, MPI_COMM_WORLD,
                      reqs + n++);
            MPI_Isend(sendbuf + (size_t) p * size, size, MPI_BYTE, p, 7, MPI_COMM_WORLD,
                      reqs + n++);
        }
        MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    }
    /* the buffers stay: after a peer failure (with --with-ft ulfm) requests
     * to live peers may still be in flight and finalize progresses them */
}

int main(int argc, char **argv)
{
    int victim = 1, kill_at = 50, nprocs, provided, c;
    double max_seconds = 60;
    const char *mode;

    if (argc < 2 || (0 != strcmp(argv[1], "rma") && 0 != strcmp(argv[1], "p2p"))) {
        fprintf(stderr, "usage: %s rma|p2p [-v victim] [-i iterations] [-t seconds]\n", argv[0]);
        return 1;
    }
    mode = argv[1];
    optind = 2;
    while ((c = getopt(argc, argv, "v:i:t:")) != -1) {
        switch (c) {
        case 'v':
            victim = atoi(optarg);
            break;
        case 'i':
            kill_at = atoi(optarg);
            break;
        case 't':
            max_seconds = atof(optarg);
            break;
        default:
            return 1;
        }
    }
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &fc_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (0 == fc_rank) {
        printf("peer_death %s: %d ranks, rank %d dies at iteration %d\n", mode, nprocs, victim,
               kill_at);
        fflush(stdout);
    }
    double deadline = fc_now() + max_seconds;
    if (0 == strcmp(mode, "rma")) {
        rma_loop(nprocs, victim, kill_at, deadline);
    } else {
        p2p_loop(nprocs, victim, kill_at, deadline);
    }
    printf("SURVIVED rank=%d: still running %.0f s after the start\n", fc_rank, max_seconds);
    fflush(stdout);
    MPI_Finalize();
    return 4;
}
