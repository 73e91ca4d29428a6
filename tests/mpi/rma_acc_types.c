/*
 * MPI_Accumulate and MPI_Get_accumulate whose target side is a derived
 * datatype (vector, indexed, and a vector of a two-int struct-like
 * contiguous type) over MPI_Win_create and dynamic windows: osc/rdma turns
 * each into many BTL gets, puts and atomics under its accumulate lock.
 *
 * For each datatype and element type (int32, double):
 *   sum     every rank adds contribution(rank, i) to element i of the type
 *           map at every rank, all ranks at once, in shared-lock epochs;
 *           every covered element must end as background + the sum over
 *           ranks, every byte the type skips must still be background.
 *   max     the same with MPI_MAX of values that depend on the rank, so
 *           the largest rank's value must win everywhere.
 *   fetch   ranks take turns (a barrier between turns) doing
 *           MPI_Get_accumulate(SUM) on every target; each fetched element
 *           must equal the value the turns before left there exactly.
 *
 * Option: -r repetitions of the whole set (default 1).
 */
#include "common.h"

#define WIN_ELEMS  512
#define BACKGROUND 7

enum elem_kind { ELEM_INT, ELEM_DOUBLE, NUM_ELEM_KINDS };
static const char *const elem_names[NUM_ELEM_KINDS] = { "int32", "double" };

enum shape { SHAPE_VECTOR, SHAPE_INDEXED, SHAPE_PAIRS, NUM_SHAPES };
static const char *const shape_names[NUM_SHAPES] = { "vector", "indexed", "vector-of-pairs" };

typedef struct {
    enum elem_kind kind;
    enum shape shape;
    MPI_Datatype base;   /* MPI_INT or MPI_DOUBLE */
    MPI_Datatype target; /* the derived type at the target */
    int count;           /* base elements the type covers */
    int *index;          /* element index in the window of type-map entry i */
    tc_window_t w;
} acc_case_t;

static size_t elem_size(enum elem_kind kind)
{
    return ELEM_INT == kind ? sizeof(int32_t) : sizeof(double);
}

static double contribution(int rank, int i)
{
    return (double) ((rank + 1) * 1000 + i);
}

static double window_value(const acc_case_t *c, int element)
{
    if (ELEM_INT == c->kind) {
        return (double) ((int32_t *) c->w.base)[element];
    }
    return ((double *) c->w.base)[element];
}

static void set_window_value(acc_case_t *c, int element, double v)
{
    if (ELEM_INT == c->kind) {
        ((int32_t *) c->w.base)[element] = (int32_t) v;
    } else {
        ((double *) c->w.base)[element] = v;
    }
}

/* The origin buffer: COUNT contiguous base elements. */
static void *origin_values(const acc_case_t *c, int rank, int negate)
{
    void *buf = tc_malloc((size_t) c->count * elem_size(c->kind));
    for (int i = 0; i < c->count; ++i) {
        double v = contribution(rank, i) * (negate ? -1.0 : 1.0);
        if (ELEM_INT == c->kind) {
            ((int32_t *) buf)[i] = (int32_t) v;
        } else {
            ((double *) buf)[i] = v;
        }
    }
    return buf;
}

static double buffer_value(const acc_case_t *c, const void *buf, int i)
{
    if (ELEM_INT == c->kind) {
        return (double) ((const int32_t *) buf)[i];
    }
    return ((const double *) buf)[i];
}

static void build_type(acc_case_t *c)
{
    int n = 0;

    c->base = ELEM_INT == c->kind ? MPI_INT : MPI_DOUBLE;
    c->index = tc_malloc(WIN_ELEMS * sizeof(int));
    switch (c->shape) {
    case SHAPE_VECTOR: /* 40 blocks of 3, stride 7 */
        TC_MPI(MPI_Type_vector(40, 3, 7, c->base, &c->target));
        for (int b = 0; b < 40; ++b) {
            for (int e = 0; e < 3; ++e) {
                c->index[n++] = b * 7 + e;
            }
        }
        break;
    case SHAPE_INDEXED: { /* irregular blocks, not sorted by displacement */
        int lens[6] = { 5, 1, 17, 2, 9, 4 };
        int displs[6] = { 100, 3, 40, 0, 200, 60 };
        TC_MPI(MPI_Type_indexed(6, lens, displs, c->base, &c->target));
        for (int b = 0; b < 6; ++b) {
            for (int e = 0; e < lens[b]; ++e) {
                c->index[n++] = displs[b] + e;
            }
        }
        break;
    }
    default: { /* pairs of elements every 5 elements, 50 pairs */
        MPI_Datatype pair;
        TC_MPI(MPI_Type_contiguous(2, c->base, &pair));
        TC_MPI(
            MPI_Type_create_hvector(50, 1, (MPI_Aint) (5 * elem_size(c->kind)), pair, &c->target));
        TC_MPI(MPI_Type_free(&pair));
        for (int b = 0; b < 50; ++b) {
            c->index[n++] = b * 5;
            c->index[n++] = b * 5 + 1;
        }
        break;
    }
    }
    c->count = n;
    TC_MPI(MPI_Type_commit(&c->target));
}

static void reset_window(acc_case_t *c)
{
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (int e = 0; e < WIN_ELEMS; ++e) {
        set_window_value(c, e, BACKGROUND);
    }
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* Every covered element holds COVERED(i), every other one BACKGROUND. */
static void check_window(acc_case_t *c, const char *what, double (*covered)(int i))
{
    char *is_covered = calloc(WIN_ELEMS, 1);
    int wrong = 0;

    if (NULL == is_covered) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int i = 0; i < c->count; ++i) {
        is_covered[c->index[i]] = 1;
        double want = covered(i), got = window_value(c, c->index[i]);
        if (want != got && wrong++ < 3) {
            TC_FAIL("%s %s %s: element %d (type entry %d) expected %.0f got %.0f",
                    elem_names[c->kind], shape_names[c->shape], what, c->index[i], i, want, got);
        }
    }
    for (int e = 0; e < WIN_ELEMS; ++e) {
        if (!is_covered[e] && BACKGROUND != window_value(c, e) && wrong++ < 3) {
            TC_FAIL("%s %s %s: element %d outside the type changed to %.0f", elem_names[c->kind],
                    shape_names[c->shape], what, e, window_value(c, e));
        }
    }
    free(is_covered);
}

static double expected_sum(int i)
{
    double s = BACKGROUND;
    for (int r = 0; r < tc_size; ++r) {
        s += contribution(r, i);
    }
    return s;
}

static double expected_max(int i)
{
    return contribution(tc_size - 1, i);
}

/* Every rank accumulates into every rank at once, OP applied. */
static void accumulate_everywhere(acc_case_t *c, MPI_Op op)
{
    void *mine = origin_values(c, tc_rank, 0);

    for (int k = 0; k < tc_size; ++k) {
        int t = (tc_rank + k) % tc_size;
        TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, t, 0, c->w.win));
        TC_MPI(MPI_Accumulate(mine, c->count, c->base, t, tc_disp(&c->w, t, 0), 1, c->target, op,
                              c->w.win));
        TC_MPI(MPI_Win_unlock(t, c->w.win));
    }
    free(mine);
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* Turn by turn, fetch-and-add into every rank; the fetched values are known. */
static void fetch_in_turns(acc_case_t *c)
{
    void *mine = origin_values(c, tc_rank, 0);
    void *fetched = tc_malloc((size_t) c->count * elem_size(c->kind));

    TC_MPI(MPI_Win_lock_all(0, c->w.win));
    for (int turn = 0; turn < tc_size; ++turn) {
        if (turn == tc_rank) {
            for (int t = 0; t < tc_size; ++t) {
                TC_MPI(MPI_Get_accumulate(mine, c->count, c->base, fetched, c->count, c->base, t,
                                          tc_disp(&c->w, t, 0), 1, c->target, MPI_SUM, c->w.win));
                TC_MPI(MPI_Win_flush(t, c->w.win));
                for (int i = 0; i < c->count; ++i) {
                    double want = BACKGROUND;
                    for (int r = 0; r < turn; ++r) {
                        want += contribution(r, i);
                    }
                    if (buffer_value(c, fetched, i) != want) {
                        TC_FAIL("%s %s fetch: from rank %d entry %d expected %.0f got %.0f",
                                elem_names[c->kind], shape_names[c->shape], t, i, want,
                                buffer_value(c, fetched, i));
                        break;
                    }
                }
            }
        }
        TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    TC_MPI(MPI_Win_unlock_all(c->w.win));
    free(fetched);
    free(mine);
}

static void run_case(enum tc_flavour flavour, enum elem_kind kind, enum shape shape)
{
    acc_case_t c = { .kind = kind, .shape = shape };

    build_type(&c);
    tc_window_open(&c.w, flavour, WIN_ELEMS * elem_size(kind));

    reset_window(&c);
    accumulate_everywhere(&c, MPI_SUM);
    check_window(&c, "sum", expected_sum);

    reset_window(&c);
    accumulate_everywhere(&c, MPI_MAX);
    check_window(&c, "max", expected_max);

    reset_window(&c);
    fetch_in_turns(&c);
    check_window(&c, "fetch", expected_sum);

    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    tc_window_close(&c.w);
    TC_MPI(MPI_Type_free(&c.target));
    free(c.index);
}

int main(int argc, char **argv)
{
    int repetitions = 1, opt;

    tc_init(&argc, &argv, "rma_acc_types");
    while ((opt = getopt(argc, argv, "r:")) != -1) {
        if ('r' == opt) {
            repetitions = atoi(optarg);
        } else {
            TC_FAIL("usage: rma_acc_types [-r repetitions]");
        }
    }
    for (int rep = 0; rep < repetitions; ++rep) {
        for (int f = TC_WIN_CREATE; f <= TC_WIN_DYNAMIC; ++f) {
            for (int k = 0; k < NUM_ELEM_KINDS; ++k) {
                tc_phase("%s window, %s elements", tc_flavour_names[f], elem_names[k]);
                for (int s = 0; s < NUM_SHAPES; ++s) {
                    run_case((enum tc_flavour) f, (enum elem_kind) k, (enum shape) s);
                }
            }
        }
    }
    tc_expect_pvars(TC_PVAR_SUM, "get_count put_count");
    return tc_finish();
}
