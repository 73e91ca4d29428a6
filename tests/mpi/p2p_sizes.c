/*
 * Two-sided transfers from 0 bytes to 64 MiB: a ring (every rank sends to
 * its right neighbour and receives from its left, non-blocking) and a
 * ping-pong between rank pairs (MPI_Send out, MPI_Ssend back).
 *
 * The sizes sit on both sides of the limits that switch ob1's protocols
 * over our component: the 16 KiB eager limit, the 64 KiB fragment size of
 * the send/receive pipeline, and the 256 KiB from which ob1 moves data with
 * RDMA, up to several 4 MiB pipeline fragments.  Every message carries a
 * pattern that depends on its sender, its size and the byte's offset, and
 * lands in a buffer with guard bytes behind it, so that a short, long,
 * shifted or misrouted message is caught.
 *
 * Which protocol carries the bigger messages depends on ob1's choices: by
 * default contiguous rendezvous messages go by RDMA get; the manifest adds
 * runs with "--mca mpi_leave_pinned 0" (messages above 256 KiB by the put
 * pipeline) and with "--mca btl_ofi_flags send,inplace" (no RDMA: the
 * send/receive pipeline in 64 KiB fragments for all of them).
 *
 * Usage: p2p_sizes [MAX_BYTES]   (default 64 MiB, or $P2P_SIZES_MAX, which
 * "mpirun -x P2P_SIZES_MAX=..." sets from a manifest line)
 */
#include "common.h"

#define GUARD      64
#define GUARD_BYTE 0x5A
#define TAG_RING   11
#define TAG_PING   12
#define TAG_PONG   13

static const size_t sizes[] = {
    0,
    1,
    8,
    1000,
    16000, /* eager: ob1's match header fits beside it */
    16352,
    16383, /* rendezvous: the eager limit counts ob1's header */
    16384,
    16385,
    65536, /* one pipeline fragment */
    65537,
    200000,          /* send/receive pipeline, several fragments */
    262143,          /* below the RDMA threshold */
    262144,          /* RDMA protocol */
    (1u << 20) + 13, /* odd-sized RDMA */
    4u << 20,        /* one RDMA pipeline fragment */
    (16u << 20) - 1, /* several fragments, odd tail */
    64u << 20,
};
#define NUM_SIZES (sizeof(sizes) / sizeof(sizes[0]))

/* direction keeps the ping and the pong of one size apart */
static uint32_t seed_of(int sender, size_t size, int direction)
{
    return (uint32_t) sender * 2654435761u + (uint32_t) size * 40503u + (uint32_t) direction * 7u;
}

static void check_received(const char *what, int from, const uint8_t *buf, size_t size,
                           uint32_t seed, const MPI_Status *status)
{
    char where[192];
    int count = -1;

    MPI_Get_count(status, MPI_BYTE, &count);
    snprintf(where, sizeof(where), "%s of %zu bytes from rank %d: MPI_Get_count", what, size, from);
    TC_CHECK_EQ_INT(where, size, count);
    snprintf(where, sizeof(where), "%s of %zu bytes from rank %d: status source", what, size, from);
    TC_CHECK_EQ_INT(where, from, status->MPI_SOURCE);
    snprintf(where, sizeof(where), "%s of %zu bytes from rank %d: data", what, size, from);
    TC_CHECK_PATTERN(where, buf, size, seed);
    snprintf(where, sizeof(where), "%s of %zu bytes from rank %d: guard behind the data", what,
             size, from);
    TC_CHECK_FILL(where, buf + size, GUARD, GUARD_BYTE);
}

static void ring(uint8_t *sendbuf, uint8_t *recvbuf, size_t size)
{
    const int right = (tc_rank + 1) % tc_size;
    const int left = (tc_rank + tc_size - 1) % tc_size;
    MPI_Request reqs[2];
    MPI_Status status[2];

    tc_fill_pattern(sendbuf, size, seed_of(tc_rank, size, 0));
    memset(recvbuf, GUARD_BYTE, size + GUARD);
    /* the receive is posted with room for the guard too: a message longer
     * than announced would land there instead of raising a truncation */
    TC_MPI(MPI_Irecv(recvbuf, (int) (size + GUARD), MPI_BYTE, left, TAG_RING, MPI_COMM_WORLD,
                     &reqs[0]));
    TC_MPI(MPI_Isend(sendbuf, (int) size, MPI_BYTE, right, TAG_RING, MPI_COMM_WORLD, &reqs[1]));
    TC_MPI(MPI_Waitall(2, reqs, status));
    check_received("ring message", left, recvbuf, size, seed_of(left, size, 0), &status[0]);
}

/* Pairs (0,1), (2,3) ...; at an odd size the last rank sits out, the ring
 * covers it. */
static void ping_pong(uint8_t *sendbuf, uint8_t *recvbuf, size_t size)
{
    const int partner = tc_rank ^ 1;
    const int pinger = 0 == tc_rank % 2;
    MPI_Status status;

    if (partner >= tc_size) {
        return;
    }
    memset(recvbuf, GUARD_BYTE, size + GUARD);
    if (pinger) {
        tc_fill_pattern(sendbuf, size, seed_of(tc_rank, size, 1));
        TC_MPI(MPI_Send(sendbuf, (int) size, MPI_BYTE, partner, TAG_PING, MPI_COMM_WORLD));
        TC_MPI(MPI_Recv(recvbuf, (int) (size + GUARD), MPI_BYTE, partner, TAG_PONG, MPI_COMM_WORLD,
                        &status));
        check_received("pong", partner, recvbuf, size, seed_of(partner, size, 2), &status);
    } else {
        TC_MPI(MPI_Recv(recvbuf, (int) (size + GUARD), MPI_BYTE, partner, TAG_PING, MPI_COMM_WORLD,
                        &status));
        check_received("ping", partner, recvbuf, size, seed_of(partner, size, 1), &status);
        tc_fill_pattern(sendbuf, size, seed_of(tc_rank, size, 2));
        /* synchronous mode: even an eager-sized pong waits for its match */
        TC_MPI(MPI_Ssend(sendbuf, (int) size, MPI_BYTE, partner, TAG_PONG, MPI_COMM_WORLD));
    }
}

int main(int argc, char **argv)
{
    size_t max_bytes = sizes[NUM_SIZES - 1];

    tc_init(&argc, &argv, "p2p_sizes");
    if (argc > 1) {
        max_bytes = strtoull(argv[1], NULL, 0);
    } else if (NULL != getenv("P2P_SIZES_MAX")) {
        max_bytes = strtoull(getenv("P2P_SIZES_MAX"), NULL, 0);
    }
    uint8_t *sendbuf = tc_malloc(max_bytes + GUARD);
    uint8_t *recvbuf = tc_malloc(max_bytes + GUARD);

    for (size_t s = 0; s < NUM_SIZES && sizes[s] <= max_bytes; ++s) {
        ring(sendbuf, recvbuf, sizes[s]);
        ping_pong(sendbuf, recvbuf, sizes[s]);
        if (sizes[s] >= (1u << 20)) {
            tc_phase("%zu bytes done", sizes[s]);
        }
    }
    tc_phase("ring and ping-pong done up to %zu bytes", max_bytes);
    tc_expect_pvars(TC_PVAR_THIS_RANK, "send_count send_bytes recv_count recv_bytes");

    free(sendbuf);
    free(recvbuf);
    return tc_finish();
}
