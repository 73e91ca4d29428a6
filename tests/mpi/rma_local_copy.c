/*
 * Same-host peers in a job that spans hosts (btl_ofi_local_copy): their
 * puts and gets are copies into and out of the peer's memory, while
 * another host's peers and every atomic still go through the provider.
 *
 * Over MPI_Win_create and dynamic windows (MPI_Win_allocate reaches
 * same-host peers through shared memory without the BTL), three phases,
 * each checked by its bytes and by our counters on this rank:
 *   1. puts and gets only to the next rank on this host, 1 B to 1 MiB:
 *      every BTL put and get a copy (local_copy_count grows by exactly
 *      put_count + get_count) when copies are expected, none otherwise;
 *   2. puts and gets only to a rank on another host: no copy, and
 *      put_count and get_count grow;
 *   3. fetch-and-add from every rank to every rank's counter, interleaved
 *      with copied puts to the same-host peer's slots: the atomics go
 *      through a provider (atomic_count grows, no copy is counted for
 *      them), each value fetched is in range and the sum is exact.  With
 *      -a 1 the same-host ranks' atomics go through the shm module
 *      (btl_ofi_local_atomics) and the other hosts' through the network
 *      provider, on the same counter: the exact sum shows the two atomic
 *      with each other, and local_atomic_count covers at least every
 *      fetch-and-add to another rank of this host and none to another host.
 *
 * Usage: rma_local_copy -c 1|0 [-a 1|0]   (-c 1: copies expected, as
 * btl_ofi_local_copy -1 across hosts or 1 anywhere gives; 0: none, as with
 * 0, with -1 on one node, or on shm.  -a: same-host atomics through shm
 * expected, or none; unchecked without it).
 * Phase 1 needs two ranks on a host, phase 2 two hosts; each is skipped,
 * and said so, when the layout lacks it.
 */
#include <stdbool.h>
#include <unistd.h>

#include "common.h"

#define MAX_BYTES  (1024 * 1024)
#define SLOT_BYTES (MAX_BYTES + 64)
#define FOP_ROUNDS 30
#define GUARD_BYTE 0x3C

static const size_t sizes[] = {1, 8, 4096, 65536 + 3, MAX_BYTES};
#define NUM_SIZES (sizeof(sizes) / sizeof(sizes[0]))

typedef struct {
    unsigned long put, get, atomic, copy, local_atomic;
} counts_t;

/* -a: 1 same-host atomics through shm expected, 0 none, -1 unchecked */
static int local_atomics = -1;

static unsigned long pvar_now(const char *name)
{
    unsigned long v = 0;
    (void) btl_ofi_pvars_read(name, &v);
    return v;
}

static counts_t counts_now(void)
{
    counts_t c = {pvar_now("put_count"), pvar_now("get_count"), pvar_now("atomic_count"),
                  pvar_now("local_copy_count"), pvar_now("local_atomic_count")};
    return c;
}

static counts_t counts_since(counts_t before)
{
    counts_t now = counts_now();
    counts_t d = {now.put - before.put, now.get - before.get, now.atomic - before.atomic,
                  now.copy - before.copy, now.local_atomic - before.local_atomic};
    return d;
}

/* The next rank after us, cyclically, on our node (same) or on another
 * one; -1 when there is none. */
static int next_peer(const int *nodes, bool same)
{
    for (int k = 1; k < tc_size; ++k) {
        int r = (tc_rank + k) % tc_size;
        if ((nodes[r] == nodes[tc_rank]) == same) {
            return r;
        }
    }
    return -1;
}

static uint32_t seed_of(int origin, size_t size, int phase)
{
    return (uint32_t) origin * 7907u + (uint32_t) size * 31u + (uint32_t) phase * 65537u;
}

/* Every rank puts to and gets back from its peer (-1: sits out), then
 * checks what landed in its own window: the slot of each origin that aimed
 * at it, guards elsewhere. */
static void puts_and_gets(tc_window_t *w, int peer, const int *peers, int phase, const char *what)
{
    uint8_t *origin = tc_malloc(SLOT_BYTES), *back = tc_malloc(SLOT_BYTES);
    char label[160];

    for (size_t s = 0; s < NUM_SIZES; ++s) {
        const size_t size = sizes[s];
        const size_t slot = (size_t) tc_rank * SLOT_BYTES;

        memset(w->base, GUARD_BYTE, (size_t) tc_size * SLOT_BYTES);
        TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
        TC_MPI(MPI_Win_lock_all(0, w->win));
        if (peer >= 0) {
            tc_fill_pattern(origin, size, seed_of(tc_rank, size, phase));
            TC_MPI(MPI_Put(origin, (int) size, MPI_BYTE, peer, tc_disp(w, peer, slot), (int) size,
                           MPI_BYTE, w->win));
            TC_MPI(MPI_Win_flush(peer, w->win));
            memset(back, 0, size);
            TC_MPI(MPI_Get(back, (int) size, MPI_BYTE, peer, tc_disp(w, peer, slot), (int) size,
                           MPI_BYTE, w->win));
            TC_MPI(MPI_Win_flush(peer, w->win));
            snprintf(label, sizeof(label), "%s: get of %zu bytes back from rank %d", what, size,
                     peer);
            TC_CHECK_PATTERN(label, back, size, seed_of(tc_rank, size, phase));
        }
        TC_MPI(MPI_Win_unlock_all(w->win));
        TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (int o = 0; o < tc_size; ++o) {
            uint8_t *zone = w->base + (size_t) o * SLOT_BYTES;
            if (peers[o] == tc_rank) {
                snprintf(label, sizeof(label), "%s: put of %zu bytes from rank %d", what, size, o);
                TC_CHECK_PATTERN(label, zone, size, seed_of(o, size, phase));
                TC_CHECK_FILL(label, zone + size, SLOT_BYTES - size, GUARD_BYTE);
            } else {
                snprintf(label, sizeof(label), "%s: slot of rank %d, not aimed here", what, o);
                TC_CHECK_FILL(label, zone, SLOT_BYTES, GUARD_BYTE);
            }
        }
    }
    free(origin);
    free(back);
}

static void check_copies(const char *what, counts_t d, int peer, bool copies)
{
    if (peer < 0) {
        return;
    }
    TC_CHECK(d.put > 0 && d.get > 0, "%s: put_count grew by %lu and get_count by %lu: not "
                                     "through our btl/ofi", what, d.put, d.get);
    if (copies) {
        TC_CHECK(d.copy == d.put + d.get, "%s: %lu copies for %lu BTL puts and %lu gets: some "
                                          "went through the provider", what, d.copy, d.put, d.get);
    } else {
        TC_CHECK(0 == d.copy, "%s: %lu copies where none was expected", what, d.copy);
    }
    tc_phase("%s: BTL puts %lu, gets %lu, of them copied %lu", what, d.put, d.get, d.copy);
}

/* Phases 1 and 2: every rank's puts and gets to @p peer (-1: it sits
 * out), their bytes, and what our counters say carried them. */
static void peer_phase(tc_window_t *w, int peer, int phase, const char *what, bool copies)
{
    int *peers = tc_malloc((size_t) tc_size * sizeof(int));
    counts_t before;

    TC_MPI(MPI_Allgather(&peer, 1, MPI_INT, peers, 1, MPI_INT, MPI_COMM_WORLD));
    before = counts_now();
    puts_and_gets(w, peer, peers, phase, what);
    check_copies(what, counts_since(before), peer, copies);
    if (peer < 0) {
        tc_phase("%s: no such peer here (phase %d skipped)", what, phase);
    }
    free(peers);
}

/* Ranks other than this one on its host (same) or on other hosts. */
static int ranks_placed(const int *nodes, bool same)
{
    int n = 0;

    for (int r = 0; r < tc_size; ++r) {
        n += r != tc_rank && (nodes[r] == nodes[tc_rank]) == same;
    }
    return n;
}

/* Phase 3's atomics: all through a provider, and with -a which one. */
static void check_atomic_paths(const char *fname, counts_t d, const int *nodes)
{
    unsigned long same = (unsigned long) ranks_placed(nodes, true) * FOP_ROUNDS;
    unsigned long other = (unsigned long) ranks_placed(nodes, false) * FOP_ROUNDS;

    TC_CHECK(d.atomic > 0, "%s: atomic_count did not grow", fname);
    TC_CHECK(d.copy <= d.put + d.get, "%s: %lu copies for %lu puts and %lu gets: an atomic "
                                      "was counted as a copy", fname, d.copy, d.put, d.get);
    TC_CHECK(d.local_atomic <= d.atomic, "%s: %lu same-host atomics of %lu atomics", fname,
             d.local_atomic, d.atomic);
    if (1 == local_atomics) {
        TC_CHECK(d.local_atomic >= same, "%s: %lu atomics through shm for %lu fetch-and-adds to "
                                         "this host's other ranks", fname, d.local_atomic, same);
        TC_CHECK(d.atomic - d.local_atomic >= other, "%s: %lu atomics through the network "
                                                     "provider for %lu to other hosts' ranks",
                 fname, d.atomic - d.local_atomic, other);
    } else if (0 == local_atomics) {
        TC_CHECK(0 == d.local_atomic, "%s: %lu atomics through shm where none was expected",
                 fname, d.local_atomic);
    }
    tc_phase("%s: atomics %lu (%lu of them through shm) beside %lu copied puts", fname, d.atomic,
             d.local_atomic, d.copy);
}

/* Phase 3: atomics through a provider while copied puts go on. */
static void atomics_beside_copies(tc_window_t *w, int local_peer, const int *nodes,
                                  const char *fname)
{
    const size_t counter_off = (size_t) tc_size * SLOT_BYTES;
    uint64_t word = 0;
    int64_t counter;
    counts_t before;

    memset(w->base + counter_off, 0, sizeof(int64_t));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    before = counts_now();
    TC_MPI(MPI_Win_lock_all(0, w->win));
    for (int round = 0; round < FOP_ROUNDS; ++round) {
        for (int k = 0; k < tc_size; ++k) {
            int target = (tc_rank + k) % tc_size;
            int64_t one = 1, fetched = -1;
            TC_MPI(MPI_Fetch_and_op(&one, &fetched, MPI_INT64_T, target,
                                    tc_disp(w, target, counter_off), MPI_SUM, w->win));
            TC_MPI(MPI_Win_flush(target, w->win));
            TC_CHECK(fetched >= 0 && fetched < (int64_t) tc_size * FOP_ROUNDS,
                     "%s: fetch-and-add on rank %d fetched %" PRId64, fname, target, fetched);
        }
        if (local_peer >= 0) {
            word = ((uint64_t) tc_rank << 32) | (uint64_t) round;
            TC_MPI(MPI_Put(&word, 8, MPI_BYTE, local_peer,
                           tc_disp(w, local_peer, (size_t) tc_rank * SLOT_BYTES), 8, MPI_BYTE,
                           w->win));
            TC_MPI(MPI_Win_flush(local_peer, w->win));
        }
    }
    TC_MPI(MPI_Win_unlock_all(w->win));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    memcpy(&counter, w->base + counter_off, sizeof(counter));
    TC_CHECK_EQ_INT("fetch-and-add counter", (int64_t) tc_size * FOP_ROUNDS, counter);
    check_atomic_paths(fname, counts_since(before), nodes);
}

static void run_flavour(enum tc_flavour flavour, const int *nodes, bool copies)
{
    const char *fname = tc_flavour_names[flavour];
    int local_peer = next_peer(nodes, true), remote_peer = next_peer(nodes, false);
    char what[96];
    tc_window_t w;

    tc_window_open(&w, flavour, (size_t) tc_size * SLOT_BYTES + sizeof(int64_t));

    snprintf(what, sizeof(what), "%s, same-host peer %d", fname, local_peer);
    peer_phase(&w, local_peer, 1, what, copies);
    snprintf(what, sizeof(what), "%s, peer %d on another host", fname, remote_peer);
    peer_phase(&w, remote_peer, 2, what, false);

    atomics_beside_copies(&w, local_peer, nodes, fname);
    tc_window_close(&w);
}

int main(int argc, char **argv)
{
    int *nodes, copies = -1, opt;

    tc_init(&argc, &argv, "rma_local_copy");
    while ((opt = getopt(argc, argv, "c:a:")) != -1) {
        if ('c' == opt) {
            copies = atoi(optarg);
        } else if ('a' == opt) {
            local_atomics = atoi(optarg);
        }
    }
    TC_CHECK((0 == copies || 1 == copies) && local_atomics >= -1 && local_atomics <= 1,
             "usage: rma_local_copy -c 1|0 [-a 1|0]");
    nodes = tc_node_of_ranks();
    for (int f = 0; f < TC_NUM_FLAVOURS && 1 >= (unsigned) copies; ++f) {
        if (TC_WIN_ALLOCATE != f) {
            run_flavour((enum tc_flavour) f, nodes, 1 == copies);
        }
    }
    tc_expect_pvars(TC_PVAR_SUM, "put_count get_count atomic_count");
    free(nodes);
    return tc_finish();
}
