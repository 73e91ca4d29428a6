/*
 * Matching: MPI_ANY_SOURCE, MPI_ANY_TAG and tags received in another order
 * than they were sent.  Each rank in turn is the root; every other rank
 * sends it a burst of messages with several tags, of eager and rendezvous
 * sizes, and the root
 *
 *   A. receives them by explicit source and tag, in reverse tag order and
 *      reverse source order, so that most arrive before their receive;
 *   B. receives them with MPI_ANY_SOURCE and an explicit tag, again in
 *      reverse tag order, and must see every source once per tag;
 *   C. receives them with MPI_ANY_SOURCE and MPI_ANY_TAG after MPI_Probe,
 *      sizing the buffer by MPI_Get_count; each sender sends every tag
 *      twice, and the two must arrive in order (non-overtaking).
 *
 * Every message says who sent it, with which tag and sequence number, and
 * carries a pattern of those after the header, so a message delivered to
 * the wrong receive is caught by content as well as by status.
 */
#include "common.h"

#define NUM_TAGS   6
#define TAG_BASE_A 1000
#define TAG_BASE_B 2000
#define TAG_BASE_C 3000
#define REPEATS_C  2

typedef struct {
    int32_t sender;
    int32_t tag;
    int32_t seq;
    int32_t size;
} head_t;

/* eager and rendezvous sizes mixed: the big ones take a different path and
 * may be overtaken on the wire by smaller ones behind them */
static size_t size_of(int tag_index, int sender)
{
    static const size_t sizes[NUM_TAGS] = { sizeof(head_t), 100, 3000, 20000, 70000, 300000 };
    return sizes[(tag_index + sender) % NUM_TAGS];
}

static uint32_t seed_of(int sender, int tag, int seq)
{
    return (uint32_t) sender * 65537u + (uint32_t) tag * 31u + (uint32_t) seq;
}

static void fill(uint8_t *buf, size_t size, int tag, int seq)
{
    head_t h = { tc_rank, tag, seq, (int32_t) size };
    memcpy(buf, &h, sizeof(h));
    tc_fill_pattern(buf + sizeof(h), size - sizeof(h), seed_of(tc_rank, tag, seq));
}

/* Check a received message against what SENDER sent with TAG and SEQ
 * (SEQ < 0: whatever sequence number it carries); returns that number. */
static int check(const char *phase, const uint8_t *buf, const MPI_Status *st, int sender, int tag,
                 int seq)
{
    head_t h;
    int count = -1;
    char what[160];

    snprintf(what, sizeof(what), "phase %s, message from rank %d with tag %d", phase, sender, tag);
    TC_CHECK_EQ_INT("status MPI_SOURCE", sender, st->MPI_SOURCE);
    TC_CHECK_EQ_INT("status MPI_TAG", tag, st->MPI_TAG);
    MPI_Get_count(st, MPI_BYTE, &count);
    if (count < (int) sizeof(h)) {
        TC_FAIL("%s: only %d bytes", what, count);
        return -1;
    }
    memcpy(&h, buf, sizeof(h));
    TC_CHECK(h.sender == sender && h.tag == tag && (seq < 0 || h.seq == seq),
             "%s: holds the message of rank %d, tag %d, sequence %d (expected sequence %d)", what,
             h.sender, h.tag, h.seq, seq);
    TC_CHECK(count == h.size, "%s: %d bytes received, %d sent", what, count, h.size);
    if (count == h.size) {
        TC_CHECK_PATTERN(what, buf + sizeof(h), (size_t) count - sizeof(h),
                         seed_of(h.sender, h.tag, h.seq));
    }
    return h.seq;
}

/* Senders: every tag REPEATS times, all at once. */
static void send_burst(int root, int tag_base, int repeats)
{
    const int n = NUM_TAGS * repeats;
    MPI_Request *reqs = tc_malloc((size_t) n * sizeof(MPI_Request));
    uint8_t **bufs = tc_malloc((size_t) n * sizeof(uint8_t *));

    for (int r = 0; r < repeats; ++r) {
        for (int t = 0; t < NUM_TAGS; ++t) {
            int i = r * NUM_TAGS + t;
            size_t size = size_of(t, tc_rank);
            bufs[i] = tc_malloc(size);
            fill(bufs[i], size, tag_base + t, r);
            TC_MPI(MPI_Isend(bufs[i], (int) size, MPI_BYTE, root, tag_base + t, MPI_COMM_WORLD,
                             &reqs[i]));
        }
    }
    TC_MPI(MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE));
    for (int i = 0; i < n; ++i) {
        free(bufs[i]);
    }
    free(bufs);
    free(reqs);
}

static void root_phase_a(uint8_t *buf, size_t cap)
{
    MPI_Status st;
    for (int t = NUM_TAGS - 1; t >= 0; --t) {
        for (int s = tc_size - 1; s >= 0; --s) {
            if (s == tc_rank) {
                continue;
            }
            TC_MPI(MPI_Recv(buf, (int) cap, MPI_BYTE, s, TAG_BASE_A + t, MPI_COMM_WORLD, &st));
            check("A", buf, &st, s, TAG_BASE_A + t, 0);
        }
    }
}

static void root_phase_b(uint8_t *buf, size_t cap)
{
    int *seen = tc_malloc((size_t) tc_size * sizeof(int));
    MPI_Status st;

    for (int t = NUM_TAGS - 1; t >= 0; --t) {
        memset(seen, 0, (size_t) tc_size * sizeof(int));
        for (int k = 0; k < tc_size - 1; ++k) {
            TC_MPI(MPI_Recv(buf, (int) cap, MPI_BYTE, MPI_ANY_SOURCE, TAG_BASE_B + t,
                            MPI_COMM_WORLD, &st));
            int s = st.MPI_SOURCE;
            if (s < 0 || s >= tc_size || s == tc_rank) {
                TC_FAIL("phase B, tag %d: MPI_ANY_SOURCE receive reports source %d", t, s);
                continue;
            }
            TC_CHECK(0 == seen[s]++, "phase B, tag %d: rank %d matched twice", t, s);
            check("B", buf, &st, s, TAG_BASE_B + t, 0);
        }
    }
    free(seen);
}

static void root_phase_c(uint8_t *buf, size_t cap)
{
    /* next expected sequence number per (source, tag) */
    int *next = tc_malloc((size_t) tc_size * NUM_TAGS * sizeof(int));
    const int total = (tc_size - 1) * NUM_TAGS * REPEATS_C;
    MPI_Status st;

    memset(next, 0, (size_t) tc_size * NUM_TAGS * sizeof(int));
    for (int k = 0; k < total; ++k) {
        int count = -1;
        TC_MPI(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        MPI_Get_count(&st, MPI_BYTE, &count);
        int s = st.MPI_SOURCE, t = st.MPI_TAG - TAG_BASE_C;
        if (s < 0 || s >= tc_size || s == tc_rank || t < 0 || t >= NUM_TAGS || count < 0
            || (size_t) count > cap) {
            TC_FAIL("phase C: probe found source %d, tag %d, %d bytes: not sent", s, st.MPI_TAG,
                    count);
            MPI_Abort(MPI_COMM_WORLD, 3); /* nothing sensible left to receive */
        }
        /* receive exactly the probed message: same source and tag, and
         * non-overtaking makes it the same one */
        TC_MPI(MPI_Recv(buf, count, MPI_BYTE, s, st.MPI_TAG, MPI_COMM_WORLD, &st));
        int seq = check("C", buf, &st, s, TAG_BASE_C + t, -1);
        TC_CHECK(seq == next[s * NUM_TAGS + t],
                 "phase C: from rank %d with tag %d came sequence %d before %d (overtaken)", s, t,
                 seq, next[s * NUM_TAGS + t]);
        next[s * NUM_TAGS + t] = seq + 1;
    }
    for (int s = 0; s < tc_size; ++s) {
        for (int t = 0; t < NUM_TAGS && s != tc_rank; ++t) {
            TC_CHECK(REPEATS_C == next[s * NUM_TAGS + t],
                     "phase C: from rank %d with tag %d ended at sequence %d", s, t,
                     next[s * NUM_TAGS + t]);
        }
    }
    /* nothing may be left over */
    int flag = 1;
    TC_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
    TC_CHECK(!flag, "phase C: an extra message from rank %d with tag %d", st.MPI_SOURCE,
             st.MPI_TAG);
    free(next);
}

int main(int argc, char **argv)
{
    const size_t cap = 300000;

    tc_init(&argc, &argv, "p2p_matching");
    uint8_t *buf = tc_malloc(cap);

    for (int root = 0; root < tc_size; ++root) {
        if (tc_rank == root) {
            root_phase_a(buf, cap);
        } else {
            send_burst(root, TAG_BASE_A, 1);
        }
        if (tc_rank == root) {
            root_phase_b(buf, cap);
        } else {
            send_burst(root, TAG_BASE_B, 1);
        }
        if (tc_rank == root) {
            root_phase_c(buf, cap);
        } else {
            send_burst(root, TAG_BASE_C, REPEATS_C);
        }
        /* phase C's leftover check must not see the next root's traffic */
        TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
        tc_phase("root %d: phases A, B and C done", root);
    }
    tc_expect_pvars(TC_PVAR_THIS_RANK, "send_count send_bytes recv_count recv_bytes");
    free(buf);
    return tc_finish();
}
