/*
 * One-sided traffic between simulated hosts (contrib/hosts), over the three
 * window flavours, with per-flavour proof that our btl/ofi carried it.
 *
 * On one node osc/rdma serves MPI_Win_allocate windows through shared
 * memory; across nodes every flavour must go through the BTL.  So for each
 * flavour every rank that has a peer on another host puts to it, reads its
 * data back with a get, and hammers a counter on every rank with
 * MPI_Fetch_and_op, and the counters btl_ofi_put_count, btl_ofi_get_count
 * and btl_ofi_atomic_count of that rank must have grown during that
 * flavour's phase.
 *
 * Each origin writes its own slot of the target's window, a pattern that
 * depends on origin, size and flavour, with guard bytes after it; the
 * target checks every slot that was meant for it, the origin checks what
 * its get read back.  The fetch-and-add counters must end at exactly
 * (ranks x rounds), and every value fetched must be below that.
 *
 * Usage: hosts-rma   (needs ranks on at least two hosts for the BTL checks;
 * on one host those checks are skipped and said so)
 */
#include "mpi/common.h"

#define SLOT_BYTES (256 * 1024 + 64)
#define FOP_ROUNDS 40
#define GUARD_BYTE 0x5A

static const size_t sizes[] = {1, 8, 4095, 65536, 256 * 1024};
#define NUM_SIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Our counter NAME so far; 0 when it does not exist. */
static unsigned long pvar_now(const char *name)
{
    unsigned long v = 0;
    (void) btl_ofi_pvars_read(name, &v);
    return v;
}

/* The next rank after us, cyclically, that lives on another node; -1 when
 * every rank shares our node. */
static int remote_peer(const int *nodes)
{
    for (int k = 1; k < tc_size; ++k) {
        int r = (tc_rank + k) % tc_size;
        if (nodes[r] != nodes[tc_rank]) {
            return r;
        }
    }
    return -1;
}

static uint32_t seed_of(int origin, size_t size, int flavour)
{
    return (uint32_t) origin * 7919u + (uint32_t) size * 13u + (uint32_t) flavour * 104729u;
}

static void run_flavour(enum tc_flavour flavour, int peer, const int *targets)
{
    const char *fname = tc_flavour_names[flavour];
    const size_t data_bytes = (size_t) tc_size * SLOT_BYTES;
    const size_t counter_off = data_bytes;
    tc_window_t w;
    uint8_t *origin = tc_malloc(SLOT_BYTES), *back = tc_malloc(SLOT_BYTES);
    unsigned long put0 = pvar_now("put_count"), get0 = pvar_now("get_count");
    unsigned long atomic0 = pvar_now("atomic_count");
    int64_t max_fetched = -1;
    char what[160];

    tc_window_open(&w, flavour, data_bytes + (size_t) tc_size * sizeof(int64_t));
    tc_phase("%s: window open", fname);

    for (size_t s = 0; s < NUM_SIZES; ++s) {
        const size_t size = sizes[s];
        const size_t slot = (size_t) tc_rank * SLOT_BYTES;

        memset(w.base, GUARD_BYTE, data_bytes);
        TC_MPI(MPI_Win_fence(0, w.win));
        if (peer >= 0) {
            tc_fill_pattern(origin, size, seed_of(tc_rank, size, flavour));
            TC_MPI(MPI_Put(origin, (int) size, MPI_BYTE, peer, tc_disp(&w, peer, slot),
                           (int) size, MPI_BYTE, w.win));
        }
        TC_MPI(MPI_Win_fence(0, w.win));
        if (peer >= 0) {
            memset(back, 0, size);
            TC_MPI(MPI_Get(back, (int) size, MPI_BYTE, peer, tc_disp(&w, peer, slot), (int) size,
                           MPI_BYTE, w.win));
        }
        TC_MPI(MPI_Win_fence(0, w.win));
        if (peer >= 0) {
            snprintf(what, sizeof(what), "%s: get of %zu bytes back from rank %d", fname, size,
                     peer);
            TC_CHECK_PATTERN(what, back, size, seed_of(tc_rank, size, flavour));
        }
        for (int o = 0; o < tc_size; ++o) {
            uint8_t *zone = w.base + (size_t) o * SLOT_BYTES;
            if (targets[o] == tc_rank) {
                snprintf(what, sizeof(what), "%s: put of %zu bytes from rank %d", fname, size, o);
                TC_CHECK_PATTERN(what, zone, size, seed_of(o, size, flavour));
                snprintf(what, sizeof(what), "%s: guard after the put from rank %d", fname, o);
                TC_CHECK_FILL(what, zone + size, SLOT_BYTES - size, GUARD_BYTE);
            } else {
                snprintf(what, sizeof(what), "%s: slot of rank %d, which puts elsewhere", fname, o);
                TC_CHECK_FILL(what, zone, SLOT_BYTES, GUARD_BYTE);
            }
        }
    }
    tc_phase("%s: puts and gets checked", fname);

    /* contention: every rank adds to every rank's counter, round after
     * round, through fetch-and-op */
    memset(w.base + counter_off, 0, sizeof(int64_t));
    TC_MPI(MPI_Win_fence(0, w.win));
    TC_MPI(MPI_Win_lock_all(0, w.win));
    for (int round = 0; round < FOP_ROUNDS; ++round) {
        for (int k = 0; k < tc_size; ++k) {
            int target = (tc_rank + k) % tc_size;
            int64_t one = 1, fetched = -1;
            TC_MPI(MPI_Fetch_and_op(&one, &fetched, MPI_INT64_T, target,
                                    tc_disp(&w, target, counter_off), MPI_SUM, w.win));
            TC_MPI(MPI_Win_flush(target, w.win));
            TC_CHECK(fetched >= 0 && fetched < (int64_t) tc_size * FOP_ROUNDS,
                     "%s: fetch-and-add on rank %d fetched %" PRId64, fname, target, fetched);
            if (fetched > max_fetched) {
                max_fetched = fetched;
            }
        }
    }
    TC_MPI(MPI_Win_unlock_all(w.win));
    TC_MPI(MPI_Win_fence(0, w.win));
    {
        int64_t counter;
        memcpy(&counter, w.base + counter_off, sizeof(counter));
        TC_CHECK_EQ_INT("fetch-and-add counter", (int64_t) tc_size * FOP_ROUNDS, counter);
    }
    tc_phase("%s: fetch-and-op contention checked (largest value fetched here %" PRId64 ")",
             fname, max_fetched);
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    tc_window_close(&w);

    {
        unsigned long puts = pvar_now("put_count") - put0, gets = pvar_now("get_count") - get0;
        unsigned long atomics = pvar_now("atomic_count") - atomic0;
        if (peer >= 0) {
            TC_CHECK(puts > 0, "%s: btl_ofi_put_count did not grow: the puts to rank %d (another "
                               "host) did not go through our btl/ofi",
                     fname, peer);
            TC_CHECK(gets > 0, "%s: btl_ofi_get_count did not grow: the gets from rank %d did not "
                               "go through our btl/ofi",
                     fname, peer);
            TC_CHECK(atomics > 0, "%s: btl_ofi_atomic_count did not grow: the atomics did not go "
                                  "through our btl/ofi",
                     fname);
        }
        unsigned long mine[3] = {puts, gets, atomics}, all[3];
        TC_MPI(MPI_Reduce(mine, all, 3, MPI_UNSIGNED_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
        tc_phase("%s: btl/ofi during this flavour, summed over ranks: puts %lu gets %lu "
                 "atomics %lu",
                 fname, all[0], all[1], all[2]);
    }
    free(origin);
    free(back);
}

int main(int argc, char **argv)
{
    int *nodes, *targets, peer, num_nodes = 0;

    tc_init(&argc, &argv, "hosts_rma");
    nodes = tc_node_of_ranks();
    for (int r = 0; r < tc_size; ++r) {
        num_nodes += (nodes[r] == r);
    }
    peer = remote_peer(nodes);
    targets = tc_malloc((size_t) tc_size * sizeof(int));
    TC_MPI(MPI_Allgather(&peer, 1, MPI_INT, targets, 1, MPI_INT, MPI_COMM_WORLD));
    {
        char host[64] = "?";
        gethostname(host, sizeof(host));
        printf("[hosts_rma] rank %d on %s, node %d, puts to rank %d\n", tc_rank, host,
               nodes[tc_rank], peer);
        fflush(stdout);
    }
    tc_phase("%d rank(s) on %d node(s)", tc_size, num_nodes);
    if (num_nodes < 2) {
        tc_phase("all ranks on one node: no BTL checks (run across contrib/hosts)");
    }

    for (int f = 0; f < TC_NUM_FLAVOURS; ++f) {
        run_flavour((enum tc_flavour) f, peer, targets);
    }
    /* every counter must exist; the per-flavour deltas above are the proof */
    tc_expect_pvars(TC_PVAR_SUM, "put_count get_count atomic_count");
    free(targets);
    free(nodes);
    return tc_finish();
}
