/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * p2p_flood: many nonblocking sends in flight to every peer at once, of
 * sizes that take ob1's different paths (short/inject, eager, rendezvous),
 * every byte checked.  MPI_ERRORS_RETURN on the communicator.
 *
 *   p2p_flood [-r rounds] [-m messages_per_peer] [-S size,size,...] [-q]
 */

#include <unistd.h>

#include "faults_common.h"

/* sizes in bytes, cycled over the messages of a round; -S replaces them */
#define MAX_SIZES 16
static int sizes[MAX_SIZES] = { 8, 200, 4000, 16000, 70000 };
static int NUM_SIZES = 5;

static void parse_sizes(char *list)
{
    NUM_SIZES = 0;
    for (char *tok = strtok(list, ","); NULL != tok && NUM_SIZES < MAX_SIZES;
         tok = strtok(NULL, ",")) {
        sizes[NUM_SIZES++] = atoi(tok);
    }
}

static int largest_size(void)
{
    int max = 1;
    for (int i = 0; i < NUM_SIZES; ++i) {
        max = sizes[i] > max ? sizes[i] : max;
    }
    return max;
}

static unsigned char pattern(int from, int to, int round, int msg, int byte)
{
    return (unsigned char) (from * 31 + to * 17 + round * 7 + msg * 3 + byte);
}

int main(int argc, char **argv)
{
    int rounds = 10, per_peer = 128, quiet = 0, c, provided, nprocs;

    while ((c = getopt(argc, argv, "r:m:S:q")) != -1) {
        switch (c) {
        case 'r':
            rounds = atoi(optarg);
            break;
        case 'm':
            per_peer = atoi(optarg);
            break;
        case 'S':
            parse_sizes(optarg);
            break;
        case 'q':
            quiet = 1;
            break;
        default:
            fprintf(stderr, "usage: %s [-r rounds] [-m messages_per_peer] [-S sizes] [-q]\n",
                    argv[0]);
            return 1;
        }
    }
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    fc_pvars_init();
    MPI_Comm_rank(MPI_COMM_WORLD, &fc_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    int npeers = nprocs - 1;
    size_t slot = (size_t) largest_size();
    size_t nmsgs = (size_t) npeers * (size_t) per_peer;
    unsigned char *sendbuf = malloc(nmsgs * slot + 1);
    unsigned char *recvbuf = malloc(nmsgs * slot + 1);
    MPI_Request *reqs = malloc(2 * (nmsgs + 1) * sizeof(MPI_Request));
    MPI_Status *stats = malloc(2 * (nmsgs + 1) * sizeof(MPI_Status));
    if (NULL == sendbuf || NULL == recvbuf || NULL == reqs || NULL == stats) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    double t0 = fc_now();
    for (int r = 0; r < rounds; ++r) {
        int n = 0;
        memset(recvbuf, 0, nmsgs * slot);
        /* receives first for half of the rounds, sends first (unexpected
         * messages) for the other half */
        for (int pass = 0; pass < 2; ++pass) {
            bool post_recvs = (0 == pass) == (0 == r % 2);
            for (int p = 0; p < npeers; ++p) {
                int peer = (fc_rank + 1 + p) % nprocs;
                for (int m = 0; m < per_peer; ++m) {
                    int size = sizes[m % NUM_SIZES];
                    size_t at = ((size_t) p * per_peer + m) * slot;
                    if (post_recvs) {
                        if (MPI_SUCCESS
                            == FC(MPI_Irecv(recvbuf + at, size, MPI_BYTE, peer, m, MPI_COMM_WORLD,
                                            reqs + n))) {
                            ++n;
                        }
                    } else {
                        for (int b = 0; b < size; ++b) {
                            sendbuf[at + b] = pattern(fc_rank, peer, r, m, b);
                        }
                        if (MPI_SUCCESS
                            == FC(MPI_Isend(sendbuf + at, size, MPI_BYTE, peer, m, MPI_COMM_WORLD,
                                            reqs + n))) {
                            ++n;
                        }
                    }
                }
            }
        }
        if (MPI_SUCCESS != FC(MPI_Waitall(n, reqs, stats))) {
            for (int i = 0; i < n; ++i) {
                if (MPI_SUCCESS != stats[i].MPI_ERROR && MPI_ERR_PENDING != stats[i].MPI_ERROR) {
                    FC(stats[i].MPI_ERROR);
                }
            }
        }
        fc_ops_so_far += n;
        for (int p = 0; p < npeers; ++p) {
            int peer = (fc_rank + 1 + p) % nprocs;
            for (int m = 0; m < per_peer; ++m) {
                int size = sizes[m % NUM_SIZES];
                size_t at = ((size_t) p * per_peer + m) * slot;
                for (int b = 0; b < size; ++b) {
                    if (recvbuf[at + b] != pattern(peer, fc_rank, r, m, b)) {
                        fc_mismatch("round %d: message %d from %d (%d bytes) differs at byte %d", r,
                                    m, peer, size, b);
                        break;
                    }
                }
            }
        }
    }
    FC(MPI_Barrier(MPI_COMM_WORLD));
    if (!quiet && 0 == fc_rank) {
        printf("p2p_flood: %d ranks, %d rounds, %d messages per peer, %.2f s\n", nprocs, rounds,
               per_peer, fc_now() - t0);
    }
    fc_print_component_path();
    fc_print_pvars();
    int rc = fc_result(fc_ops_so_far);
    fc_pvars_fini();
    MPI_Finalize();
    free(sendbuf);
    free(recvbuf);
    free(reqs);
    free(stats);
    return rc;
}
