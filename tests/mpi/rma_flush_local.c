/*
 * Put and get loops that reuse their origin buffer right after
 * MPI_Win_flush_local, the way halo exchanges and pipelined copies use
 * passive target: one MPI_Win_lock_all for the whole loop, a contiguous or
 * strided (vector) transfer to the right-hand neighbour per iteration, then
 * flush_local, then the origin buffer is overwritten for the next
 * iteration.  Over MPI_Win_create and dynamic windows.
 *
 * Checks:
 *   put  every iteration writes its own slot of the neighbour's window with
 *        pattern (rank, iteration); after the loop, a flush and a barrier,
 *        each rank finds in its window exactly what its left-hand
 *        neighbour put, slot by slot, and the gaps of strided slots still
 *        hold the background byte.  A flush_local that returned before the
 *        data left the buffer shows as the scribble that followed it.
 *   get  every iteration reads a slot of the neighbour's window (written by
 *        the neighbour itself before a barrier) into a buffer that was
 *        scribbled first; after flush_local the buffer must hold the slot.
 *
 * Options: -i iterations (default 200), -s slot bytes (default 1024).
 */
#include "common.h"

#define BACKGROUND 0x5A
#define SCRIBBLE   0xC3
#define STRIDE_GAP 16 /* bytes skipped after every block of a strided slot */
#define BLOCK      32 /* bytes per block of a strided slot */

enum shape { SHAPE_CONTIG, SHAPE_STRIDED, NUM_SHAPES };
static const char *const shape_names[NUM_SHAPES] = { "contiguous", "strided" };

typedef struct {
    tc_window_t w;
    enum shape shape;
    int iterations;
    size_t payload;   /* bytes carried per transfer */
    size_t slot_span; /* bytes of window one slot covers */
    MPI_Datatype target_type;
} loop_t;

static uint32_t seed_of(int rank, int iteration)
{
    return (uint32_t) rank * 100003u + (uint32_t) iteration;
}

/* The window byte that payload byte I of a slot lands on. */
static size_t window_offset(const loop_t *lp, size_t i)
{
    if (SHAPE_CONTIG == lp->shape) {
        return i;
    }
    return (i / BLOCK) * (BLOCK + STRIDE_GAP) + i % BLOCK;
}

static void setup_shape(loop_t *lp, size_t slot_bytes)
{
    lp->payload = slot_bytes;
    if (SHAPE_CONTIG == lp->shape) {
        lp->slot_span = slot_bytes;
        TC_MPI(MPI_Type_contiguous((int) slot_bytes, MPI_BYTE, &lp->target_type));
    } else {
        int blocks = (int) (slot_bytes / BLOCK);
        lp->slot_span = (size_t) blocks * (BLOCK + STRIDE_GAP) - STRIDE_GAP;
        TC_MPI(MPI_Type_vector(blocks, BLOCK, BLOCK + STRIDE_GAP, MPI_BYTE, &lp->target_type));
    }
    TC_MPI(MPI_Type_commit(&lp->target_type));
}

static void put_loop(loop_t *lp, uint8_t *buf)
{
    int right = (tc_rank + 1) % tc_size;

    TC_MPI(MPI_Win_lock_all(0, lp->w.win));
    for (int it = 0; it < lp->iterations; ++it) {
        tc_fill_pattern(buf, lp->payload, seed_of(tc_rank, it));
        TC_MPI(MPI_Put(buf, (int) lp->payload, MPI_BYTE, right,
                       tc_disp(&lp->w, right, (size_t) it * lp->slot_span), 1, lp->target_type,
                       lp->w.win));
        TC_MPI(MPI_Win_flush_local(right, lp->w.win));
        memset(buf, SCRIBBLE, lp->payload);
    }
    TC_MPI(MPI_Win_flush(right, lp->w.win));
    TC_MPI(MPI_Win_unlock_all(lp->w.win));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* What my left-hand neighbour's put loop left in my window. */
static void check_put_slots(loop_t *lp, uint8_t *expect)
{
    int left = (tc_rank + tc_size - 1) % tc_size;
    size_t span = (size_t) lp->iterations * lp->slot_span;

    memset(expect, BACKGROUND, span);
    for (int it = 0; it < lp->iterations; ++it) {
        uint32_t seed = seed_of(left, it);
        for (size_t i = 0; i < lp->payload; ++i) {
            expect[(size_t) it * lp->slot_span + window_offset(lp, i)] = tc_pattern_byte(seed, i);
        }
    }
    for (size_t off = 0; off < span; ++off) {
        if (expect[off] != lp->w.base[off]) {
            TC_FAIL("%s put: window byte %zu (slot %zu) expected 0x%02x got 0x%02x",
                    shape_names[lp->shape], off, off / lp->slot_span, expect[off], lp->w.base[off]);
            break;
        }
    }
}

/* Fill my own slots with known data, then read my neighbour's back. */
static void get_loop(loop_t *lp, uint8_t *buf)
{
    int right = (tc_rank + 1) % tc_size;

    for (int it = 0; it < lp->iterations; ++it) {
        uint32_t seed = seed_of(tc_rank, it) ^ 0x5eedu;
        for (size_t i = 0; i < lp->payload; ++i) {
            lp->w.base[(size_t) it * lp->slot_span + window_offset(lp, i)] =
                tc_pattern_byte(seed, i);
        }
    }
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    TC_MPI(MPI_Win_lock_all(0, lp->w.win));
    for (int it = 0; it < lp->iterations; ++it) {
        memset(buf, SCRIBBLE, lp->payload);
        TC_MPI(MPI_Get(buf, (int) lp->payload, MPI_BYTE, right,
                       tc_disp(&lp->w, right, (size_t) it * lp->slot_span), 1, lp->target_type,
                       lp->w.win));
        TC_MPI(MPI_Win_flush_local(right, lp->w.win));
        if (TC_CHECK_PATTERN(shape_names[lp->shape], buf, lp->payload,
                             seed_of(right, it) ^ 0x5eedu)) {
            TC_FAIL("%s get: iteration %d from rank %d", shape_names[lp->shape], it, right);
            break;
        }
    }
    TC_MPI(MPI_Win_unlock_all(lp->w.win));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

static void run_loops(enum tc_flavour flavour, enum shape shape, int iterations, size_t slot_bytes)
{
    loop_t lp = { .shape = shape, .iterations = iterations };
    uint8_t *buf, *expect;

    setup_shape(&lp, slot_bytes);
    tc_window_open(&lp.w, flavour, (size_t) iterations * lp.slot_span);
    memset(lp.w.base, BACKGROUND, lp.w.bytes);
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    buf = tc_malloc(lp.payload);
    expect = tc_malloc(lp.w.bytes);

    tc_phase("%s window, %s, %d iterations of %zu bytes", tc_flavour_names[flavour],
             shape_names[shape], iterations, slot_bytes);
    put_loop(&lp, buf);
    check_put_slots(&lp, expect);
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    get_loop(&lp, buf);

    free(expect);
    free(buf);
    tc_window_close(&lp.w);
    TC_MPI(MPI_Type_free(&lp.target_type));
}

int main(int argc, char **argv)
{
    int iterations = 200, opt;
    long slot_bytes = 1024;

    tc_init(&argc, &argv, "rma_flush_local");
    while ((opt = getopt(argc, argv, "i:s:")) != -1) {
        switch (opt) {
        case 'i':
            iterations = atoi(optarg);
            break;
        case 's':
            slot_bytes = atol(optarg);
            break;
        default:
            TC_FAIL("usage: rma_flush_local [-i iterations] [-s slot-bytes]");
        }
    }
    if (iterations < 1 || slot_bytes < BLOCK || slot_bytes % BLOCK || slot_bytes > (1L << 20)) {
        TC_FAIL("-i takes a positive count and -s a multiple of %d up to 1 MiB", BLOCK);
        iterations = 200;
        slot_bytes = 1024;
    }
    for (int f = TC_WIN_CREATE; f <= TC_WIN_DYNAMIC; ++f) {
        for (int s = 0; s < NUM_SHAPES; ++s) {
            run_loops((enum tc_flavour) f, (enum shape) s, iterations, (size_t) slot_bytes);
        }
    }
    tc_expect_pvars(TC_PVAR_SUM, "put_count get_count");
    return tc_finish();
}
