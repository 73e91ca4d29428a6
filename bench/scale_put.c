/*
 * scale_put: how the cost of one-sided traffic grows with the ranks.
 * Every rank puts 8 bytes into every other rank's MPI_Win_create window
 * and flushes them all, for R rounds (-r, default 20), inside one
 * MPI_Win_lock_all epoch.  Rank 0 prints the put phase's time as the
 * slowest rank saw it, with the first round apart (it carries the
 * connections a transport makes on first use) and the rounds after it,
 * and whether every value that landed is the one its origin put last.
 *
 *   scale_put [-r ROUNDS]
 *
 * stdout: one line
 *   scale_put np=N rounds=R first_s=X rest_s=Y total_s=Z check=ok|FAILED ofi_puts=P
 * where P is the puts our btl/ofi's MPI_T counter saw, summed over the
 * ranks (-1 when the counter is absent: another BTL or MPI carried them).
 * Exit status 1 when a value is wrong.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>

#include "btl_ofi_pvars.h"
#include "mpi_bench_util.h"

/* What origin @p origin puts in round @p round: both recoverable. */
static uint64_t stamp(int round, int origin)
{
    return ((uint64_t) round << 32) | (uint32_t) origin;
}

/* One round: a put to every other rank, starting at the next one so that
 * not every origin aims at rank 0 first, then one flush of them all. */
static void put_round(MPI_Win win, uint64_t *value, int rank, int size, int round)
{
    *value = stamp(round, rank);
    for (int k = 1; k < size; k++) {
        int target = (rank + k) % size;

        MPI_Put(value, 1, MPI_UINT64_T, target, rank, 1, MPI_UINT64_T, win);
    }
    MPI_Win_flush_all(win);
}

/* Slots of every other rank must hold its last round's stamp. */
static int count_wrong(const uint64_t *slots, int rank, int size, int rounds)
{
    int wrong = 0;

    for (int origin = 0; origin < size; origin++) {
        if (origin != rank && slots[origin] != stamp(rounds - 1, origin)) {
            if (wrong++ < 3)
                fprintf(stderr, "scale_put: rank %d slot %d holds %#" PRIx64 ", expected %#" PRIx64 "\n",
                        rank, origin, slots[origin], stamp(rounds - 1, origin));
        }
    }
    return wrong;
}

int main(int argc, char **argv)
{
    int rounds = 20, rank, size, opt, wrong, all_wrong;
    long puts[2], all_puts[2];
    double t0, t1, t2, local[2], slowest[2];
    uint64_t *slots, value;
    MPI_Win win;

    MPI_Init(&argc, &argv);
    bench_pvars_begin();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((opt = getopt(argc, argv, "r:")) != -1) {
        if (opt != 'r') {
            if (rank == 0)
                fprintf(stderr, "usage: scale_put [-r ROUNDS]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        rounds = (int) bench_parse_count(optarg, "scale_put", 'r', 1);
    }
    slots = bench_alloc((size_t) size * sizeof(*slots));
    if (slots == NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Win_create(slots, (MPI_Aint) size * sizeof(*slots), sizeof(*slots), MPI_INFO_NULL,
                   MPI_COMM_WORLD, &win);
    MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
    MPI_Barrier(MPI_COMM_WORLD);

    t0 = MPI_Wtime();
    put_round(win, &value, rank, size, 0);
    t1 = MPI_Wtime();
    for (int r = 1; r < rounds; r++)
        put_round(win, &value, rank, size, r);
    t2 = MPI_Wtime();

    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    wrong = count_wrong(slots, rank, size, rounds);
    local[0] = t1 - t0;
    local[1] = t2 - t1;
    MPI_Reduce(local, slowest, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&wrong, &all_wrong, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    /* {ranks without the counter, puts}: one missing counter voids the sum */
    puts[1] = btl_ofi_pvars_get("put_count");
    puts[0] = puts[1] < 0;
    MPI_Reduce(puts, all_puts, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("scale_put np=%d rounds=%d first_s=%.6f rest_s=%.6f total_s=%.6f check=%s "
               "ofi_puts=%ld\n",
               size, rounds, slowest[0], slowest[1], slowest[0] + slowest[1],
               all_wrong == 0 ? "ok" : "FAILED", all_puts[0] > 0 ? -1 : all_puts[1]);
        fflush(stdout);
    }
    MPI_Bcast(&all_wrong, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Win_free(&win);
    free(slots);
    bench_pvars_end();
    MPI_Finalize();
    return all_wrong == 0 ? 0 : 1;
}
