/*
 * One-sided smoke test for the in-tree build lane (contrib/intree).
 *
 * Every rank puts a rank-specific byte pattern into its right neighbour's
 * MPI_Win_create window (fence epochs, several sizes and unaligned offsets),
 * then checks the bytes that landed in its own window, including the guard
 * bytes that nobody wrote.  Afterwards it reads our component's MPI_T counter
 * btl_ofi_put_count (tests/common/btl_ofi_pvars.c, built in by contrib/intree):
 * it must exist and be non-zero, so that a run that fell back to another BTL
 * (or to upstream's btl/ofi) fails.
 *
 * It also reports which mca_btl_ofi.so this process mapped and how many
 * distinct libopen-pal files are mapped, so the driver can check that the
 * DSO from the in-tree build ran against the one installed libopen-pal.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btl_ofi_pvars.h"

#define WINDOW_BYTES (256 * 1024)
#define GUARD_BYTE 0x5a

struct put_case {
    size_t offset;
    size_t length;
};

/* Sizes straddle the usual eager/inline and registration thresholds, and the
 * odd offsets catch address arithmetic that assumes alignment. */
static const struct put_case put_cases[] = {
    {0, 1}, {8, 8}, {19, 13}, {64, 4096}, {4163, 4097}, {16384, 65536}, {90001, 150000},
};
#define N_CASES (sizeof(put_cases) / sizeof(put_cases[0]))

static unsigned char pattern_byte(int origin_rank, size_t offset)
{
    /* Depends on the origin so bytes from the wrong peer are caught too. */
    return (unsigned char) ((offset * 31u + (size_t) origin_rank * 101u + 7u) & 0xff);
}

static int offset_is_written(size_t offset)
{
    for (size_t i = 0; i < N_CASES; i++) {
        if (offset >= put_cases[i].offset && offset < put_cases[i].offset + put_cases[i].length) {
            return 1;
        }
    }
    return 0;
}

/* Looks at our own mappings: the path of the btl/ofi DSO that was loaded and
 * the number of distinct libopen-pal files (more than one means the DSO
 * dragged in its build tree's copy). */
static void inspect_mappings(char *btl_path, size_t btl_path_len, int *n_open_pal)
{
    char seen_pal[4][512];
    *n_open_pal = 0;
    btl_path[0] = '\0';
    FILE *maps = fopen("/proc/self/maps", "r");
    if (NULL == maps) {
        return;
    }
    char line[1024];
    while (fgets(line, sizeof(line), maps)) {
        char *path = strchr(line, '/');
        if (NULL == path) {
            continue;
        }
        path[strcspn(path, "\n")] = '\0';
        if (strstr(path, "/mca_btl_ofi.so")) {
            snprintf(btl_path, btl_path_len, "%s", path);
        } else if (strstr(path, "/libopen-pal.so")) {
            int known = 0;
            for (int i = 0; i < *n_open_pal; i++) {
                known |= (0 == strcmp(seen_pal[i], path));
            }
            if (!known && *n_open_pal < 4) {
                snprintf(seen_pal[(*n_open_pal)++], sizeof(seen_pal[0]), "%s", path);
            }
        }
    }
    fclose(maps);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    /* the counter counts from here (a handle reads what was counted since it
     * was allocated): before any traffic */
    btl_ofi_pvars_open();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        if (0 == rank) {
            fprintf(stderr, "intree-test: needs at least 2 ranks\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    unsigned char *window_buf = malloc(WINDOW_BYTES);
    unsigned char *origin_buf = malloc(WINDOW_BYTES);
    if (NULL == window_buf || NULL == origin_buf) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(window_buf, GUARD_BYTE, WINDOW_BYTES);
    for (size_t i = 0; i < WINDOW_BYTES; i++) {
        origin_buf[i] = pattern_byte(rank, i);
    }

    /* MPI_Win_create memory is not shared-memory backed, so osc/rdma has to
     * go through the BTL even between ranks on one node. */
    MPI_Win win;
    MPI_Win_create(window_buf, WINDOW_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);

    int right = (rank + 1) % size;
    int left = (rank + size - 1) % size;
    MPI_Win_fence(0, win);
    for (size_t i = 0; i < N_CASES; i++) {
        const struct put_case *c = &put_cases[i];
        MPI_Put(origin_buf + c->offset, (int) c->length, MPI_BYTE, right, (MPI_Aint) c->offset,
                (int) c->length, MPI_BYTE, win);
    }
    MPI_Win_fence(0, win);

    size_t bad = 0, first_bad = 0, verified = 0;
    for (size_t off = 0; off < WINDOW_BYTES; off++) {
        unsigned char want = offset_is_written(off) ? pattern_byte(left, off) : GUARD_BYTE;
        if (window_buf[off] != want) {
            if (0 == bad++) {
                first_bad = off;
            }
        }
        verified += offset_is_written(off);
    }
    if (bad) {
        fprintf(stderr, "intree-test: rank %d: %zu wrong bytes, first at offset %zu "
                        "(got 0x%02x)\n", rank, bad, first_bad, window_buf[first_bad]);
    }
    unsigned long puts = 0;
    int found = 0 == btl_ofi_pvars_read("put_count", &puts);
    btl_ofi_pvars_close();
    MPI_Win_free(&win);

    if (!found) {
        fprintf(stderr, "intree-test: rank %d: pvar btl_ofi_put_count not found: "
                        "our btl/ofi is not the one loaded\n", rank);
    } else if (0 == puts) {
        fprintf(stderr, "intree-test: rank %d: btl_ofi_put_count is 0: "
                        "the puts did not go through our btl/ofi\n", rank);
    }

    char btl_path[512];
    int n_open_pal;
    inspect_mappings(btl_path, sizeof(btl_path), &n_open_pal);

    int local_fail = (bad != 0) || !found || 0 == puts || 1 != n_open_pal;
    int any_fail;
    unsigned long min_puts, max_puts;
    MPI_Allreduce(&local_fail, &any_fail, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&puts, &min_puts, 1, MPI_UNSIGNED_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&puts, &max_puts, 1, MPI_UNSIGNED_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (0 == rank) {
        printf("intree-test: btl dso: %s\n", btl_path[0] ? btl_path : "(not mapped)");
        printf("intree-test: libopen-pal files mapped: %d\n", n_open_pal);
        printf("intree-test: %d ranks, %zu bytes put and verified per rank, "
               "btl_ofi_put_count min %lu max %lu\n", size, verified, min_puts, max_puts);
        printf("intree-test: %s\n", any_fail ? "FAIL" : "OK");
    }

    free(origin_buf);
    free(window_buf);
    MPI_Finalize();
    return any_fail ? 1 : 0;
}
