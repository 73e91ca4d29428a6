/*
 * Derived datatypes sent and received over our component: a vector of
 * doubles, an indexed type of ints, a struct with padding holes, and a
 * vector of that struct (whole structs left out), each in a ring, at
 * counts whose packed size is eager (~1 KiB), pipelined (~100 KiB) and
 * large (~2 MiB).  Non-contiguous data never goes by RDMA in ob1: these
 * messages travel as send fragments, packed on one side and unpacked on the
 * other.  Two cases change the type between the sides (a vector received
 * as contiguous doubles and the reverse), which MPI allows when the type
 * signatures match.
 *
 * Every data byte carries a pattern of the sender and its position in the
 * packed stream; the receive buffer starts with every byte set to a hole
 * marker, and the bytes outside the receive type's map must keep it, since
 * MPI may only write the locations the type map names.  A mismatch names
 * the element, the field and the byte.
 */
#include "common.h"

#include <stddef.h>

#define MAX_SEGMENTS 32
#define HOLE_SEND    0x33
#define HOLE_RECV    0xEE
#define TAG_DT       21

/* The type map of one element, as the byte ranges that carry data, in
 * increasing offset order without overlaps. */
typedef struct {
    const char *name;
    MPI_Datatype type;
    size_t extent;
    int nseg;
    size_t off[MAX_SEGMENTS];
    size_t len[MAX_SEGMENTS];
    size_t packed; /* data bytes per element */
} layout_t;

/* padding after c, after i[] and at the end: the holes */
typedef struct {
    char c;
    double d;
    int i[3];
    short s;
} record_t;

#define VEC_BLOCKS   4
#define VEC_BLOCKLEN 3
#define VEC_STRIDE   5

static void add_segment(layout_t *l, size_t off, size_t len)
{
    if (l->nseg >= MAX_SEGMENTS
        || (l->nseg > 0 && off < l->off[l->nseg - 1] + l->len[l->nseg - 1])) {
        fprintf(stderr, "p2p_datatypes: bad layout %s\n", l->name);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    l->off[l->nseg] = off;
    l->len[l->nseg] = len;
    l->packed += len;
    ++l->nseg;
}

static void layout_doubles(layout_t *l)
{
    memset(l, 0, sizeof(*l));
    l->name = "contiguous doubles";
    l->type = MPI_DOUBLE;
    l->extent = sizeof(double);
    add_segment(l, 0, sizeof(double));
}

static void layout_vector(layout_t *l)
{
    memset(l, 0, sizeof(*l));
    l->name = "vector of doubles";
    TC_MPI(MPI_Type_vector(VEC_BLOCKS, VEC_BLOCKLEN, VEC_STRIDE, MPI_DOUBLE, &l->type));
    TC_MPI(MPI_Type_commit(&l->type));
    l->extent = ((VEC_BLOCKS - 1) * VEC_STRIDE + VEC_BLOCKLEN) * sizeof(double);
    for (int b = 0; b < VEC_BLOCKS; ++b) {
        add_segment(l, (size_t) b * VEC_STRIDE * sizeof(double), VEC_BLOCKLEN * sizeof(double));
    }
}

static void layout_indexed(layout_t *l)
{
    static const int blocklens[] = { 1, 3, 2, 5 };
    static const int displs[] = { 0, 2, 7, 12 };
    const int nblocks = 4;

    memset(l, 0, sizeof(*l));
    l->name = "indexed ints";
    TC_MPI(MPI_Type_indexed(nblocks, blocklens, displs, MPI_INT, &l->type));
    TC_MPI(MPI_Type_commit(&l->type));
    l->extent = (size_t) (displs[nblocks - 1] + blocklens[nblocks - 1]) * sizeof(int);
    for (int b = 0; b < nblocks; ++b) {
        add_segment(l, (size_t) displs[b] * sizeof(int), (size_t) blocklens[b] * sizeof(int));
    }
}

static MPI_Datatype record_type(void)
{
    const int blocklens[] = { 1, 1, 3, 1 };
    const MPI_Aint displs[] = { offsetof(record_t, c), offsetof(record_t, d), offsetof(record_t, i),
                                offsetof(record_t, s) };
    const MPI_Datatype types[] = { MPI_CHAR, MPI_DOUBLE, MPI_INT, MPI_SHORT };
    MPI_Datatype raw, resized;

    TC_MPI(MPI_Type_create_struct(4, blocklens, displs, types, &raw));
    /* the trailing padding belongs to the extent, as in an array of them */
    TC_MPI(MPI_Type_create_resized(raw, 0, sizeof(record_t), &resized));
    TC_MPI(MPI_Type_free(&raw));
    return resized;
}

static void add_record_segments(layout_t *l, size_t base)
{
    add_segment(l, base + offsetof(record_t, c), sizeof(char));
    add_segment(l, base + offsetof(record_t, d), sizeof(double));
    add_segment(l, base + offsetof(record_t, i), 3 * sizeof(int));
    add_segment(l, base + offsetof(record_t, s), sizeof(short));
}

static void layout_struct(layout_t *l)
{
    memset(l, 0, sizeof(*l));
    l->name = "struct with holes";
    l->type = record_type();
    TC_MPI(MPI_Type_commit(&l->type));
    l->extent = sizeof(record_t);
    add_record_segments(l, 0);
}

/* every other record of three pairs: whole records are holes too */
static void layout_vector_of_struct(layout_t *l)
{
    MPI_Datatype rec = record_type();

    memset(l, 0, sizeof(*l));
    l->name = "vector of structs";
    TC_MPI(MPI_Type_vector(3, 1, 2, rec, &l->type));
    TC_MPI(MPI_Type_commit(&l->type));
    TC_MPI(MPI_Type_free(&rec));
    l->extent = 5 * sizeof(record_t);
    for (int r = 0; r < 3; ++r) {
        add_record_segments(l, (size_t) r * 2 * sizeof(record_t));
    }
}

static void layout_free(layout_t *l)
{
    if (MPI_DOUBLE != l->type) {
        TC_MPI(MPI_Type_free(&l->type));
    }
}

static uint32_t seed_of(int sender, int which_case, size_t count)
{
    return (uint32_t) sender * 7340033u + (uint32_t) which_case * 1031u + (uint32_t) count;
}

/* Data bytes get the pattern of their packed position, holes HOLE_SEND. */
static void fill_send(const layout_t *l, uint8_t *buf, size_t count, uint32_t seed)
{
    size_t p = 0;

    memset(buf, HOLE_SEND, count * l->extent);
    for (size_t e = 0; e < count; ++e) {
        for (int s = 0; s < l->nseg; ++s) {
            uint8_t *dst = buf + e * l->extent + l->off[s];
            for (size_t b = 0; b < l->len[s]; ++b) {
                dst[b] = tc_pattern_byte(seed, p++);
            }
        }
    }
}

/* Walk the receive layout: data bytes must hold the pattern, the bytes
 * between them HOLE_RECV.  Reports the first wrong byte of each kind. */
static void check_recv(const layout_t *l, const uint8_t *buf, size_t count, uint32_t seed,
                       const char *what)
{
    size_t p = 0, wrong_data = 0, wrong_holes = 0;

    for (size_t e = 0; e < count; ++e) {
        const uint8_t *elem = buf + e * l->extent;
        size_t cursor = 0;
        for (int s = 0; s <= l->nseg; ++s) {
            size_t hole_end = (s < l->nseg) ? l->off[s] : l->extent;
            for (; cursor < hole_end; ++cursor) {
                if (HOLE_RECV != elem[cursor] && 0 == wrong_holes++) {
                    TC_FAIL("%s: element %zu, hole byte %zu was written: 0x%02x", what, e, cursor,
                            elem[cursor]);
                }
            }
            if (s == l->nseg) {
                break;
            }
            for (size_t b = 0; b < l->len[s]; ++b, ++p) {
                uint8_t want = tc_pattern_byte(seed, p);
                if (want != elem[l->off[s] + b] && 0 == wrong_data++) {
                    TC_FAIL("%s: element %zu, field %d (offset %zu), byte %zu: expected 0x%02x "
                            "got 0x%02x",
                            what, e, s, l->off[s], b, want, elem[l->off[s] + b]);
                }
            }
            cursor = l->off[s] + l->len[s];
        }
    }
    if (wrong_data > 1 || wrong_holes > 1) {
        TC_FAIL("%s: %zu data bytes and %zu hole bytes wrong in all", what, wrong_data,
                wrong_holes);
    }
}

/* One ring transfer: COUNT elements of SEND to the right, RECV_COUNT
 * elements of RECV from the left; both describe the same bytes. */
static void ring_case(int which_case, const layout_t *send, size_t count, const layout_t *recv,
                      size_t recv_count)
{
    const int right = (tc_rank + 1) % tc_size;
    const int left = (tc_rank + tc_size - 1) % tc_size;
    uint8_t *sbuf = tc_malloc(count * send->extent);
    uint8_t *rbuf = tc_malloc(recv_count * recv->extent);
    MPI_Request reqs[2];
    MPI_Status status[2];
    char what[192];
    int got = -1;

    fill_send(send, sbuf, count, seed_of(tc_rank, which_case, count));
    memset(rbuf, HOLE_RECV, recv_count * recv->extent);
    TC_MPI(MPI_Irecv(rbuf, (int) recv_count, recv->type, left, TAG_DT, MPI_COMM_WORLD, &reqs[0]));
    TC_MPI(MPI_Isend(sbuf, (int) count, send->type, right, TAG_DT, MPI_COMM_WORLD, &reqs[1]));
    TC_MPI(MPI_Waitall(2, reqs, status));

    snprintf(what, sizeof(what), "%zu x %s sent as %zu x %s (%zu bytes) from rank %d", count,
             send->name, recv_count, recv->name, count * send->packed, left);
    MPI_Get_count(&status[0], recv->type, &got);
    TC_CHECK(got == (int) recv_count, "%s: MPI_Get_count says %d elements", what, got);
    check_recv(recv, rbuf, recv_count, seed_of(left, which_case, count), what);
    free(rbuf);
    free(sbuf);
}

int main(int argc, char **argv)
{
    /* packed bytes per message: eager, send pipeline, many fragments */
    static const size_t targets[] = { 1000, 100 * 1024, 2u << 20 };
    layout_t doubles, vec, idx, rec, vrec;
    int which_case = 0;

    tc_init(&argc, &argv, "p2p_datatypes");
    layout_doubles(&doubles);
    layout_vector(&vec);
    layout_indexed(&idx);
    layout_struct(&rec);
    layout_vector_of_struct(&vrec);

    const layout_t *same[] = { &vec, &idx, &rec, &vrec };
    for (size_t t = 0; t < sizeof(targets) / sizeof(targets[0]); ++t) {
        for (size_t k = 0; k < sizeof(same) / sizeof(same[0]); ++k) {
            size_t count = targets[t] / same[k]->packed + 1;
            ring_case(which_case++, same[k], count, same[k], count);
        }
        /* the vector's doubles arrive contiguous and the other way round */
        size_t nvec = targets[t] / vec.packed + 1;
        size_t ndbl = nvec * VEC_BLOCKS * VEC_BLOCKLEN;
        ring_case(which_case++, &vec, nvec, &doubles, ndbl);
        ring_case(which_case++, &doubles, ndbl, &vec, nvec);
        tc_phase("about %zu packed bytes per message done", targets[t]);
    }
    tc_expect_pvars(TC_PVAR_THIS_RANK, "send_count send_bytes recv_count recv_bytes");

    layout_free(&vrec);
    layout_free(&rec);
    layout_free(&idx);
    layout_free(&vec);
    layout_free(&doubles);
    return tc_finish();
}
