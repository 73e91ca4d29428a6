/*
 * MPI_Accumulate and MPI_Get_accumulate with every predefined operation that
 * MPI allows on int32, uint32, int64, uint64, float and double, with
 * negative values, values with the top bit set and extremes, checked exactly
 * against the same operation done in C.
 *
 * Each (type, operation) pair uses four regions of every rank's window:
 *   ACC_N   one MPI_Accumulate of N elements from every rank, concurrently
 *   ACC_1   N single-element MPI_Accumulate calls from every rank (the path
 *           that osc/rdma hands to the BTL's atomics), concurrently
 *   GACC_N  one MPI_Get_accumulate of N elements per rank, rank after rank,
 *           so that each fetched value is known exactly
 *   GACC_1  the same with N single-element calls
 * Concurrent REPLACE can end with any rank's value: the check is that each
 * element holds one of them.
 */
#include "common.h"

#include <limits.h>

#define N_MULTI  33 /* elements of the one-call regions */
#define N_SINGLE 8  /* elements of the single-element regions */

enum op_id {
    OP_SUM,
    OP_PROD,
    OP_MIN,
    OP_MAX,
    OP_BAND,
    OP_BOR,
    OP_BXOR,
    OP_LAND,
    OP_LOR,
    OP_REPLACE,
    OP_NO_OP,
    NUM_OPS
};

static const char *const op_names[NUM_OPS] = { "SUM",  "PROD", "MIN", "MAX",     "BAND", "BOR",
                                               "BXOR", "LAND", "LOR", "REPLACE", "NO_OP" };

static MPI_Op mpi_op(enum op_id op)
{
    switch (op) {
    case OP_SUM:
        return MPI_SUM;
    case OP_PROD:
        return MPI_PROD;
    case OP_MIN:
        return MPI_MIN;
    case OP_MAX:
        return MPI_MAX;
    case OP_BAND:
        return MPI_BAND;
    case OP_BOR:
        return MPI_BOR;
    case OP_BXOR:
        return MPI_BXOR;
    case OP_LAND:
        return MPI_LAND;
    case OP_LOR:
        return MPI_LOR;
    case OP_REPLACE:
        return MPI_REPLACE;
    default:
        return MPI_NO_OP;
    }
}

enum region { ACC_N, ACC_1, GACC_N, GACC_1, NUM_REGIONS };
static const char *const region_names[NUM_REGIONS] = { "accumulate count N", "accumulate count 1",
                                                       "get_accumulate count N",
                                                       "get_accumulate count 1" };
static const int region_count[NUM_REGIONS] = { N_MULTI, N_SINGLE, N_MULTI, N_SINGLE };

/* Which value a generator is asked for. */
enum role { ROLE_INIT, ROLE_CONTRIB };

/* What the engine needs of one datatype. */
typedef struct {
    const char *name;
    MPI_Datatype type;
    size_t size;
    int is_integer;
    /* a value for OP from the hash H; INIT values are the window's start */
    void (*value)(enum op_id op, enum role role, uint64_t h, void *out);
    /* *acc = *acc OP *in, as MPI defines it for this C type */
    void (*apply)(enum op_id op, void *acc, const void *in);
    int (*equal)(const void *a, const void *b);
    void (*format)(const void *v, char *buf, size_t len);
} type_desc_t;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x7FB5D329728EA185ull;
    x ^= x >> 27;
    x *= 0x81DADEF4BC2DD44Dull;
    x ^= x >> 33;
    return x;
}

/* The SIZE low bytes of V: the bits of a value as the window holds them. */
static uint64_t low_bytes(uint64_t v, size_t size)
{
    return size < 8 ? v & ((1ull << (8 * size)) - 1) : v;
}

/*
 * Integer types.  SUM stays clear of signed overflow but wraps unsigned
 * types around; MIN and MAX mix negatives, extremes and (unsigned) values
 * with the top bit set, where a signed comparison gives the wrong answer;
 * the logical operations use true values whose set bits are all high, which
 * a truncation to int would read as false.
 */
#define DEFINE_INT_TYPE(T, NAME, IS_SIGNED, TMIN, TMAX, PRINT_FMT)                                 \
    static void NAME##_value(enum op_id op, enum role role, uint64_t h, void *out)                 \
    {                                                                                              \
        const int bits = (int) (8 * sizeof(T));                                                    \
        const T truthy[4] = { (T) 1, (IS_SIGNED) ? (T) -3 : (T) (TMAX),                            \
                              (T) ((uint64_t) 1 << (bits - 1)),                                    \
                              (T) ((uint64_t) 1 << (bits / 2 + 3)) };                              \
        const uint64_t r = mix(h);                                                                 \
        T v;                                                                                       \
        switch (op) {                                                                              \
        case OP_SUM:                                                                               \
            if (IS_SIGNED) {                                                                       \
                v = (T) ((int64_t) (r % 2001) - 1000);                                             \
            } else {                                                                               \
                v = (r & 1) ? (T) ((TMAX) - (T) (r % 7)) : (T) (r % 1000);                         \
            }                                                                                      \
            break;                                                                                 \
        case OP_PROD:                                                                              \
            if (ROLE_INIT == role) {                                                               \
                v = (IS_SIGNED && (r & 1)) ? (T) -1 : (T) 1;                                       \
            } else if (IS_SIGNED) {                                                                \
                static const int factors[5] = { -2, -1, 1, 2, 3 };                                 \
                v = (T) factors[r % 5];                                                            \
            } else {                                                                               \
                v = (r % 4 == 3) ? (T) (TMAX) : (T) (1 + r % 3);                                   \
            }                                                                                      \
            break;                                                                                 \
        case OP_MIN:                                                                               \
        case OP_MAX:                                                                               \
            if (r % 13 == 0) {                                                                     \
                v = (T) (TMIN);                                                                    \
            } else if (r % 11 == 0) {                                                              \
                v = (T) (TMAX);                                                                    \
            } else if (IS_SIGNED) {                                                                \
                v = (T) ((int64_t) (r % 201) - 100);                                               \
            } else {                                                                               \
                v = (r % 3 == 0) ? (T) ((TMAX) - (T) (r % 50)) : (T) (r % 1000);                   \
            }                                                                                      \
            break;                                                                                 \
        case OP_BAND: /* mostly ones, so that something survives the AND */                        \
            v = (T) ~(mix(r) & mix(r + 1) & r);                                                    \
            break;                                                                                 \
        case OP_BOR: /* mostly zeros, so that the OR is not all ones */                            \
            v = (T) (mix(r) & mix(r + 1) & r);                                                     \
            break;                                                                                 \
        case OP_LAND:                                                                              \
            v = (ROLE_CONTRIB == role && r % 6 == 0) ? (T) 0 : truthy[r % 4];                      \
            break;                                                                                 \
        case OP_LOR:                                                                               \
            v = (r % 4 == 0) ? truthy[(r >> 8) % 4] : (T) 0;                                       \
            break;                                                                                 \
        default: /* BXOR, REPLACE, NO_OP: any bits */                                              \
            v = (T) r;                                                                             \
            break;                                                                                 \
        }                                                                                          \
        memcpy(out, &v, sizeof(v));                                                                \
    }                                                                                              \
                                                                                                   \
    static void NAME##_apply(enum op_id op, void *accp, const void *inp)                           \
    {                                                                                              \
        T acc, in;                                                                                 \
        memcpy(&acc, accp, sizeof(T));                                                             \
        memcpy(&in, inp, sizeof(T));                                                               \
        switch (op) {                                                                              \
        case OP_SUM:                                                                               \
            acc = (T) (acc + in);                                                                  \
            break;                                                                                 \
        case OP_PROD:                                                                              \
            acc = (T) (acc * in);                                                                  \
            break;                                                                                 \
        case OP_MIN:                                                                               \
            acc = in < acc ? in : acc;                                                             \
            break;                                                                                 \
        case OP_MAX:                                                                               \
            acc = in > acc ? in : acc;                                                             \
            break;                                                                                 \
        case OP_BAND:                                                                              \
            acc = (T) (acc & in);                                                                  \
            break;                                                                                 \
        case OP_BOR:                                                                               \
            acc = (T) (acc | in);                                                                  \
            break;                                                                                 \
        case OP_BXOR:                                                                              \
            acc = (T) (acc ^ in);                                                                  \
            break;                                                                                 \
        case OP_LAND:                                                                              \
            acc = (T) (acc && in);                                                                 \
            break;                                                                                 \
        case OP_LOR:                                                                               \
            acc = (T) (acc || in);                                                                 \
            break;                                                                                 \
        case OP_REPLACE:                                                                           \
            acc = in;                                                                              \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
        memcpy(accp, &acc, sizeof(T));                                                             \
    }                                                                                              \
                                                                                                   \
    static int NAME##_equal(const void *a, const void *b)                                          \
    {                                                                                              \
        return 0 == memcmp(a, b, sizeof(T));                                                       \
    }                                                                                              \
                                                                                                   \
    static void NAME##_format(const void *vp, char *buf, size_t len)                               \
    {                                                                                              \
        T v;                                                                                       \
        memcpy(&v, vp, sizeof(T));                                                                 \
        snprintf(buf, len, "%" PRINT_FMT " (0x%" PRIx64 ")", v,                                    \
                 low_bytes((uint64_t) v, sizeof(T)));                                              \
    }

/* The compiler sees both branches of IS_SIGNED for each type. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wsign-compare"
DEFINE_INT_TYPE(int32_t, int32, 1, INT32_MIN, INT32_MAX, PRId32)
DEFINE_INT_TYPE(uint32_t, uint32, 0, 0, UINT32_MAX, PRIu32)
DEFINE_INT_TYPE(int64_t, int64, 1, INT64_MIN, INT64_MAX, PRId64)
DEFINE_INT_TYPE(uint64_t, uint64, 0, 0, UINT64_MAX, PRIu64)
#pragma GCC diagnostic pop

/* Floating-point types: small multiples of powers of two, so that every
 * sum and product is exact whatever the order of the contributions. */
#define DEFINE_FLOAT_TYPE(T, NAME)                                                                 \
    static void NAME##_value(enum op_id op, enum role role, uint64_t h, void *out)                 \
    {                                                                                              \
        static const T factors[6] = { -2, -1, -0.5, 0.5, 2, 3 };                                   \
        const uint64_t r = mix(h);                                                                 \
        T v;                                                                                       \
        switch (op) {                                                                              \
        case OP_SUM:                                                                               \
            v = (T) ((int) (r % 41) - 20) * (T) 0.5;                                               \
            break;                                                                                 \
        case OP_PROD:                                                                              \
            v = ROLE_INIT == role ? (T) 1.5 : factors[r % 6];                                      \
            break;                                                                                 \
        case OP_MIN:                                                                               \
        case OP_MAX:                                                                               \
            v = (T) ((int) (r % 2001) - 1000) * (T) 0.25;                                          \
            break;                                                                                 \
        default:                                                                                   \
            v = (T) ((int) (r % 100001) - 50000) * (T) 0.125;                                      \
            break;                                                                                 \
        }                                                                                          \
        memcpy(out, &v, sizeof(v));                                                                \
    }                                                                                              \
                                                                                                   \
    static void NAME##_apply(enum op_id op, void *accp, const void *inp)                           \
    {                                                                                              \
        T acc, in;                                                                                 \
        memcpy(&acc, accp, sizeof(T));                                                             \
        memcpy(&in, inp, sizeof(T));                                                               \
        switch (op) {                                                                              \
        case OP_SUM:                                                                               \
            acc = acc + in;                                                                        \
            break;                                                                                 \
        case OP_PROD:                                                                              \
            acc = acc * in;                                                                        \
            break;                                                                                 \
        case OP_MIN:                                                                               \
            acc = in < acc ? in : acc;                                                             \
            break;                                                                                 \
        case OP_MAX:                                                                               \
            acc = in > acc ? in : acc;                                                             \
            break;                                                                                 \
        case OP_REPLACE:                                                                           \
            acc = in;                                                                              \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
        memcpy(accp, &acc, sizeof(T));                                                             \
    }                                                                                              \
                                                                                                   \
    static int NAME##_equal(const void *a, const void *b)                                          \
    {                                                                                              \
        T x, y;                                                                                    \
        memcpy(&x, a, sizeof(T));                                                                  \
        memcpy(&y, b, sizeof(T));                                                                  \
        return x == y;                                                                             \
    }                                                                                              \
                                                                                                   \
    static void NAME##_format(const void *vp, char *buf, size_t len)                               \
    {                                                                                              \
        T v;                                                                                       \
        memcpy(&v, vp, sizeof(T));                                                                 \
        snprintf(buf, len, "%.17g", (double) v);                                                   \
    }

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wfloat-equal"
DEFINE_FLOAT_TYPE(float, flt)
DEFINE_FLOAT_TYPE(double, dbl)
#pragma GCC diagnostic pop

#define TYPE_DESC(NAME, LABEL, MPITYPE, CTYPE, IS_INT)                                             \
    {                                                                                              \
        LABEL, MPITYPE, sizeof(CTYPE), IS_INT, NAME##_value, NAME##_apply, NAME##_equal,           \
            NAME##_format                                                                          \
    }

/* MPI defines the bit and logical operations on integers only. */
static int op_allowed(const type_desc_t *t, enum op_id op)
{
    return t->is_integer
           || !(OP_BAND == op || OP_BOR == op || OP_BXOR == op || OP_LAND == op || OP_LOR == op);
}

/* ------------------------------------------------------------------ */

typedef struct {
    const type_desc_t *t;
    enum op_id op;
    int type_index;
    tc_window_t *w;
    size_t region_bytes; /* bytes of one region in the window */
} combo_t;

static uint64_t hash_of(const combo_t *c, enum role role, int origin, int target,
                        enum region region, int i)
{
    return ((uint64_t) c->type_index << 56) ^ ((uint64_t) c->op << 48) ^ ((uint64_t) role << 44)
           ^ ((uint64_t) origin << 32) ^ ((uint64_t) target << 20) ^ ((uint64_t) region << 16)
           ^ (uint64_t) i;
}

static void init_value(const combo_t *c, int target, enum region reg, int i, void *out)
{
    c->t->value(c->op, ROLE_INIT, hash_of(c, ROLE_INIT, 0, target, reg, i), out);
}

static void contrib_value(const combo_t *c, int origin, int target, enum region reg, int i,
                          void *out)
{
    c->t->value(c->op, ROLE_CONTRIB, hash_of(c, ROLE_CONTRIB, origin, target, reg, i), out);
}

/* The element after ranks 0 .. upto-1 applied their contributions, in
 * order, to TARGET's element I of region REG. */
static void folded_value(const combo_t *c, int target, enum region reg, int i, int upto, void *out)
{
    uint8_t in[8];
    init_value(c, target, reg, i, out);
    for (int r = 0; r < upto; ++r) {
        contrib_value(c, r, target, reg, i, in);
        c->t->apply(c->op, out, in);
    }
}

static size_t region_offset(const combo_t *c, enum region reg, int i)
{
    return (size_t) reg * c->region_bytes + (size_t) i * c->t->size;
}

static void report(const combo_t *c, const char *what, int target, enum region reg, int i,
                   const void *expected, const void *got)
{
    char e[96], g[96];
    c->t->format(expected, e, sizeof(e));
    c->t->format(got, g, sizeof(g));
    TC_FAIL("%s %s, %s, %s on rank %d, element %d (window offset %zu): expected %s got %s",
            c->t->name, op_names[c->op], region_names[reg], what, target, i,
            region_offset(c, reg, i), e, g);
}

static void fill_contributions(const combo_t *c, int target, enum region reg, uint8_t *buf)
{
    for (int i = 0; i < region_count[reg]; ++i) {
        contrib_value(c, tc_rank, target, reg, i, buf + (size_t) i * c->t->size);
    }
}

static void post_region(const combo_t *c, int target, enum region reg, uint8_t *origin,
                        uint8_t *result)
{
    const MPI_Datatype dt = c->t->type;
    const MPI_Op op = mpi_op(c->op);
    const int n = region_count[reg];
    tc_window_t *w = c->w;

    fill_contributions(c, target, reg, origin);
    switch (reg) {
    case ACC_N:
        TC_MPI(MPI_Accumulate(origin, n, dt, target, tc_disp(w, target, region_offset(c, reg, 0)),
                              n, dt, op, w->win));
        break;
    case ACC_1:
        for (int i = 0; i < n; ++i) {
            TC_MPI(MPI_Accumulate(origin + (size_t) i * c->t->size, 1, dt, target,
                                  tc_disp(w, target, region_offset(c, reg, i)), 1, dt, op, w->win));
        }
        break;
    case GACC_N:
        TC_MPI(MPI_Get_accumulate(origin, n, dt, result, n, dt, target,
                                  tc_disp(w, target, region_offset(c, reg, 0)), n, dt, op, w->win));
        break;
    default:
        for (int i = 0; i < n; ++i) {
            TC_MPI(MPI_Get_accumulate(
                origin + (size_t) i * c->t->size, 1, dt, result + (size_t) i * c->t->size, 1, dt,
                target, tc_disp(w, target, region_offset(c, reg, i)), 1, dt, op, w->win));
        }
        break;
    }
}

static void run_combo(const combo_t *c)
{
    const int has_acc = OP_NO_OP != c->op; /* MPI_Accumulate takes no MPI_NO_OP */
    const size_t sz = c->t->size;
    uint8_t *origin = tc_malloc((size_t) tc_size * N_MULTI * sz);
    uint8_t *result = tc_malloc((size_t) tc_size * N_MULTI * sz);
    uint8_t expected[8], in[8];
    tc_window_t *w = c->w;

    /* start values, stored under a lock on our own window as MPI asks */
    TC_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, tc_rank, 0, w->win));
    for (int reg = 0; reg < NUM_REGIONS; ++reg) {
        for (int i = 0; i < region_count[reg]; ++i) {
            init_value(c, tc_rank, (enum region) reg, i, w->base + region_offset(c, reg, i));
        }
    }
    TC_MPI(MPI_Win_unlock(tc_rank, w->win));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* everybody at once into everybody */
    if (has_acc) {
        TC_MPI(MPI_Win_lock_all(0, w->win));
        for (int k = 0; k < tc_size; ++k) {
            int target = (tc_rank + k) % tc_size;
            post_region(c, target, ACC_N, origin + (size_t) target * N_MULTI * sz, NULL);
        }
        /* ACC_1 origins reuse the same buffer: let ACC_N leave it first */
        TC_MPI(MPI_Win_flush_local_all(w->win));
        for (int k = 0; k < tc_size; ++k) {
            int target = (tc_rank + k) % tc_size;
            post_region(c, target, ACC_1, origin + (size_t) target * N_MULTI * sz, NULL);
        }
        TC_MPI(MPI_Win_unlock_all(w->win));
    }

    /* rank after rank, so that what each fetches is known */
    for (int round = 0; round < tc_size; ++round) {
        if (round == tc_rank) {
            for (int reg = GACC_N; reg <= GACC_1; ++reg) {
                TC_MPI(MPI_Win_lock_all(0, w->win));
                for (int t = 0; t < tc_size; ++t) {
                    post_region(c, t, (enum region) reg, origin + (size_t) t * N_MULTI * sz,
                                result + (size_t) t * N_MULTI * sz);
                }
                TC_MPI(MPI_Win_unlock_all(w->win));
                for (int t = 0; t < tc_size; ++t) {
                    for (int i = 0; i < region_count[reg]; ++i) {
                        const uint8_t *got = result + ((size_t) t * N_MULTI + (size_t) i) * sz;
                        folded_value(c, t, (enum region) reg, i, round, expected);
                        if (!c->t->equal(expected, got)) {
                            report(c, "value fetched", t, (enum region) reg, i, expected, got);
                        }
                    }
                }
            }
        }
        TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }

    /* what our own window holds now */
    TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, tc_rank, 0, w->win));
    for (int reg = has_acc ? ACC_N : GACC_N; reg < NUM_REGIONS; ++reg) {
        for (int i = 0; i < region_count[reg]; ++i) {
            const uint8_t *got = w->base + region_offset(c, reg, i);
            if (OP_REPLACE == c->op && reg <= ACC_1) {
                /* concurrent replacements: any one rank's value may win */
                int found = 0;
                for (int r = 0; r < tc_size && !found; ++r) {
                    contrib_value(c, r, tc_rank, (enum region) reg, i, in);
                    found = c->t->equal(in, got);
                }
                if (!found) {
                    contrib_value(c, 0, tc_rank, (enum region) reg, i, in);
                    report(c, "final value (any rank's contribution, e.g.)", tc_rank,
                           (enum region) reg, i, in, got);
                }
                continue;
            }
            folded_value(c, tc_rank, (enum region) reg, i, tc_size, expected);
            if (!c->t->equal(expected, got)) {
                report(c, "final value", tc_rank, (enum region) reg, i, expected, got);
            }
        }
    }
    TC_MPI(MPI_Win_unlock(tc_rank, w->win));
    /* nobody rewrites start values while a peer still reads its window */
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    free(origin);
    free(result);
}

int main(int argc, char **argv)
{
    static const type_desc_t types[] = {
        TYPE_DESC(int32, "int32", MPI_INT32_T, int32_t, 1),
        TYPE_DESC(uint32, "uint32", MPI_UINT32_T, uint32_t, 1),
        TYPE_DESC(int64, "int64", MPI_INT64_T, int64_t, 1),
        TYPE_DESC(uint64, "uint64", MPI_UINT64_T, uint64_t, 1),
        TYPE_DESC(flt, "float", MPI_FLOAT, float, 0),
        TYPE_DESC(dbl, "double", MPI_DOUBLE, double, 0),
    };
    const int ntypes = (int) (sizeof(types) / sizeof(types[0]));
    const size_t region_bytes = N_MULTI * sizeof(uint64_t);
    tc_window_t w;
    int combos = 0;

    tc_init(&argc, &argv, "rma_accumulate");
    tc_window_open(&w, TC_WIN_CREATE, NUM_REGIONS * region_bytes);
    for (int ti = 0; ti < ntypes; ++ti) {
        for (int op = 0; op < NUM_OPS; ++op) {
            if (!op_allowed(&types[ti], (enum op_id) op)) {
                continue;
            }
            combo_t c = { &types[ti], (enum op_id) op, ti, &w, region_bytes };
            long before = tc_failures, wrong = 0;
            run_combo(&c);
            ++combos;
            /* one line per failing pair, past the limit on printed failures */
            long mine = tc_failures - before;
            TC_MPI(MPI_Allreduce(&mine, &wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
            if (wrong) {
                tc_phase("FAILED: %s %s: %ld wrong values on all ranks together", types[ti].name,
                         op_names[op], wrong);
            }
        }
        tc_phase("%s done", types[ti].name);
    }
    tc_window_close(&w);
    tc_phase("%d type/operation pairs checked", combos);
    tc_expect_pvars(TC_PVAR_THIS_RANK, "atomic_count");
    return tc_finish();
}
