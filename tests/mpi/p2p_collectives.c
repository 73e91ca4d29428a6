/*
 * Collectives over our component: MPI_Bcast, MPI_Allreduce, MPI_Alltoall
 * and MPI_Barrier, at message sizes that take every ob1 protocol on the way
 * (8 bytes: eager; 64 KiB: rendezvous; 1 MiB and 8 MiB: RDMA, pipelined).
 * The collective components (tuned, han, basic...) build these from
 * point-to-point messages, so each one has to move bytes through ob1 and
 * thus through us; the test checks that for every collective the two-sided
 * counters of btl/ofi grew somewhere in the job.
 *
 * Results are integers, so a reduction is checked exactly: element K of
 * rank R's input is a function of both, and the sum over ranks has a closed
 * form.  The barrier is checked by time: ranks enter it staggered, and no
 * rank may leave before the last one entered.  This uses CLOCK_REALTIME,
 * which all processes of one host share; the test runs on one host.
 */
#include "common.h"

#include <time.h>
#include <unistd.h>

static const size_t sizes[] = { 8, 64 * 1024, 1u << 20, 8u << 20 };
#define NUM_SIZES (sizeof(sizes) / sizeof(sizes[0]))

/* This rank's btl/ofi send + receive count so far; 0 when not ours. */
static unsigned long two_sided_events(void)
{
    unsigned long sent = 0, received = 0;
    (void) btl_ofi_pvars_read("send_count", &sent);
    (void) btl_ofi_pvars_read("recv_count", &received);
    return sent + received;
}

/* Collective: fail unless some rank's counters moved between BEFORE and
 * AFTER. */
static void expect_traffic_between(const char *what, unsigned long before, unsigned long after)
{
    unsigned long mine = after - before, all = 0;

    if (tc_stock_run()) {
        return; /* not ours: tc_expect_pvars checks our counters are absent */
    }
    TC_MPI(MPI_Allreduce(&mine, &all, 1, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD));
    TC_CHECK(all > 0, "%s moved no message through btl/ofi on any rank", what);
}

static void expect_traffic(const char *what, unsigned long before)
{
    expect_traffic_between(what, before, two_sided_events());
}

static void test_bcast(size_t bytes, int root)
{
    uint8_t *buf = tc_malloc(bytes);
    uint32_t seed = 0xB0000000u + (uint32_t) bytes + (uint32_t) root;
    unsigned long before = two_sided_events();
    char what[96];

    if (tc_rank == root) {
        tc_fill_pattern(buf, bytes, seed);
    } else {
        memset(buf, 0, bytes);
    }
    TC_MPI(MPI_Bcast(buf, (int) bytes, MPI_BYTE, root, MPI_COMM_WORLD));
    snprintf(what, sizeof(what), "MPI_Bcast of %zu bytes from rank %d", bytes, root);
    TC_CHECK_PATTERN(what, buf, bytes, seed);
    expect_traffic(what, before);
    free(buf);
}

static int64_t input_of(int rank, size_t k)
{
    /* large and signed, so that carries and signs matter */
    return ((int64_t) (k * 2654435761u) << 8) * ((rank % 2) ? -1 : 1) + (int64_t) rank * 1000003;
}

static void test_allreduce(size_t bytes)
{
    size_t n = bytes / sizeof(int64_t);
    int64_t *in = tc_malloc(n * sizeof(int64_t));
    int64_t *out = tc_malloc(n * sizeof(int64_t));
    int64_t *maxed = tc_malloc(n * sizeof(int64_t));
    unsigned long before = two_sided_events();
    size_t wrong = 0, first = 0;
    char what[96];

    for (size_t k = 0; k < n; ++k) {
        in[k] = input_of(tc_rank, k);
    }
    TC_MPI(MPI_Allreduce(in, out, (int) n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
    TC_MPI(MPI_Allreduce(in, maxed, (int) n, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD));
    for (size_t k = 0; k < n; ++k) {
        /* wrap-around sum, as the MPI implementation computes it */
        uint64_t sum = 0;
        int64_t max = INT64_MIN;
        for (int r = 0; r < tc_size; ++r) {
            sum += (uint64_t) input_of(r, k);
            max = input_of(r, k) > max ? input_of(r, k) : max;
        }
        if ((int64_t) sum != out[k] || max != maxed[k]) {
            if (0 == wrong++) {
                first = k;
            }
        }
    }
    snprintf(what, sizeof(what), "MPI_Allreduce of %zu int64", n);
    TC_CHECK(0 == wrong, "%s: %zu elements wrong, first %zu: sum %" PRId64 " max %" PRId64, what,
             wrong, first, out[first], maxed[first]);
    expect_traffic(what, before);
    free(maxed);
    free(out);
    free(in);
}

/* BYTES is what each rank sends to each peer */
static void test_alltoall(size_t bytes)
{
    uint8_t *sendbuf = tc_malloc(bytes * (size_t) tc_size);
    uint8_t *recvbuf = tc_malloc(bytes * (size_t) tc_size);
    unsigned long before = two_sided_events();
    char what[128];

    for (int to = 0; to < tc_size; ++to) {
        tc_fill_pattern(sendbuf + (size_t) to * bytes, bytes,
                        (uint32_t) (tc_rank * 131 + to) ^ (uint32_t) bytes);
    }
    memset(recvbuf, 0, bytes * (size_t) tc_size);
    TC_MPI(MPI_Alltoall(sendbuf, (int) bytes, MPI_BYTE, recvbuf, (int) bytes, MPI_BYTE,
                        MPI_COMM_WORLD));
    for (int from = 0; from < tc_size; ++from) {
        snprintf(what, sizeof(what), "MPI_Alltoall of %zu bytes per pair: block from rank %d",
                 bytes, from);
        TC_CHECK_PATTERN(what, recvbuf + (size_t) from * bytes, bytes,
                         (uint32_t) (from * 131 + tc_rank) ^ (uint32_t) bytes);
    }
    snprintf(what, sizeof(what), "MPI_Alltoall of %zu bytes per pair", bytes);
    expect_traffic(what, before);
    free(recvbuf);
    free(sendbuf);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

static void test_barrier(int round)
{
    /* a different rank enters last in every round */
    int late = round % tc_size;
    double entered, left, last_entry = 0.0;
    unsigned long before = two_sided_events(), after;

    if (tc_rank == late) {
        usleep(50 * 1000);
    }
    entered = now();
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    left = now();
    after = two_sided_events();
    TC_MPI(MPI_Allreduce(&entered, &last_entry, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    TC_CHECK(left >= last_entry, "MPI_Barrier round %d: left %.6f s before rank %d entered", round,
             last_entry - left, late);
    expect_traffic_between("MPI_Barrier", before, after);
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "p2p_collectives");

    for (size_t s = 0; s < NUM_SIZES; ++s) {
        test_bcast(sizes[s], (int) (s % (size_t) tc_size));
        test_allreduce(sizes[s]);
        /* per pair, so the 8 MiB step moves 8 MiB between every two ranks */
        test_alltoall(sizes[s]);
        test_barrier((int) s);
        tc_phase("%zu bytes: bcast, allreduce, alltoall and barrier verified", sizes[s]);
    }
    for (int round = 0; round < tc_size; ++round) {
        test_barrier(round);
    }
    tc_expect_pvars(TC_PVAR_THIS_RANK, "send_count send_bytes recv_count recv_bytes");
    return tc_finish();
}
