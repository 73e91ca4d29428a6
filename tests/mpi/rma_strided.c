/*
 * MPI_Put and MPI_Get with non-contiguous datatypes on either side (vector,
 * indexed, hvector with unaligned byte strides), to a peer and to self, over
 * all three window flavours, in fence epochs.
 *
 * Each datatype is built twice: once with the MPI constructor under test and
 * once as our own list of byte segments.  The expected image of the target
 * (or of the origin buffer for a get) is computed from the segment lists,
 * including every byte that must stay untouched, and compared whole.
 */
#include "common.h"

#define WIN_BYTES  (1u << 20)
#define BACKGROUND 0x5A

/* A datatype and the bytes it covers, in type-map order. */
typedef struct {
    const char *name;
    MPI_Datatype type;
    int nseg;
    size_t *off; /* byte offset of each segment */
    size_t *len; /* byte length of each segment */
    size_t span; /* one past the last byte covered */
} layout_t;

static void layout_alloc(layout_t *l, const char *name, int nseg)
{
    l->name = name;
    l->nseg = nseg;
    l->off = tc_malloc((size_t) nseg * sizeof(size_t));
    l->len = tc_malloc((size_t) nseg * sizeof(size_t));
    l->span = 0;
}

static void layout_commit(layout_t *l)
{
    for (int i = 0; i < l->nseg; ++i) {
        if (l->off[i] + l->len[i] > l->span) {
            l->span = l->off[i] + l->len[i];
        }
    }
    TC_MPI(MPI_Type_commit(&l->type));
}

static void layout_free(layout_t *l)
{
    MPI_Type_free(&l->type);
    free(l->off);
    free(l->len);
}

static size_t layout_bytes(const layout_t *l)
{
    size_t total = 0;
    for (int i = 0; i < l->nseg; ++i) {
        total += l->len[i];
    }
    return total;
}

static void make_contiguous(layout_t *l, const char *name, MPI_Datatype base, size_t base_size,
                            int count)
{
    layout_alloc(l, name, 1);
    l->off[0] = 0;
    l->len[0] = (size_t) count * base_size;
    TC_MPI(MPI_Type_contiguous(count, base, &l->type));
    layout_commit(l);
}

static void make_vector(layout_t *l, const char *name, MPI_Datatype base, size_t base_size,
                        int count, int blocklen, int stride)
{
    layout_alloc(l, name, count);
    for (int i = 0; i < count; ++i) {
        l->off[i] = (size_t) i * (size_t) stride * base_size;
        l->len[i] = (size_t) blocklen * base_size;
    }
    TC_MPI(MPI_Type_vector(count, blocklen, stride, base, &l->type));
    layout_commit(l);
}

/* stride in bytes, over MPI_BYTE, so blocks start at odd addresses */
static void make_hvector_bytes(layout_t *l, const char *name, int count, int blocklen, int stride)
{
    layout_alloc(l, name, count);
    for (int i = 0; i < count; ++i) {
        l->off[i] = (size_t) i * (size_t) stride;
        l->len[i] = (size_t) blocklen;
    }
    TC_MPI(MPI_Type_create_hvector(count, blocklen, stride, MPI_BYTE, &l->type));
    layout_commit(l);
}

/* Irregular blocks (lengths 1..7, gaps 0..5 elements) holding TOTAL elements;
 * displacements are deliberately not monotonic: every 5th block goes before
 * its predecessor, which a transport that assumes sorted blocks gets wrong. */
static void make_indexed(layout_t *l, const char *name, MPI_Datatype base, size_t base_size,
                         int total)
{
    int n = 0, placed = 0, cursor = 0;
    int *blens = tc_malloc((size_t) total * sizeof(int));
    int *disps = tc_malloc((size_t) total * sizeof(int));

    while (placed < total) {
        int len = 1 + (n * 5) % 7;
        if (len > total - placed) {
            len = total - placed;
        }
        blens[n] = len;
        disps[n] = cursor;
        cursor += len + (n * 3) % 6;
        placed += len;
        ++n;
    }
    /* swap neighbouring pairs: blocks stay disjoint, order is no longer sorted */
    for (int i = 4; i < n; i += 5) {
        int bl = blens[i], d = disps[i];
        blens[i] = blens[i - 1];
        disps[i] = disps[i - 1];
        blens[i - 1] = bl;
        disps[i - 1] = d;
    }
    layout_alloc(l, name, n);
    for (int i = 0; i < n; ++i) {
        l->off[i] = (size_t) disps[i] * base_size;
        l->len[i] = (size_t) blens[i] * base_size;
    }
    TC_MPI(MPI_Type_indexed(n, blens, disps, base, &l->type));
    layout_commit(l);
    free(blens);
    free(disps);
}

/* Copy the bytes SRC covers in SRC_L, in type-map order, to the places
 * DST_L covers in DST: what a transfer from SRC_L to DST_L must do. */
static void apply_layouts(uint8_t *dst, const layout_t *dst_l, const uint8_t *src,
                          const layout_t *src_l)
{
    int si = 0, di = 0;
    size_t sdone = 0, ddone = 0;

    while (si < src_l->nseg && di < dst_l->nseg) {
        size_t sleft = src_l->len[si] - sdone, dleft = dst_l->len[di] - ddone;
        size_t n = sleft < dleft ? sleft : dleft;
        memcpy(dst + dst_l->off[di] + ddone, src + src_l->off[si] + sdone, n);
        sdone += n;
        ddone += n;
        if (sdone == src_l->len[si]) {
            ++si;
            sdone = 0;
        }
        if (ddone == dst_l->len[di]) {
            ++di;
            ddone = 0;
        }
    }
}

static void compare_image(const char *what, const uint8_t *got, const uint8_t *expected, size_t len)
{
    for (size_t i = 0; i < len; ++i) {
        if (got[i] != expected[i]) {
            TC_FAIL("%s: byte offset %zu: expected 0x%02x got 0x%02x", what, i, expected[i],
                    got[i]);
            return;
        }
    }
}

typedef struct {
    const layout_t *origin, *target;
    size_t target_offset; /* byte offset of the target type in the window */
    int count;            /* how many of each type */
} xfer_case_t;

/* One put of C from this rank to TARGET, then one get back of the same
 * layout pair from TARGET; both verified byte for byte. */
static void run_case(tc_window_t *w, const xfer_case_t *c, int target, uint8_t *buf,
                     uint8_t *expected)
{
    const int source = (tc_rank + tc_size - (target - tc_rank + tc_size) % tc_size) % tc_size;
    const uint32_t seed = (uint32_t) tc_rank * 7919u + (uint32_t) c->target_offset;
    const uint32_t source_seed = (uint32_t) source * 7919u + (uint32_t) c->target_offset;
    const size_t origin_span = c->origin->span * (size_t) c->count;
    const size_t target_span = c->target_offset + c->target->span * (size_t) c->count;
    char what[256];

    if (1 != c->count) {
        /* the cases keep count 1; types repeated by count would need
         * extent-aware layouts here */
        TC_FAIL("count %d not supported by this test", c->count);
        return;
    }

    /* put: the window is background, BUF holds the pattern */
    memset(w->base, BACKGROUND, target_span);
    tc_fill_pattern(buf, origin_span, seed);
    TC_MPI(MPI_Win_fence(0, w->win));
    TC_MPI(MPI_Put(buf, c->count, c->origin->type, target, tc_disp(w, target, c->target_offset),
                   c->count, c->target->type, w->win));
    TC_MPI(MPI_Win_fence(0, w->win));

    /* what SOURCE (the rank that put to us) did with its own pattern */
    uint8_t *source_buf = tc_malloc(origin_span);
    tc_fill_pattern(source_buf, origin_span, source_seed);
    memset(expected, BACKGROUND, target_span);
    apply_layouts(expected + c->target_offset, c->target, source_buf, c->origin);
    free(source_buf);
    snprintf(what, sizeof(what), "%s window: put %s -> %s at offset %zu from rank %d",
             tc_flavour_names[w->flavour], c->origin->name, c->target->name, c->target_offset,
             source);
    compare_image(what, w->base, expected, target_span);

    /* get: the window holds this rank's pattern, BUF is background */
    TC_MPI(MPI_Win_fence(0, w->win));
    tc_fill_pattern(w->base, target_span, seed ^ 0xFFFFu);
    memset(buf, BACKGROUND, origin_span);
    TC_MPI(MPI_Win_fence(0, w->win));
    TC_MPI(MPI_Get(buf, c->count, c->origin->type, target, tc_disp(w, target, c->target_offset),
                   c->count, c->target->type, w->win));
    TC_MPI(MPI_Win_fence(0, w->win));

    uint8_t *target_image = tc_malloc(target_span);
    tc_fill_pattern(target_image, target_span,
                    ((uint32_t) target * 7919u + (uint32_t) c->target_offset) ^ 0xFFFFu);
    memset(expected, BACKGROUND, origin_span);
    apply_layouts(expected, c->origin, target_image + c->target_offset, c->target);
    free(target_image);
    snprintf(what, sizeof(what), "%s window: get %s <- %s at offset %zu from rank %d",
             tc_flavour_names[w->flavour], c->origin->name, c->target->name, c->target_offset,
             target);
    compare_image(what, buf, expected, origin_span);
}

int main(int argc, char **argv)
{
    layout_t vec, idx, contig, bcontig, hv_a, hv_b, dvec, dcontig;

    tc_init(&argc, &argv, "rma_strided");
    make_vector(&vec, "vector(250x3 int, stride 7)", MPI_INT, sizeof(int), 250, 3, 7);
    make_indexed(&idx, "indexed(750 int)", MPI_INT, sizeof(int), 750);
    make_contiguous(&contig, "contiguous(750 int)", MPI_INT, sizeof(int), 750);
    make_contiguous(&bcontig, "contiguous(1000 bytes)", MPI_BYTE, 1, 1000);
    make_hvector_bytes(&hv_a, "hvector(200x5 bytes, stride 13)", 200, 5, 13);
    make_hvector_bytes(&hv_b, "hvector(100x10 bytes, stride 17)", 100, 10, 17);
    make_vector(&dvec, "vector(2048x1 double, stride 2)", MPI_DOUBLE, sizeof(double), 2048, 1, 2);
    make_contiguous(&dcontig, "contiguous(2048 double)", MPI_DOUBLE, sizeof(double), 2048);

    const xfer_case_t cases[] = {
        { &vec, &idx, 0, 1 },      { &contig, &vec, 8, 1 },   { &idx, &contig, 4, 1 },
        { &hv_a, &hv_b, 3, 1 },    { &bcontig, &hv_a, 1, 1 }, { &dvec, &dcontig, 0, 1 },
        { &dcontig, &dvec, 8, 1 },
    };
    const size_t ncases = sizeof(cases) / sizeof(cases[0]);
    size_t max_span = 0;
    for (size_t i = 0; i < ncases; ++i) {
        size_t spans[2] = { cases[i].origin->span, cases[i].target_offset + cases[i].target->span };
        for (int j = 0; j < 2; ++j) {
            max_span = spans[j] > max_span ? spans[j] : max_span;
        }
        TC_CHECK(layout_bytes(cases[i].origin) == layout_bytes(cases[i].target),
                 "case %zu: %s and %s differ in size", i, cases[i].origin->name,
                 cases[i].target->name);
    }
    TC_CHECK(max_span <= WIN_BYTES, "cases span %zu bytes, the window has %u", max_span, WIN_BYTES);
    uint8_t *buf = tc_malloc(max_span);
    uint8_t *expected = tc_malloc(max_span);

    for (int f = 0; f < TC_NUM_FLAVOURS; ++f) {
        tc_window_t w;
        tc_window_open(&w, (enum tc_flavour) f, WIN_BYTES);
        for (size_t i = 0; i < ncases; ++i) {
            run_case(&w, &cases[i], (tc_rank + 1) % tc_size, buf, expected);
            run_case(&w, &cases[i], tc_rank, buf, expected);
        }
        tc_window_close(&w);
        tc_phase("%s window: %zu cases done", tc_flavour_names[f], ncases);
        if (TC_WIN_DYNAMIC == f) {
            /* allocate windows use shared memory on one node: count the
             * BTL's share before them */
            tc_expect_pvars(TC_PVAR_THIS_RANK, "put_count get_count");
        }
    }

    free(buf);
    free(expected);
    layout_free(&vec);
    layout_free(&idx);
    layout_free(&contig);
    layout_free(&bcontig);
    layout_free(&hv_a);
    layout_free(&hv_b);
    layout_free(&dvec);
    layout_free(&dcontig);
    return tc_finish();
}
