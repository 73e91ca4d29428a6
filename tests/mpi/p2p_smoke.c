/*
 * A short two-sided check for jobs that run with unusual MCA parameters
 * (tests/params): a ring exchange at an empty, an eager, a rendezvous and
 * an RDMA-sized message, verified byte for byte, then a statement about
 * who carried it.
 *
 * Usage: p2p_smoke [ofi|none|any]
 *   ofi   (default) btl/ofi must have sent and received on every rank
 *   none  btl/ofi must have carried nothing (it was disqualified and other
 *         BTLs took over); its counters may also be missing altogether
 *   any   only the data is checked
 */
#include "common.h"

static const size_t sizes[] = { 0, 100, 20000, 300000 };
#define NUM_SIZES (sizeof(sizes) / sizeof(sizes[0]))
#define TAG_SMOKE 41

static void ring(size_t size, uint8_t *sendbuf, uint8_t *recvbuf)
{
    const int right = (tc_rank + 1) % tc_size;
    const int left = (tc_rank + tc_size - 1) % tc_size;
    MPI_Request reqs[2];
    MPI_Status st[2];
    char what[96];
    int count = -1;

    tc_fill_pattern(sendbuf, size, (uint32_t) tc_rank * 977u + (uint32_t) size);
    memset(recvbuf, 0, size + 1);
    TC_MPI(MPI_Irecv(recvbuf, (int) size + 1, MPI_BYTE, left, TAG_SMOKE, MPI_COMM_WORLD, &reqs[0]));
    TC_MPI(MPI_Isend(sendbuf, (int) size, MPI_BYTE, right, TAG_SMOKE, MPI_COMM_WORLD, &reqs[1]));
    TC_MPI(MPI_Waitall(2, reqs, st));
    MPI_Get_count(&st[0], MPI_BYTE, &count);
    snprintf(what, sizeof(what), "ring message of %zu bytes from rank %d", size, left);
    TC_CHECK(count == (int) size, "%s: %d bytes arrived", what, count);
    TC_CHECK_PATTERN(what, recvbuf, size, (uint32_t) left * 977u + (uint32_t) size);
}

int main(int argc, char **argv)
{
    const char *expect = "ofi";

    tc_init(&argc, &argv, "p2p_smoke");
    if (argc > 1) {
        expect = argv[1];
    }
    uint8_t *sendbuf = tc_malloc(sizes[NUM_SIZES - 1] + 1);
    uint8_t *recvbuf = tc_malloc(sizes[NUM_SIZES - 1] + 1);
    for (size_t s = 0; s < NUM_SIZES; ++s) {
        ring(sizes[s], sendbuf, recvbuf);
    }

    if (0 == strcmp(expect, "ofi")) {
        tc_expect_pvars(TC_PVAR_THIS_RANK, "send_count recv_count");
    } else if (0 == strcmp(expect, "none")) {
        unsigned long sent = 0, received = 0, all = 0, mine;
        int found = 0 == btl_ofi_pvars_read("send_count", &sent)
                    && 0 == btl_ofi_pvars_read("recv_count", &received);
        mine = sent + received;
        TC_MPI(MPI_Allreduce(&mine, &all, 1, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD));
        tc_phase("btl_ofi two-sided messages summed over ranks: %lu%s", all,
                 found ? "" : " (counters not registered)");
        TC_CHECK(0 == mine, "btl/ofi carried %lu messages although it should be out of the job",
                 mine);
    } else if (0 != strcmp(expect, "any")) {
        TC_FAIL("unknown expectation %s (ofi, none or any)", expect);
    }
    free(recvbuf);
    free(sendbuf);
    return tc_finish();
}
