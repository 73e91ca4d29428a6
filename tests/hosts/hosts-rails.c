/*
 * One-sided traffic striped across a rank's NICs (btl_ofi_rails) between
 * simulated hosts (contrib/hosts up 2 --nics K).
 *
 * Every rank puts to and gets from the next rank on another host, over
 * MPI_Win_create and dynamic windows:
 * - contiguous transfers from 1 byte to 16 MiB, around btl_ofi_stripe_min
 *   and around chunk boundaries, at odd target offsets; the target checks
 *   every byte that landed and the guard bytes around it, the origin
 *   checks what a get read of data the target wrote itself;
 * - between sizes, fetch-and-op, compare-and-swap and accumulate on the
 *   same window, whose fetched values and final sums must be exact;
 * - strided puts (a vector type) with blocks below and above the
 *   threshold, gaps checked;
 * - with RAILS > 1: one 8 MiB put and one 8 MiB get move bytes on every
 *   NIC (btl_ofi_nic_put_bytes / nic_get_bytes, one value per module), and
 *   the atomics of the run count on module 0 only (nic_atomic_count).
 *
 * Usage: hosts-rails [RAILS]            the checks above
 *        hosts-rails --loop SECONDS     1 MiB puts and gets checked in a
 *            loop until SECONDS have passed, while contrib/hosts breaks a
 *            NIC; prints the repost and rail-down counters
 *        hosts-rails --loop-atomics SECONDS   the same, each round also a
 *            fetch-and-op on a counter of the peer's, whose fetched value
 *            must be the round's number
 */
#include "mpi/common.h"

#include <stdbool.h>

#define DATA_BYTES ((size_t) (16 << 20) + 4096)
#define GUARD      64
#define GUARD_BYTE 0x5A
#define ATOM_SLOT  64 /* bytes of one origin's atomic slot */
#define ACC_INTS   4
#define BIG        ((size_t) 8 << 20)

static const size_t sizes[] = {
    1,          8,         63,          4096,          65535,          65536,         65537,
    65536 + 63, 98304 + 1, 131072 + 65, (1 << 20) - 1, (1 << 20) + 67, (4 << 20) + 5, 16 << 20
};
static const size_t offsets[] = { 0, 1, 61 };
#define NUM_SIZES   (sizeof(sizes) / sizeof(sizes[0]))
#define NUM_OFFSETS (sizeof(offsets) / sizeof(offsets[0]))

static int peer = -1;   /* where this rank puts */
static int origin = -1; /* who puts here */
static int atomics_done;

/* Ranks as (node, index on the node), the node named by its first rank. */
typedef struct {
    int node;
    int local;
} place_t;

/* The rank at @p local on the node after (@p step 1) or before (-1) the
 * node @p node, cyclically; -1 if there is no other node or no such rank. */
static int rank_at(const place_t *places, int node, int local, int step)
{
    int nodes[tc_size], n = 0, at = -1;

    for (int r = 0; r < tc_size; ++r) {
        if (places[r].local == 0) {
            nodes[n++] = places[r].node; /* in rank order */
        }
    }
    for (int i = 0; i < n; ++i) {
        at = (nodes[i] == node) ? i : at;
    }
    if (n < 2 || at < 0) {
        return -1;
    }
    node = nodes[(at + step + n) % n];
    for (int r = 0; r < tc_size; ++r) {
        if (places[r].node == node && places[r].local == local) {
            return r;
        }
    }
    return -1;
}

/* Every rank puts to the rank of its own index on the next node and is
 * the target of the one on the previous node: one origin per target. */
static void find_pairs(void)
{
    MPI_Comm local;
    place_t me = { tc_rank, 0 }, *places = tc_malloc((size_t) tc_size * sizeof(place_t));

    TC_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local));
    TC_MPI(MPI_Bcast(&me.node, 1, MPI_INT, 0, local));
    TC_MPI(MPI_Comm_rank(local, &me.local));
    TC_MPI(MPI_Comm_free(&local));
    TC_MPI(MPI_Allgather(&me, 2, MPI_INT, places, 2, MPI_INT, MPI_COMM_WORLD));
    peer = rank_at(places, me.node, me.local, 1);
    origin = rank_at(places, me.node, me.local, -1);
    free(places);
}

static uint32_t seed_of(int rank, size_t size, size_t off, int round)
{
    return (uint32_t) rank * 7919u + (uint32_t) size * 13u + (uint32_t) off * 101u
           + (uint32_t) round * 104729u;
}

/* Fetch-and-op, compare-and-swap and accumulate on the peer's slot of
 * ours: the n-th of each fetches exactly n. */
static void atomics_round(tc_window_t *w)
{
    size_t slot = DATA_BYTES + (size_t) tc_rank * ATOM_SLOT;
    int64_t one = 1, fetched = -1, expect = atomics_done, swap = atomics_done + 1;
    int acc[ACC_INTS];

    if (peer < 0) {
        return;
    }
    TC_MPI(MPI_Fetch_and_op(&one, &fetched, MPI_INT64_T, peer, tc_disp(w, peer, slot), MPI_SUM,
                            w->win));
    TC_MPI(MPI_Win_flush(peer, w->win));
    TC_CHECK(fetched == atomics_done, "fetch-and-op %d fetched %" PRId64, atomics_done, fetched);
    fetched = -1;
    TC_MPI(MPI_Compare_and_swap(&swap, &expect, &fetched, MPI_INT64_T, peer,
                                tc_disp(w, peer, slot + 8), w->win));
    TC_MPI(MPI_Win_flush(peer, w->win));
    TC_CHECK(fetched == atomics_done, "compare-and-swap %d fetched %" PRId64, atomics_done,
             fetched);
    for (int i = 0; i < ACC_INTS; ++i) {
        acc[i] = i + 1;
    }
    TC_MPI(MPI_Accumulate(acc, ACC_INTS, MPI_INT, peer, tc_disp(w, peer, slot + 16), ACC_INTS,
                          MPI_INT, MPI_SUM, w->win));
    TC_MPI(MPI_Win_flush(peer, w->win));
    ++atomics_done;
}

static void check_atomics(tc_window_t *w)
{
    const uint8_t *slot = w->base + DATA_BYTES + (size_t) origin * ATOM_SLOT;
    int64_t fop, cas;
    int acc[ACC_INTS];

    if (origin < 0) {
        return;
    }
    memcpy(&fop, slot, 8);
    memcpy(&cas, slot + 8, 8);
    memcpy(acc, slot + 16, sizeof(acc));
    TC_CHECK(fop == atomics_done, "fetch-and-op counter %" PRId64 ", expected %d", fop,
             atomics_done);
    TC_CHECK(cas == atomics_done, "compare-and-swap value %" PRId64 ", expected %d", cas,
             atomics_done);
    for (int i = 0; i < ACC_INTS; ++i) {
        TC_CHECK(acc[i] == (i + 1) * atomics_done, "accumulate[%d] %d, expected %d", i, acc[i],
                 (i + 1) * atomics_done);
    }
}

/* Target side: [0, off) and the guard after the data untouched. */
static void check_landed(tc_window_t *w, size_t size, size_t off, int round, const char *fname)
{
    char what[160];

    if (origin < 0) {
        return;
    }
    snprintf(what, sizeof(what), "%s: put of %zu bytes at +%zu from rank %d", fname, size, off,
             origin);
    TC_CHECK_PATTERN(what, w->base + off, size, seed_of(origin, size, off, round));
    snprintf(what, sizeof(what), "%s: guard before the put of %zu at +%zu", fname, size, off);
    TC_CHECK_FILL(what, w->base, off, GUARD_BYTE);
    snprintf(what, sizeof(what), "%s: guard after the put of %zu at +%zu", fname, size, off);
    TC_CHECK_FILL(what, w->base + off + size, GUARD, GUARD_BYTE);
}

static void contiguous(tc_window_t *w, const char *fname, uint8_t *src, uint8_t *back)
{
    char what[160];

    for (size_t s = 0; s < NUM_SIZES; ++s) {
        for (size_t o = 0; o < NUM_OFFSETS; ++o) {
            size_t size = sizes[s], off = offsets[o];

            if (off + size + GUARD > DATA_BYTES) {
                continue;
            }
            if (peer >= 0) {
                tc_fill_pattern(src, size, seed_of(tc_rank, size, off, 0));
                TC_MPI(MPI_Put(src, (int) size, MPI_BYTE, peer, tc_disp(w, peer, off), (int) size,
                               MPI_BYTE, w->win));
                TC_MPI(MPI_Win_flush(peer, w->win));
            }
            TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
            TC_MPI(MPI_Win_sync(w->win));
            check_landed(w, size, off, 0, fname);
            /* the target writes what the get must read */
            tc_fill_pattern(w->base + off, size, seed_of(tc_rank, size, off, 1));
            TC_MPI(MPI_Win_sync(w->win));
            TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
            if (peer >= 0) {
                memset(back, 0, size + GUARD);
                TC_MPI(MPI_Get(back, (int) size, MPI_BYTE, peer, tc_disp(w, peer, off), (int) size,
                               MPI_BYTE, w->win));
                TC_MPI(MPI_Win_flush(peer, w->win));
                snprintf(what, sizeof(what), "%s: get of %zu bytes at +%zu from rank %d", fname,
                         size, off, peer);
                TC_CHECK_PATTERN(what, back, size, seed_of(peer, size, off, 1));
                TC_CHECK_FILL("bytes after the get", back + size, GUARD, 0);
            }
            TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
            memset(w->base, GUARD_BYTE, off + size + GUARD);
            TC_MPI(MPI_Win_sync(w->win));
            TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
        }
        atomics_round(w);
    }
}

/* A vector of @p blocks blocks of @p block bytes, one block apart. */
static void strided(tc_window_t *w, const char *fname, uint8_t *src, size_t block, int blocks)
{
    MPI_Datatype vec;
    size_t span = (size_t) (2 * blocks - 1) * block;
    char what[160];

    TC_MPI(MPI_Type_vector(blocks, (int) block, (int) (2 * block), MPI_BYTE, &vec));
    TC_MPI(MPI_Type_commit(&vec));
    if (peer >= 0) {
        tc_fill_pattern(src, (size_t) blocks * block, seed_of(tc_rank, block, 0, 2));
        TC_MPI(MPI_Put(src, (int) ((size_t) blocks * block), MPI_BYTE, peer, tc_disp(w, peer, 0), 1,
                       vec, w->win));
        TC_MPI(MPI_Win_flush(peer, w->win));
    }
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    TC_MPI(MPI_Win_sync(w->win));
    if (origin >= 0) {
        uint8_t *expect = tc_malloc((size_t) blocks * block);

        tc_fill_pattern(expect, (size_t) blocks * block, seed_of(origin, block, 0, 2));
        for (int b = 0; b < blocks; ++b) {
            uint8_t *at = w->base + (size_t) (2 * b) * block;

            snprintf(what, sizeof(what), "%s: strided block %d of %zu bytes", fname, b, block);
            TC_CHECK(0 == memcmp(at, expect + (size_t) b * block, block), "%s differs", what);
            if (b + 1 < blocks) {
                snprintf(what, sizeof(what), "%s: gap after block %d of %zu", fname, b, block);
                TC_CHECK_FILL(what, at + block, block, GUARD_BYTE);
            }
        }
        TC_CHECK_FILL("after the last block", w->base + span, GUARD, GUARD_BYTE);
        free(expect);
    }
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    memset(w->base, GUARD_BYTE, span + GUARD);
    TC_MPI(MPI_Win_sync(w->win));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    TC_MPI(MPI_Type_free(&vec));
}

/* What counter NAME grew by on each module since @p before. */
static int nic_growth(const char *name, const unsigned long *before, unsigned long *growth)
{
    unsigned long now[BTL_OFI_PVARS_MAX_VALUES];
    int n = btl_ofi_pvars_read_each(name, now, BTL_OFI_PVARS_MAX_VALUES);

    for (int i = 0; i < n; ++i) {
        growth[i] = now[i] - before[i];
    }
    return n;
}

/* One large put and get move bytes on every rail. */
static void every_rail_carries(tc_window_t *w, int rails, uint8_t *src, uint8_t *back)
{
    static const char *const names[] = { "nic_put_bytes", "nic_get_bytes" };
    unsigned long before[2][BTL_OFI_PVARS_MAX_VALUES], growth[BTL_OFI_PVARS_MAX_VALUES];

    for (int c = 0; c < 2; ++c) {
        TC_CHECK(btl_ofi_pvars_read_each(names[c], before[c], BTL_OFI_PVARS_MAX_VALUES) >= rails,
                 "%s holds fewer than %d values", names[c], rails);
    }
    if (peer >= 0) {
        tc_fill_pattern(src, BIG, seed_of(tc_rank, BIG, 0, 3));
        TC_MPI(MPI_Put(src, (int) BIG, MPI_BYTE, peer, tc_disp(w, peer, 0), (int) BIG, MPI_BYTE,
                       w->win));
        TC_MPI(MPI_Win_flush(peer, w->win));
        TC_MPI(MPI_Get(back, (int) BIG, MPI_BYTE, peer, tc_disp(w, peer, 0), (int) BIG, MPI_BYTE,
                       w->win));
        TC_MPI(MPI_Win_flush(peer, w->win));
        TC_CHECK_PATTERN("8 MiB put read back", back, BIG, seed_of(tc_rank, BIG, 0, 3));
        for (int c = 0; c < 2; ++c) {
            int n = nic_growth(names[c], before[c], growth);

            for (int r = 0; r < rails && r < n; ++r) {
                tc_phase("%s on module %d: %lu bytes", names[c], r, growth[r]);
                TC_CHECK(growth[r] >= BIG / (size_t) rails / 2,
                         "%s: module %d carried %lu of %zu bytes", names[c], r, growth[r], BIG);
            }
        }
    }
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

static void run_checks(int rails)
{
    uint8_t *src = tc_malloc(DATA_BYTES), *back = tc_malloc(DATA_BYTES);
    unsigned long atom0[BTL_OFI_PVARS_MAX_VALUES], growth[BTL_OFI_PVARS_MAX_VALUES];
    int n;

    for (int f = TC_WIN_CREATE; f <= TC_WIN_DYNAMIC; ++f) {
        tc_window_t w;

        atomics_done = 0;
        n = btl_ofi_pvars_read_each("nic_atomic_count", atom0, BTL_OFI_PVARS_MAX_VALUES);
        tc_window_open(&w, (enum tc_flavour) f, DATA_BYTES + (size_t) tc_size * ATOM_SLOT);
        memset(w.base, GUARD_BYTE, DATA_BYTES);
        TC_MPI(MPI_Win_lock_all(0, w.win));
        TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
        contiguous(&w, tc_flavour_names[f], src, back);
        tc_phase("%s: contiguous puts and gets checked", tc_flavour_names[f]);
        strided(&w, tc_flavour_names[f], src, 16384, 24);
        strided(&w, tc_flavour_names[f], src, 98304 + 7, 12);
        tc_phase("%s: strided puts checked", tc_flavour_names[f]);
        if (rails > 1) {
            every_rail_carries(&w, rails, src, back);
        }
        TC_MPI(MPI_Win_unlock_all(w.win));
        TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
        check_atomics(&w);
        if (rails > 1 && n > 1 && peer >= 0) {
            n = nic_growth("nic_atomic_count", atom0, growth);
            TC_CHECK(growth[0] > 0, "no atomics counted on module 0");
            for (int r = 1; r < n; ++r) {
                TC_CHECK(0 == growth[r], "module %d posted %lu atomics: they must stay on one", r,
                         growth[r]);
            }
        }
        tc_phase("%s: %d rounds of atomics exact", tc_flavour_names[f], atomics_done);
        tc_window_close(&w);
    }
    free(src);
    free(back);
}

/* Fetch-and-op +1 on the peer's counter, which only this rank adds to:
 * the value fetched in round @p round is @p round. */
static void count_on_peer(tc_window_t *cw, long round)
{
    int64_t one = 1, fetched = -1;

    TC_MPI(MPI_Fetch_and_op(&one, &fetched, MPI_INT64_T, peer, tc_disp(cw, peer, 0), MPI_SUM,
                            cw->win));
    TC_MPI(MPI_Win_flush(peer, cw->win));
    if (fetched != round) {
        fprintf(stderr, "hosts_rails: loop: fetch-and-op fetched %lld in round %ld\n",
                (long long) fetched, round);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

/* Puts and gets of 1 MiB + 13 checked until @p seconds have passed, each
 * round with a checked fetch-and-op too when @p atomics. */
static void run_loop(double seconds, bool atomics)
{
    const size_t size = (1 << 20) + 13;
    uint8_t *src = tc_malloc(size), *back = tc_malloc(size);
    double end = tc_now() + seconds;
    long rounds = 0, more = 1;
    tc_window_t w, cw;

    tc_window_open(&w, TC_WIN_CREATE, size);
    tc_window_open(&cw, TC_WIN_CREATE, sizeof(int64_t));
    TC_MPI(MPI_Win_lock_all(0, w.win));
    TC_MPI(MPI_Win_lock_all(0, cw.win));
    while (more) {
        if (peer >= 0) {
            uint32_t seed = seed_of(tc_rank, size, 0, (int) rounds);

            if (atomics) {
                count_on_peer(&cw, rounds);
            }

            tc_fill_pattern(src, size, seed);
            TC_MPI(MPI_Put(src, (int) size, MPI_BYTE, peer, tc_disp(&w, peer, 0), (int) size,
                           MPI_BYTE, w.win));
            TC_MPI(MPI_Win_flush(peer, w.win));
            memset(back, 0, size);
            TC_MPI(MPI_Get(back, (int) size, MPI_BYTE, peer, tc_disp(&w, peer, 0), (int) size,
                           MPI_BYTE, w.win));
            TC_MPI(MPI_Win_flush(peer, w.win));
            if (0 != TC_CHECK_PATTERN("loop: put read back", back, size, seed)) {
                /* a rail's failure must not cost a byte: end the job at once */
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
        }
        ++rounds;
        more = tc_now() < end;
        TC_MPI(MPI_Allreduce(MPI_IN_PLACE, &more, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD));
    }
    TC_MPI(MPI_Win_unlock_all(cw.win));
    TC_MPI(MPI_Win_unlock_all(w.win));
    tc_phase("loop: %ld rounds, repost_count %ld rail_down_count %ld", rounds,
             btl_ofi_pvars_get("repost_count"), btl_ofi_pvars_get("rail_down_count"));
    printf("RAILS rank=%d rounds=%ld repost=%ld rail_down=%ld\n", tc_rank, rounds,
           btl_ofi_pvars_get("repost_count"), btl_ofi_pvars_get("rail_down_count"));
    tc_window_close(&cw);
    tc_window_close(&w);
    free(src);
    free(back);
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "hosts_rails");
    find_pairs();
    TC_CHECK(peer >= 0, "rank %d has no peer on another host", tc_rank);
    if (argc > 2 && 0 == strcmp(argv[1], "--loop")) {
        run_loop(atof(argv[2]), false);
    } else if (argc > 2 && 0 == strcmp(argv[1], "--loop-atomics")) {
        run_loop(atof(argv[2]), true);
    } else {
        run_checks(argc > 1 ? atoi(argv[1]) : 1);
    }
    return tc_finish();
}
