/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * win_realloc: a window over malloc'd memory is freed together with its
 * buffer, and a buffer of the same size (very likely at the same address)
 * gets a new window; repeated.  Each iteration every rank puts a value
 * that names the iteration into its right neighbour's buffer and checks
 * what its left neighbour put.
 *
 * The MPI side cannot see registrations; the script runs this under the
 * fi_fault shim with BTL_OFI_FAULT_TRACE=mr and checks, from the markers
 * printed here (on stderr, in order with the shim's lines), that the
 * region registered for a buffer was closed before the same address was
 * registered again.
 *
 *   win_realloc [-n iterations] [-b bytes]
 *
 * Markers: "WINMARK rank=R iter=I buf=0x... bytes=N event=E", E: created
 * (after MPI_Win_create), winfreed (after MPI_Win_free, before free()),
 * freed (after free()).
 */

#include <unistd.h>

#include "faults_common.h"

int main(int argc, char **argv)
{
    int iterations = 8, nprocs, provided, c;
    size_t bytes = 4u << 20; /* above the mmap threshold: free() unmaps it */
    int same_address = 0;
    uintptr_t previous = 0;

    while ((c = getopt(argc, argv, "n:b:")) != -1) {
        switch (c) {
        case 'n':
            iterations = atoi(optarg);
            break;
        case 'b':
            bytes = (size_t) atol(optarg);
            break;
        default:
            fprintf(stderr, "usage: %s [-n iterations] [-b bytes]\n", argv[0]);
            return 1;
        }
    }
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    fc_pvars_init();
    MPI_Comm_rank(MPI_COMM_WORLD, &fc_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    int right = (fc_rank + 1) % nprocs, left = (fc_rank + nprocs - 1) % nprocs;
    size_t count = bytes / sizeof(int64_t);
    for (int it = 0; it < iterations; ++it) {
        int64_t *buf = malloc(count * sizeof(int64_t));
        int64_t *src = malloc(count * sizeof(int64_t));
        MPI_Win win;

        if (NULL == buf || NULL == src) {
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        same_address += ((uintptr_t) buf == previous);
        previous = (uintptr_t) buf;
        memset(buf, 0, count * sizeof(int64_t));
        for (size_t i = 0; i < count; ++i) {
            src[i] = ((int64_t) it << 32) | (int64_t) (i ^ (size_t) fc_rank);
        }
        if (MPI_SUCCESS
            != FC(MPI_Win_create(buf, (MPI_Aint) (count * sizeof(int64_t)), sizeof(int64_t),
                                 MPI_INFO_NULL, MPI_COMM_WORLD, &win))) {
            break;
        }
        fprintf(stderr, "WINMARK rank=%d iter=%d buf=%p bytes=%zu event=created\n", fc_rank, it,
                (void *) buf, count * sizeof(int64_t));
        MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
        FC(MPI_Win_lock_all(0, win));
        /* whole buffer in one put, then a few single elements at the ends */
        FC(MPI_Put(src, (int) count, MPI_INT64_T, right, 0, (int) count, MPI_INT64_T, win));
        FC(MPI_Win_flush(right, win));
        FC(MPI_Win_unlock_all(win));
        FC(MPI_Barrier(MPI_COMM_WORLD));
        for (size_t i = 0; i < count; ++i) {
            int64_t want = ((int64_t) it << 32) | (int64_t) (i ^ (size_t) left);
            if (buf[i] != want) {
                fc_mismatch("iteration %d: element %zu = %llx, expected %llx", it, i,
                            (long long) buf[i], (long long) want);
                break;
            }
        }
        uintptr_t address = (uintptr_t) buf;
        FC(MPI_Win_free(&win));
        fprintf(stderr, "WINMARK rank=%d iter=%d buf=%#lx bytes=%zu event=winfreed\n", fc_rank, it,
                (unsigned long) address, count * sizeof(int64_t));
        free(buf);
        free(src);
        fprintf(stderr, "WINMARK rank=%d iter=%d buf=%#lx bytes=%zu event=freed\n", fc_rank, it,
                (unsigned long) address, count * sizeof(int64_t));
    }
    printf("REUSE rank=%d same_address=%d of %d\n", fc_rank, same_address, iterations - 1);
    fc_print_pvars();
    int rc = fc_result(iterations);
    fc_pvars_fini();
    MPI_Finalize();
    return rc;
}
