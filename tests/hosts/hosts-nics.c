/*
 * Striping over several NICs: a large-message ping-pong between two ranks on
 * different simulated hosts (contrib/hosts up 2 --nics K), then the
 * per-module counters of our btl/ofi (btl_ofi_nic_*_bytes, one value per
 * module) must show that every module of every rank carried some of the
 * traffic.
 *
 * pml ob1 sends eager fragments round-robin over the BTL modules it has for
 * a peer and splits rendezvous RDMA across them by bandwidth, so with
 * messages of several MiB every module should move bytes.  Data is checked
 * after every round trip so that striping cannot hide corruption.
 *
 * Usage: hosts-nics [MODULES [MESSAGE_BYTES [ROUNDS]]]
 *   MODULES: how many modules each rank must have (default 2)
 */
#include "mpi/common.h"

#define MAX_MODULES BTL_OFI_PVARS_MAX_VALUES

static const char *const nic_counters[] = {"send_bytes", "recv_bytes", "put_bytes", "get_bytes"};
#define NUM_NIC_COUNTERS ((int) (sizeof(nic_counters) / sizeof(nic_counters[0])))

int main(int argc, char **argv)
{
    int want_modules = argc > 1 ? atoi(argv[1]) : 2;
    size_t bytes = argc > 2 ? strtoull(argv[2], NULL, 0) : (size_t) 8 << 20;
    int rounds = argc > 3 ? atoi(argv[3]) : 10;
    int modules = -1, readable[NUM_NIC_COUNTERS];

    tc_init(&argc, &argv, "hosts_nics");
    if (2 > tc_size) {
        TC_FAIL("needs at least 2 ranks");
        return tc_finish();
    }

    /* the nic_ counters hold one value per module */
    for (int c = 0; c < NUM_NIC_COUNTERS; ++c) {
        char full[128];
        int count;
        snprintf(full, sizeof(full), "nic_%s", nic_counters[c]);
        count = btl_ofi_pvars_count(full);
        readable[c] = 0;
        if (count < 1) {
            TC_FAIL("MPI_T performance variable btl_ofi_%s not found: our btl/ofi is not loaded",
                    full);
            continue;
        }
        if (count > MAX_MODULES) {
            TC_FAIL("btl_ofi_%s has %d values, expected 1..%d", full, count, MAX_MODULES);
            continue;
        }
        readable[c] = 1;
        modules = count;
    }

    /* ping-pong between rank 0 and 1, the others pair up likewise */
    uint8_t *buf = tc_malloc(bytes);
    int partner = tc_rank ^ 1;
    if (partner < tc_size) {
        for (int round = 0; round < rounds; ++round) {
            uint32_t seed = (uint32_t) round * 2u;
            if (0 == tc_rank % 2) {
                tc_fill_pattern(buf, bytes, seed);
                TC_MPI(MPI_Send(buf, (int) bytes, MPI_BYTE, partner, round, MPI_COMM_WORLD));
                TC_MPI(MPI_Recv(buf, (int) bytes, MPI_BYTE, partner, round, MPI_COMM_WORLD,
                                MPI_STATUS_IGNORE));
                TC_CHECK_PATTERN("pong", buf, bytes, seed + 1);
            } else {
                TC_MPI(MPI_Recv(buf, (int) bytes, MPI_BYTE, partner, round, MPI_COMM_WORLD,
                                MPI_STATUS_IGNORE));
                TC_CHECK_PATTERN("ping", buf, bytes, seed);
                tc_fill_pattern(buf, bytes, seed + 1);
                TC_MPI(MPI_Send(buf, (int) bytes, MPI_BYTE, partner, round, MPI_COMM_WORLD));
            }
        }
    }
    tc_phase("%d round trips of %zu bytes done", rounds, bytes);

    /* per module: the bytes of each counter, printed rank by rank */
    unsigned long values[NUM_NIC_COUNTERS][MAX_MODULES];
    memset(values, 0, sizeof(values));
    for (int c = 0; c < NUM_NIC_COUNTERS; ++c) {
        char full[128];
        snprintf(full, sizeof(full), "nic_%s", nic_counters[c]);
        if (readable[c] && 0 > btl_ofi_pvars_read_each(full, values[c], MAX_MODULES)) {
            TC_FAIL("MPI_T performance variable btl_ofi_%s could not be read", full);
        }
    }
    for (int r = 0; r < tc_size; ++r) {
        if (r == tc_rank) {
            char host[64] = "?";
            gethostname(host, sizeof(host));
            for (int m = 0; m < modules; ++m) {
                unsigned long total = 0;
                printf("[hosts_nics] rank %d on %s module %d:", tc_rank, host, m);
                for (int c = 0; c < NUM_NIC_COUNTERS; ++c) {
                    printf(" %s=%lu", nic_counters[c], values[c][m]);
                    total += values[c][m];
                }
                printf("\n");
                if (partner < tc_size) {
                    TC_CHECK(total > 0,
                             "module %d of %d carried no bytes: traffic is not striped over "
                             "the NICs",
                             m, modules);
                }
            }
            fflush(stdout);
        }
        TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    TC_CHECK(modules >= want_modules, "%d module(s), expected at least %d (one per NIC)", modules,
             want_modules);

    free(buf);
    tc_expect_pvars(TC_PVAR_THIS_RANK, "send_bytes recv_bytes");
    return tc_finish();
}
