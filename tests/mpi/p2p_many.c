/*
 * Many messages in flight at once: every rank posts 10 000 MPI_Isend to its
 * right neighbour before it waits for any of them, and 10 000 matching
 * MPI_Irecv from its left neighbour, half before the sends (expected
 * messages) and half after (mostly unexpected ones, queued by ob1 until
 * their receive shows up).  That is far more than the receive buffers our
 * component posts, so flow control and EAGAIN handling are exercised.
 *
 * Most messages are small and eager; every 500th is 40 KiB, which needs the
 * rendezvous protocol, so the two kinds overtake each other on the wire.
 * Tags cycle through a few values: MPI's non-overtaking rule says that
 * messages of one sender and tag match receives in posting order, so
 * receive I must hold exactly message I.  Every message carries its index
 * and sender in its first bytes and a pattern after them.
 */
#include "common.h"

#define NUM_MESSAGES    10000
#define NUM_TAGS        7
#define BIG_EVERY       500
#define BIG_BYTES       (40 * 1024)
#define MAX_SMALL_BYTES 1500

typedef struct {
    int32_t sender;
    int32_t index;
} msg_head_t;

static size_t size_of(int index)
{
    if (0 == index % BIG_EVERY) {
        return BIG_BYTES;
    }
    /* varied, and at least the head */
    return sizeof(msg_head_t) + (size_t) (index * 37) % (MAX_SMALL_BYTES - sizeof(msg_head_t));
}

static int tag_of(int index)
{
    return 100 + index % NUM_TAGS;
}

static uint32_t seed_of(int sender, int index)
{
    return (uint32_t) sender * 100003u + (uint32_t) index;
}

static void fill_message(uint8_t *buf, int index)
{
    msg_head_t head = { tc_rank, index };
    size_t size = size_of(index);

    memcpy(buf, &head, sizeof(head));
    tc_fill_pattern(buf + sizeof(head), size - sizeof(head), seed_of(tc_rank, index));
}

static void check_message(const uint8_t *buf, const MPI_Status *status, int sender, int index)
{
    msg_head_t head;
    size_t size = size_of(index);
    int count = -1;
    char what[160];

    MPI_Get_count(status, MPI_BYTE, &count);
    snprintf(what, sizeof(what), "message %d from rank %d: MPI_Get_count", index, sender);
    TC_CHECK_EQ_INT(what, size, count);
    snprintf(what, sizeof(what), "message %d from rank %d: status tag", index, sender);
    TC_CHECK_EQ_INT(what, tag_of(index), status->MPI_TAG);
    if ((size_t) count != size) {
        return;
    }
    memcpy(&head, buf, sizeof(head));
    snprintf(what, sizeof(what), "message %d from rank %d: sender in the message", index, sender);
    TC_CHECK_EQ_INT(what, sender, head.sender);
    snprintf(what, sizeof(what),
             "receive %d from rank %d: index in the message (non-overtaking order)", index, sender);
    TC_CHECK_EQ_INT(what, index, head.index);
    snprintf(what, sizeof(what), "message %d from rank %d: payload", index, sender);
    TC_CHECK_PATTERN(what, buf + sizeof(head), size - sizeof(head), seed_of(sender, index));
}

/* Message I lives at offsets[I] in one big buffer per direction. */
static size_t *layout(size_t *total)
{
    size_t *offsets = tc_malloc(NUM_MESSAGES * sizeof(size_t));
    size_t at = 0;

    for (int i = 0; i < NUM_MESSAGES; ++i) {
        offsets[i] = at;
        at += size_of(i);
    }
    *total = at;
    return offsets;
}

static void run_round(int round, uint8_t *sendbuf, uint8_t *recvbuf, const size_t *offsets,
                      size_t total, MPI_Request *send_reqs, MPI_Request *recv_reqs,
                      MPI_Status *statuses)
{
    const int right = (tc_rank + 1) % tc_size;
    const int left = (tc_rank + tc_size - 1) % tc_size;
    const int half = NUM_MESSAGES / 2;

    memset(recvbuf, 0, total);
    for (int i = 0; i < half; ++i) {
        TC_MPI(MPI_Irecv(recvbuf + offsets[i], (int) size_of(i), MPI_BYTE, left, tag_of(i),
                         MPI_COMM_WORLD, &recv_reqs[i]));
    }
    for (int i = 0; i < NUM_MESSAGES; ++i) {
        TC_MPI(MPI_Isend(sendbuf + offsets[i], (int) size_of(i), MPI_BYTE, right, tag_of(i),
                         MPI_COMM_WORLD, &send_reqs[i]));
    }
    for (int i = half; i < NUM_MESSAGES; ++i) {
        TC_MPI(MPI_Irecv(recvbuf + offsets[i], (int) size_of(i), MPI_BYTE, left, tag_of(i),
                         MPI_COMM_WORLD, &recv_reqs[i]));
    }
    /* the receives first: a wait on the sends alone could need the
     * receiver's progress of the rendezvous messages */
    TC_MPI(MPI_Waitall(NUM_MESSAGES, recv_reqs, statuses));
    for (int i = 0; i < NUM_MESSAGES; ++i) {
        check_message(recvbuf + offsets[i], &statuses[i], left, i);
    }
    TC_MPI(MPI_Waitall(NUM_MESSAGES, send_reqs, MPI_STATUSES_IGNORE));
    tc_phase("round %d: %d messages each way verified", round, NUM_MESSAGES);
}

int main(int argc, char **argv)
{
    size_t total = 0;

    tc_init(&argc, &argv, "p2p_many");
    size_t *offsets = layout(&total);
    uint8_t *sendbuf = tc_malloc(total);
    uint8_t *recvbuf = tc_malloc(total);
    MPI_Request *send_reqs = tc_malloc(NUM_MESSAGES * sizeof(MPI_Request));
    MPI_Request *recv_reqs = tc_malloc(NUM_MESSAGES * sizeof(MPI_Request));
    MPI_Status *statuses = tc_malloc(NUM_MESSAGES * sizeof(MPI_Status));

    for (int i = 0; i < NUM_MESSAGES; ++i) {
        fill_message(sendbuf + offsets[i], i);
    }
    /* one round: with sockets on two busy cores it already takes seconds */
    run_round(0, sendbuf, recvbuf, offsets, total, send_reqs, recv_reqs, statuses);
    tc_expect_pvars(TC_PVAR_THIS_RANK, "send_count send_bytes recv_count recv_bytes");

    free(statuses);
    free(recv_reqs);
    free(send_reqs);
    free(recvbuf);
    free(sendbuf);
    free(offsets);
    return tc_finish();
}
