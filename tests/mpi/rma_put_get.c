/*
 * Contiguous MPI_Put and MPI_Get from 1 byte to 16 MiB, at unaligned origin
 * and target offsets, to self and to peers, over all three window flavours,
 * in fence epochs.
 *
 * Every rank's window holds two zones: PEER, written by its left neighbour,
 * and SELF, written by itself.  Each transfer is surrounded by guard bytes
 * that must stay untouched, so a transfer that is too long, too short or
 * shifted is caught as well as wrong bytes.  Gets then read the PEER zone of
 * the rank two to the right, which holds the pattern of the rank one to the
 * right: data that the getter did not write itself.
 */
#include "common.h"

#define GUARD      16
#define MAX_XFER   (16u << 20)
#define MAX_OFFSET 8
#define ZONE_BYTES (GUARD + MAX_OFFSET + MAX_XFER + GUARD)
#define PEER_ZONE  0
#define SELF_ZONE  ZONE_BYTES
#define WIN_BYTES  (2 * ZONE_BYTES)
#define GUARD_BYTE 0xA5

/* sizes on both sides of the powers of two, of the 64 KiB put/get limit of
 * the limit manifest line, and of the provider's inject and eager sizes */
static const size_t sizes[] = {
    1, 2, 3, 7, 8, 15, 64, 255, 4096, 65535, 65536, 65537, (1u << 20) + 3, MAX_XFER
};

/* (target offset, origin offset) pairs; transfers above 64 KiB use only
 * the unaligned pair: touching 16 MiB costs enough time already */
static const size_t offsets[][2] = { { 1, 3 }, { 0, 0 }, { 5, 0 }, { 0, 7 } };
#define NUM_OFFSETS (sizeof(offsets) / sizeof(offsets[0]))

static uint32_t seed_of(int rank, size_t size, size_t toff)
{
    return (uint32_t) rank * 1000003u + (uint32_t) size * 31u + (uint32_t) toff;
}

/* Fill the guard zones and the transfer range of a zone before a transfer:
 * only the bytes this round looks at, a full 16 MiB memset per round would
 * dominate the run time. */
static void prepare_zone(uint8_t *zone, size_t toff, size_t size)
{
    memset(zone + toff, GUARD_BYTE, GUARD + size + GUARD);
}

static void check_zone(const char *what, const uint8_t *zone, size_t toff, size_t size,
                       uint32_t seed)
{
    char where[160];
    snprintf(where, sizeof(where), "%s, %zu bytes at target offset %zu, leading guard", what, size,
             toff);
    TC_CHECK_FILL(where, zone + toff, GUARD, GUARD_BYTE);
    snprintf(where, sizeof(where), "%s, %zu bytes at target offset %zu, data", what, size, toff);
    TC_CHECK_PATTERN(where, zone + toff + GUARD, size, seed);
    snprintf(where, sizeof(where), "%s, %zu bytes at target offset %zu, trailing guard", what, size,
             toff);
    TC_CHECK_FILL(where, zone + toff + GUARD + size, GUARD, GUARD_BYTE);
}

static void get_and_check(tc_window_t *w, uint8_t *fetched, size_t size, size_t toff, size_t ooff,
                          int target, size_t zone, uint32_t seed)
{
    const char *flavour = tc_flavour_names[w->flavour];
    char what[160];

    memset(fetched, GUARD_BYTE, ooff + size + GUARD);
    TC_MPI(MPI_Get(fetched + ooff, (int) size, MPI_BYTE, target,
                   tc_disp(w, target, zone + toff + GUARD), (int) size, MPI_BYTE, w->win));
    TC_MPI(MPI_Win_fence(0, w->win));
    snprintf(what, sizeof(what), "%s window: get of %zu bytes from rank %d at offset %zu into %zu",
             flavour, size, target, toff, ooff);
    TC_CHECK_PATTERN(what, fetched + ooff, size, seed);
    snprintf(what, sizeof(what), "%s window: get of %zu bytes from rank %d wrote past its end",
             flavour, size, target);
    TC_CHECK_FILL(what, fetched + ooff + size, GUARD, GUARD_BYTE);
    snprintf(what, sizeof(what), "%s window: get of %zu bytes from rank %d wrote before its start",
             flavour, size, target);
    TC_CHECK_FILL(what, fetched, ooff, GUARD_BYTE);
}

static void run_one(tc_window_t *w, uint8_t *origin, uint8_t *fetched, size_t size, size_t toff,
                    size_t ooff)
{
    const int right = (tc_rank + 1) % tc_size;
    const int left = (tc_rank + tc_size - 1) % tc_size;
    const int right2 = (tc_rank + 2) % tc_size;
    const char *flavour = tc_flavour_names[w->flavour];
    char what[128];

    prepare_zone(w->base + PEER_ZONE, toff, size);
    prepare_zone(w->base + SELF_ZONE, toff, size);
    tc_fill_pattern(origin + ooff, size, seed_of(tc_rank, size, toff));

    TC_MPI(MPI_Win_fence(0, w->win));
    TC_MPI(MPI_Put(origin + ooff, (int) size, MPI_BYTE, right,
                   tc_disp(w, right, PEER_ZONE + toff + GUARD), (int) size, MPI_BYTE, w->win));
    TC_MPI(MPI_Put(origin + ooff, (int) size, MPI_BYTE, tc_rank,
                   tc_disp(w, tc_rank, SELF_ZONE + toff + GUARD), (int) size, MPI_BYTE, w->win));
    TC_MPI(MPI_Win_fence(0, w->win));

    snprintf(what, sizeof(what), "%s window: put from rank %d", flavour, left);
    check_zone(what, w->base + PEER_ZONE, toff, size, seed_of(left, size, toff));
    snprintf(what, sizeof(what), "%s window: put to self", flavour);
    check_zone(what, w->base + SELF_ZONE, toff, size, seed_of(tc_rank, size, toff));

    /* the PEER zone of right2 holds what right put there; at two ranks
     * right2 is this rank, so the SELF zone of right makes sure a peer is
     * read from as well */
    get_and_check(w, fetched, size, toff, ooff, right2, PEER_ZONE, seed_of(right, size, toff));
    get_and_check(w, fetched, size, toff, ooff, right, SELF_ZONE, seed_of(right, size, toff));
    get_and_check(w, fetched, size, toff, ooff, tc_rank, SELF_ZONE, seed_of(tc_rank, size, toff));
}

static void run_flavour(enum tc_flavour flavour, uint8_t *origin, uint8_t *fetched)
{
    tc_window_t w;

    tc_window_open(&w, flavour, WIN_BYTES);
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); ++s) {
        size_t pairs = sizes[s] > 65537 ? 1 : NUM_OFFSETS;
        for (size_t o = 0; o < pairs; ++o) {
            run_one(&w, origin, fetched, sizes[s], offsets[o][0], offsets[o][1]);
        }
    }
    tc_window_close(&w);
    tc_phase("%s window: %zu sizes done", tc_flavour_names[flavour],
             sizeof(sizes) / sizeof(sizes[0]));
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "rma_put_get");
    uint8_t *origin = tc_malloc(MAX_OFFSET + MAX_XFER + GUARD);
    uint8_t *fetched = tc_malloc(MAX_OFFSET + MAX_XFER + GUARD);

    run_flavour(TC_WIN_CREATE, origin, fetched);
    run_flavour(TC_WIN_DYNAMIC, origin, fetched);
    /* put_count and get_count come from the two flavours above: MPI_Win_allocate
     * windows live in shared memory on one node and never reach a BTL */
    tc_expect_pvars(TC_PVAR_THIS_RANK, "put_count put_bytes get_count get_bytes");
    run_flavour(TC_WIN_ALLOCATE, origin, fetched);

    free(origin);
    free(fetched);
    return tc_finish();
}
