/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * rma_flood: many one-sided operations outstanding at once, every result
 * checked.  Window from MPI_Win_create over malloc'd memory (so osc/rdma
 * goes through the BTL), MPI_ERRORS_RETURN on it, one lock_all epoch.
 *
 * Per round and per target: P puts into the origin's own row at the
 * target, one MPI_Fetch_and_op(+1) on the target's counter, one
 * MPI_Accumulate(+1) on its sum, one MPI_Compare_and_swap on the origin's
 * own CAS slot (expects round r, stores r+1, so the fetched value is
 * exact), then flush_all and P gets of the row back.
 *
 *   rma_flood [-r rounds] [-p puts_per_target] [-q]
 */

#include <unistd.h>

#include "faults_common.h"

typedef struct {
    int rounds;
    int puts;
    int quiet;
} options_t;

static int64_t encode(int origin, int round, int i)
{
    return ((int64_t) origin << 40) | ((int64_t) round << 20) | (int64_t) i;
}

int main(int argc, char **argv)
{
    options_t opt = { .rounds = 20, .puts = 256, .quiet = 0 };
    int nprocs, c, provided;
    MPI_Win win;

    while ((c = getopt(argc, argv, "r:p:q")) != -1) {
        switch (c) {
        case 'r':
            opt.rounds = atoi(optarg);
            break;
        case 'p':
            opt.puts = atoi(optarg);
            break;
        case 'q':
            opt.quiet = 1;
            break;
        default:
            fprintf(stderr, "usage: %s [-r rounds] [-p puts_per_target] [-q]\n", argv[0]);
            return 1;
        }
    }
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    fc_pvars_init();
    MPI_Comm_rank(MPI_COMM_WORLD, &fc_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    /* layout: rows[nprocs][puts], counter, sum, cas[nprocs] */
    size_t rows = (size_t) nprocs * (size_t) opt.puts;
    size_t counter_at = rows, sum_at = rows + 1, cas_at = rows + 2;
    size_t elems = cas_at + (size_t) nprocs;
    int64_t *base = calloc(elems, sizeof(int64_t));
    int64_t *got = calloc((size_t) opt.puts, sizeof(int64_t));
    int64_t *src = calloc((size_t) opt.puts, sizeof(int64_t));
    if (NULL == base || NULL == got || NULL == src) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    double t0 = fc_now();
    if (MPI_SUCCESS
        != FC(MPI_Win_create(base, (MPI_Aint) (elems * sizeof(int64_t)), sizeof(int64_t),
                             MPI_INFO_NULL, MPI_COMM_WORLD, &win))) {
        int rc = fc_result(0);
        fc_pvars_fini();
        MPI_Finalize();
        return rc;
    }
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    FC(MPI_Win_lock_all(0, win));

    for (int r = 0; r < opt.rounds; ++r) {
        int64_t one = 1, fetched = -1, cas_old = -1;
        for (int k = 0; k < nprocs; ++k) {
            int t = (fc_rank + k) % nprocs;
            for (int i = 0; i < opt.puts; ++i) {
                src[i] = encode(fc_rank, r, i);
            }
            for (int i = 0; i < opt.puts; ++i) {
                /* one element each: as many separate operations as possible */
                if (MPI_SUCCESS
                    == FC(MPI_Put(src + i, 1, MPI_INT64_T, t,
                                  (MPI_Aint) ((size_t) fc_rank * opt.puts + i), 1, MPI_INT64_T,
                                  win))) {
                    ++fc_ops_so_far;
                }
            }
            if (MPI_SUCCESS
                == FC(MPI_Fetch_and_op(&one, &fetched, MPI_INT64_T, t, (MPI_Aint) counter_at,
                                       MPI_SUM, win))) {
                ++fc_ops_so_far;
            }
            if (MPI_SUCCESS
                == FC(MPI_Accumulate(&one, 1, MPI_INT64_T, t, (MPI_Aint) sum_at, 1, MPI_INT64_T,
                                     MPI_SUM, win))) {
                ++fc_ops_so_far;
            }
            int64_t expect = r, desired = r + 1;
            if (MPI_SUCCESS
                == FC(MPI_Compare_and_swap(&desired, &expect, &cas_old, MPI_INT64_T, t,
                                           (MPI_Aint) (cas_at + (size_t) fc_rank), win))) {
                ++fc_ops_so_far;
            }
            if (MPI_SUCCESS == FC(MPI_Win_flush(t, win))) {
                if (fetched < 0 || fetched >= (int64_t) nprocs * opt.rounds) {
                    fc_mismatch("round %d target %d: fetch_and_op returned %lld", r, t,
                                (long long) fetched);
                }
                if (cas_old != r) {
                    fc_mismatch("round %d target %d: compare_and_swap returned %lld, expected %d",
                                r, t, (long long) cas_old, r);
                }
            }
        }
        FC(MPI_Win_flush_all(win));
        /* read back what this rank wrote at one target */
        int t = (fc_rank + 1 + r) % nprocs;
        memset(got, 0xff, (size_t) opt.puts * sizeof(int64_t));
        for (int i = 0; i < opt.puts; ++i) {
            if (MPI_SUCCESS
                == FC(MPI_Get(got + i, 1, MPI_INT64_T, t,
                              (MPI_Aint) ((size_t) fc_rank * opt.puts + i), 1, MPI_INT64_T, win))) {
                ++fc_ops_so_far;
            }
        }
        if (MPI_SUCCESS == FC(MPI_Win_flush(t, win))) {
            for (int i = 0; i < opt.puts; ++i) {
                if (got[i] != encode(fc_rank, r, i)) {
                    fc_mismatch("round %d: get from %d [%d] = %llx, expected %llx", r, t, i,
                                (long long) got[i], (long long) encode(fc_rank, r, i));
                    break;
                }
            }
        }
    }
    FC(MPI_Win_unlock_all(win));
    FC(MPI_Barrier(MPI_COMM_WORLD));

    /* the target's own view: every origin's last round, all counters */
    for (int o = 0; o < nprocs; ++o) {
        for (int i = 0; i < opt.puts; ++i) {
            int64_t v = base[(size_t) o * opt.puts + i];
            if (v != encode(o, opt.rounds - 1, i)) {
                fc_mismatch("row of %d [%d] = %llx, expected %llx", o, i, (long long) v,
                            (long long) encode(o, opt.rounds - 1, i));
                break;
            }
        }
        if (base[cas_at + o] != opt.rounds) {
            fc_mismatch("cas slot of %d = %lld, expected %d", o, (long long) base[cas_at + o],
                        opt.rounds);
        }
    }
    if (base[counter_at] != (int64_t) nprocs * opt.rounds) {
        fc_mismatch("fetch_and_op counter = %lld, expected %lld", (long long) base[counter_at],
                    (long long) nprocs * opt.rounds);
    }
    if (base[sum_at] != (int64_t) nprocs * opt.rounds) {
        fc_mismatch("accumulate sum = %lld, expected %lld", (long long) base[sum_at],
                    (long long) nprocs * opt.rounds);
    }
    if (!opt.quiet && 0 == fc_rank) {
        printf("rma_flood: %d ranks, %d rounds, %d puts per target, %.2f s\n", nprocs, opt.rounds,
               opt.puts, fc_now() - t0);
    }
    fc_print_component_path();
    fc_print_pvars();
    int rc = fc_result(fc_ops_so_far);
    FC(MPI_Win_free(&win));
    fc_pvars_fini();
    MPI_Finalize();
    free(base);
    free(got);
    free(src);
    return rc;
}
