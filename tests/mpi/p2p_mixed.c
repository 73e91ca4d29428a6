/*
 * Two-sided and one-sided traffic in the same epochs, both through our
 * component: an MPI_Win_create window (which osc/rdma serves through the
 * BTL, unlike MPI_Win_allocate on one node) takes puts and fetch-and-adds
 * while ob1 messages run between the same ranks.
 *
 * Fence rounds: inside each fence epoch every rank puts a block into its
 * right neighbour's window, adds 1 to a counter on rank 0 with
 * MPI_Fetch_and_op, and exchanges a message with both neighbours; after
 * the closing fence the block, the message and the fetched value are
 * checked.
 *
 * Passive rounds: inside one MPI_Win_lock_all epoch every rank puts a block
 * into its right neighbour, flushes it, and then tells the neighbour by
 * MPI_Send; the neighbour receives, calls MPI_Win_sync and must find the
 * block in its window.  That is the pattern a two-sided message ordering
 * one-sided data relies on, and it holds only when the flush really waited
 * for the put to land.  The same epoch does fetch-and-adds on rank 0.
 *
 * At the end rank 0's counter must equal the number of fetch-and-adds, and
 * the fetched values of all ranks together must be exactly 0 .. N-1.
 * Blocks and messages alternate between small sizes and sizes above the
 * RDMA thresholds.
 */
#include "common.h"

#define FENCE_ROUNDS   24
#define PASSIVE_ROUNDS 24
#define FAO_PER_ROUND  3
#define SMALL_BLOCK    64
#define LARGE_BLOCK    (1u << 20)
#define LARGE_MESSAGE  300000
#define MAX_MESSAGE    (LARGE_MESSAGE + FENCE_ROUNDS + PASSIVE_ROUNDS)
#define TAG_LEFT       31
#define TAG_RIGHT      32
#define TAG_NOTIFY     33
#define COUNTER_OFFSET 0 /* int64 at the start of rank 0's window */
#define BLOCKS_OFFSET  64

static size_t block_size(int round)
{
    return (round % 6 == 5) ? LARGE_BLOCK + 7 : SMALL_BLOCK + (size_t) round;
}

static size_t message_size(int round)
{
    return (round % 4 == 3) ? LARGE_MESSAGE + (size_t) round : 100 + (size_t) round;
}

static uint32_t put_seed(int origin, int round)
{
    return 0x50000000u + (uint32_t) origin * 4099u + (uint32_t) round;
}

static uint32_t msg_seed(int sender, int to, int round)
{
    return 0x6D000000u + (uint32_t) sender * 257u + (uint32_t) to * 17u + (uint32_t) round;
}

typedef struct {
    MPI_Win win;
    uint8_t *base;
    size_t bytes;
    int64_t *fetched; /* every value this rank's fetch-and-adds returned */
    int nfetched;
} mixed_t;

/* Blocks from the left neighbour land at BLOCKS_OFFSET, alternately in two
 * halves so that a stale block of the round before cannot pass for new. */
static size_t block_offset(int round)
{
    return BLOCKS_OFFSET + (size_t) (round % 2) * (LARGE_BLOCK + 64);
}

static void fetch_and_add(mixed_t *m)
{
    const int64_t one = 1;
    for (int i = 0; i < FAO_PER_ROUND; ++i) {
        TC_MPI(MPI_Fetch_and_op(&one, &m->fetched[m->nfetched++], MPI_INT64_T, 0, COUNTER_OFFSET,
                                MPI_SUM, m->win));
    }
}

static void check_block(const mixed_t *m, int round, const char *mode)
{
    const int left = (tc_rank + tc_size - 1) % tc_size;
    char what[128];

    snprintf(what, sizeof(what), "%s round %d: block put by rank %d", mode, round, left);
    TC_CHECK_PATTERN(what, m->base + block_offset(round), block_size(round), put_seed(left, round));
}

static void fence_round(mixed_t *m, int round, uint8_t *origin, uint8_t *sendbuf,
                        uint8_t *recvbufs[2])
{
    const int right = (tc_rank + 1) % tc_size;
    const int left = (tc_rank + tc_size - 1) % tc_size;
    const size_t bsize = block_size(round), msize = message_size(round);
    MPI_Request reqs[4];
    MPI_Status st[4];
    char what[128];

    tc_fill_pattern(origin, bsize, put_seed(tc_rank, round));
    memset(recvbufs[0], 0, msize);
    memset(recvbufs[1], 0, msize);

    TC_MPI(MPI_Win_fence(0, m->win));
    TC_MPI(
        MPI_Irecv(recvbufs[0], (int) msize, MPI_BYTE, left, TAG_RIGHT, MPI_COMM_WORLD, &reqs[0]));
    TC_MPI(
        MPI_Irecv(recvbufs[1], (int) msize, MPI_BYTE, right, TAG_LEFT, MPI_COMM_WORLD, &reqs[1]));
    TC_MPI(MPI_Put(origin, (int) bsize, MPI_BYTE, right, (MPI_Aint) block_offset(round),
                   (int) bsize, MPI_BYTE, m->win));
    /* the send buffer holds the message to the right, then to the left */
    tc_fill_pattern(sendbuf, msize, msg_seed(tc_rank, right, round));
    tc_fill_pattern(sendbuf + msize, msize, msg_seed(tc_rank, left, round));
    TC_MPI(MPI_Isend(sendbuf, (int) msize, MPI_BYTE, right, TAG_RIGHT, MPI_COMM_WORLD, &reqs[2]));
    fetch_and_add(m);
    TC_MPI(MPI_Isend(sendbuf + msize, (int) msize, MPI_BYTE, left, TAG_LEFT, MPI_COMM_WORLD,
                     &reqs[3]));
    TC_MPI(MPI_Waitall(4, reqs, st));
    TC_MPI(MPI_Win_fence(0, m->win));

    check_block(m, round, "fence");
    snprintf(what, sizeof(what), "fence round %d: message from left rank %d", round, left);
    TC_CHECK_PATTERN(what, recvbufs[0], msize, msg_seed(left, tc_rank, round));
    snprintf(what, sizeof(what), "fence round %d: message from right rank %d", round, right);
    TC_CHECK_PATTERN(what, recvbufs[1], msize, msg_seed(right, tc_rank, round));
}

/* inside a lock_all epoch */
static void passive_round(mixed_t *m, int round, uint8_t *origin)
{
    const int right = (tc_rank + 1) % tc_size;
    const int left = (tc_rank + tc_size - 1) % tc_size;
    const size_t bsize = block_size(round);
    int32_t note[2] = { tc_rank, round }, got[2] = { -1, -1 };
    MPI_Status st;

    tc_fill_pattern(origin, bsize, put_seed(tc_rank, round));
    TC_MPI(MPI_Put(origin, (int) bsize, MPI_BYTE, right, (MPI_Aint) block_offset(round),
                   (int) bsize, MPI_BYTE, m->win));
    fetch_and_add(m);
    TC_MPI(MPI_Win_flush(right, m->win));
    TC_MPI(MPI_Send(note, 2, MPI_INT32_T, right, TAG_NOTIFY, MPI_COMM_WORLD));

    TC_MPI(MPI_Recv(got, 2, MPI_INT32_T, left, TAG_NOTIFY, MPI_COMM_WORLD, &st));
    TC_CHECK(got[0] == left && got[1] == round,
             "passive round %d: notification says rank %d round %d", round, got[0], got[1]);
    TC_MPI(MPI_Win_sync(m->win));
    check_block(m, round, "passive (put, flush, send; recv, sync)");
    /* the left neighbour reuses this half two rounds later: it must not
     * put before this check is done */
    TC_MPI(MPI_Send(note, 2, MPI_INT32_T, left, TAG_NOTIFY + 1, MPI_COMM_WORLD));
    TC_MPI(MPI_Recv(got, 2, MPI_INT32_T, right, TAG_NOTIFY + 1, MPI_COMM_WORLD, &st));
}

static int compare_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
    return (x > y) - (x < y);
}

static void check_counter(mixed_t *m)
{
    const int per_rank = (FENCE_ROUNDS + PASSIVE_ROUNDS) * FAO_PER_ROUND;
    const int total = per_rank * tc_size;
    int64_t *all = (0 == tc_rank) ? tc_malloc((size_t) total * sizeof(int64_t)) : NULL;

    TC_CHECK_EQ_INT("fetch-and-adds done by this rank", per_rank, m->nfetched);
    TC_MPI(MPI_Gather(m->fetched, per_rank, MPI_INT64_T, all, per_rank, MPI_INT64_T, 0,
                      MPI_COMM_WORLD));
    if (0 != tc_rank) {
        return;
    }
    int64_t counter;
    memcpy(&counter, m->base + COUNTER_OFFSET, sizeof(counter));
    TC_CHECK_EQ_INT("rank 0's counter after all fetch-and-adds", total, counter);
    qsort(all, (size_t) total, sizeof(int64_t), compare_int64);
    for (int i = 0; i < total; ++i) {
        if (all[i] != i) {
            TC_FAIL("fetched values are not 0..%d: sorted position %d holds %" PRId64
                    " (a value was fetched twice or skipped)",
                    total - 1, i, all[i]);
            break;
        }
    }
    free(all);
}

int main(int argc, char **argv)
{
    mixed_t m;

    tc_init(&argc, &argv, "p2p_mixed");
    memset(&m, 0, sizeof(m));
    m.bytes = BLOCKS_OFFSET + 2 * (LARGE_BLOCK + 64);
    m.base = tc_malloc(m.bytes);
    memset(m.base, 0, m.bytes);
    m.fetched = tc_malloc((FENCE_ROUNDS + PASSIVE_ROUNDS) * FAO_PER_ROUND * sizeof(int64_t));
    TC_MPI(MPI_Win_create(m.base, (MPI_Aint) m.bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &m.win));
    tc_win_errors_return(m.win);

    uint8_t *origin = tc_malloc(LARGE_BLOCK + 64);
    uint8_t *sendbuf = tc_malloc(2 * MAX_MESSAGE);
    uint8_t *recvbufs[2] = { tc_malloc(MAX_MESSAGE), tc_malloc(MAX_MESSAGE) };

    for (int round = 0; round < FENCE_ROUNDS; ++round) {
        fence_round(&m, round, origin, sendbuf, recvbufs);
    }
    TC_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, m.win));
    tc_phase("%d fence rounds verified", FENCE_ROUNDS);

    TC_MPI(MPI_Win_lock_all(0, m.win));
    for (int round = FENCE_ROUNDS; round < FENCE_ROUNDS + PASSIVE_ROUNDS; ++round) {
        passive_round(&m, round, origin);
    }
    TC_MPI(MPI_Win_unlock_all(m.win));
    /* every fetch-and-add is complete everywhere before rank 0 reads */
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, tc_rank, 0, m.win));
    TC_MPI(MPI_Win_sync(m.win));
    TC_MPI(MPI_Win_unlock(tc_rank, m.win));
    tc_phase("%d passive rounds verified", PASSIVE_ROUNDS);

    check_counter(&m);
    tc_expect_pvars(TC_PVAR_THIS_RANK,
                    "send_count recv_count send_bytes recv_bytes put_count put_bytes");
    /* the atomics all target rank 0: counted on the origins, summed */
    tc_expect_pvars(TC_PVAR_SUM, "atomic_count");

    TC_MPI(MPI_Win_free(&m.win));
    free(recvbufs[1]);
    free(recvbufs[0]);
    free(sendbuf);
    free(origin);
    free(m.fetched);
    free(m.base);
    return tc_finish();
}
