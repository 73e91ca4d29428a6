/*
 * Shared helpers of the MPI test programs in tests/mpi.
 *
 * Every check that fails prints one line naming the rank, the place, what
 * was expected and what was found, and is counted; the program carries on so
 * that collective calls stay matched, and tc_finish() turns the global count
 * into the exit status.  A failing MPI call aborts at once: nothing after it
 * could be trusted.
 *
 * tc_expect_pvars() proves that our btl/ofi carried the traffic: it needs
 * every MPI_T performance variable our component registers to exist (upstream
 * registers none) and the named ones to be non-zero.  The counters are read
 * through tests/common/btl_ofi_pvars.h, whose session tc_init opens.  In a
 * comparison run with another btl/ofi (BTL_OFI_FLAVOUR=stock in the ranks'
 * environment, as contrib/env --stock sets it) the check is turned round:
 * none of our variables may exist, which proves ours was not loaded.
 *
 * Header-only on purpose: each test is one translation unit of its own,
 * linked with tests/common/btl_ofi_pvars.c (tests/build.mk).
 */
#ifndef BTL_OFI_TESTS_MPI_COMMON_H
#define BTL_OFI_TESTS_MPI_COMMON_H

#define _GNU_SOURCE
#include <inttypes.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "btl_ofi_pvars.h"

/* Not every test uses every helper. */
#define TC_UNUSED __attribute__((unused))

/* Checks that fail are all counted but only this many are printed per rank,
 * so that a broken 16 MiB transfer does not bury the log. */
#define TC_MAX_PRINTED_FAILURES 20

static const char *tc_test_name = "?";
static int tc_rank = -1;
static int tc_size = 0;
static long tc_failures = 0;
static double tc_start_time = 0.0;

TC_UNUSED static void tc_fail_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

TC_UNUSED static void tc_fail_at(const char *file, int line, const char *fmt, ...)
{
    /* threads of rma_threads may fail at the same time */
    long failures = __atomic_add_fetch(&tc_failures, 1, __ATOMIC_RELAXED);
    if (failures > TC_MAX_PRINTED_FAILURES) {
        return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "[%s rank %d] FAIL %s:%d: %s\n", tc_test_name, tc_rank, file, line, msg);
    if (failures == TC_MAX_PRINTED_FAILURES) {
        fprintf(stderr, "[%s rank %d] further failures are counted, not printed\n", tc_test_name,
                tc_rank);
    }
    fflush(stderr);
}

/* Record a failure with a printf-style explanation. */
#define TC_FAIL(...) tc_fail_at(__FILE__, __LINE__, __VA_ARGS__)

/* Record a failure when COND is false. */
#define TC_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            tc_fail_at(__FILE__, __LINE__, __VA_ARGS__);                                           \
        }                                                                                          \
    } while (0)

/* Integer equality with both values printed; WHAT names the location. */
#define TC_CHECK_EQ_INT(what, expected, got)                                                       \
    do {                                                                                           \
        long long tc_e_ = (long long) (expected), tc_g_ = (long long) (got);                       \
        if (tc_e_ != tc_g_) {                                                                      \
            tc_fail_at(__FILE__, __LINE__, "%s: expected %lld got %lld", (what), tc_e_, tc_g_);    \
        }                                                                                          \
    } while (0)

/* Abort the job when an MPI call fails: the error string says why. */
#define TC_MPI(call)                                                                               \
    do {                                                                                           \
        int tc_rc_ = (call);                                                                       \
        if (MPI_SUCCESS != tc_rc_) {                                                               \
            char tc_s_[MPI_MAX_ERROR_STRING];                                                      \
            int tc_l_ = 0;                                                                         \
            MPI_Error_string(tc_rc_, tc_s_, &tc_l_);                                               \
            fprintf(stderr, "[%s rank %d] FAIL %s:%d: %s returned %d (%s)\n", tc_test_name,        \
                    tc_rank, __FILE__, __LINE__, #call, tc_rc_, tc_s_);                            \
            fflush(stderr);                                                                        \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                          \
        }                                                                                          \
    } while (0)

/* malloc that cannot return NULL. */
TC_UNUSED static void *tc_malloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (NULL == p) {
        fprintf(stderr, "[%s rank %d] FAIL out of memory allocating %zu bytes\n", tc_test_name,
                tc_rank, size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

TC_UNUSED static double tc_elapsed(void)
{
    return MPI_Wtime() - tc_start_time;
}

/* Seconds on the monotonic clock, with no MPI call: for ranks that must
 * stay out of MPI while they time or compute. */
TC_UNUSED static double tc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

/* A slice of busy work the compiler cannot drop (no MPI call), for a target
 * that computes outside MPI. */
TC_UNUSED static void tc_compute_slice(volatile double *x)
{
    for (int i = 0; i < 10000; ++i) {
        *x = *x * 1.0000001 + 1e-9;
    }
}

/* A progress line from rank 0: where a hung test stopped shows in its log. */
TC_UNUSED static void tc_phase(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

TC_UNUSED static void tc_phase(const char *fmt, ...)
{
    if (0 != tc_rank) {
        return;
    }
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    printf("[%s %7.2fs] %s\n", tc_test_name, tc_elapsed(), msg);
    fflush(stdout);
}

/* Byte I of the test pattern SEED: differs between neighbouring offsets,
 * between seeds, and has no short period, so that a shifted or misplaced
 * block never matches by accident. */
TC_UNUSED static inline uint8_t tc_pattern_byte(uint32_t seed, size_t i)
{
    uint64_t x =
        ((uint64_t) i + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t) seed + 1) * 0xC2B2AE3D27D4EB4Full;
    x ^= x >> 29;
    return (uint8_t) (x >> 32);
}

TC_UNUSED static void tc_fill_pattern(void *buf, size_t len, uint32_t seed)
{
    uint8_t *p = buf;
    for (size_t i = 0; i < len; ++i) {
        p[i] = tc_pattern_byte(seed, i);
    }
}

/* Compare LEN bytes against pattern SEED and report the first mismatch with
 * its offset; returns the number of wrong bytes. */
TC_UNUSED static size_t tc_check_pattern_at(const char *file, int line, const char *what,
                                            const void *buf, size_t len, uint32_t seed)
{
    const uint8_t *p = buf;
    size_t wrong = 0, first = 0;
    for (size_t i = 0; i < len; ++i) {
        if (p[i] != tc_pattern_byte(seed, i)) {
            if (0 == wrong) {
                first = i;
            }
            ++wrong;
        }
    }
    if (wrong) {
        tc_fail_at(file, line,
                   "%s: %zu of %zu bytes wrong, first at offset %zu: expected 0x%02x got 0x%02x",
                   what, wrong, len, first, tc_pattern_byte(seed, first), p[first]);
    }
    return wrong;
}
#define TC_CHECK_PATTERN(what, buf, len, seed)                                                     \
    tc_check_pattern_at(__FILE__, __LINE__, (what), (buf), (len), (seed))

/* Check that LEN bytes all hold VALUE (guard zones around a transfer). */
TC_UNUSED static size_t tc_check_fill_at(const char *file, int line, const char *what,
                                         const void *buf, size_t len, uint8_t value)
{
    const uint8_t *p = buf;
    for (size_t i = 0; i < len; ++i) {
        if (p[i] != value) {
            tc_fail_at(file, line, "%s: offset %zu: expected 0x%02x got 0x%02x", what, i, value,
                       p[i]);
            return 1;
        }
    }
    return 0;
}
#define TC_CHECK_FILL(what, buf, len, value)                                                       \
    tc_check_fill_at(__FILE__, __LINE__, (what), (buf), (len), (value))

/* Resident set size in KiB, for the leak reports of long loops. */
TC_UNUSED static long tc_rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (NULL == f) {
        return -1;
    }
    if (2 != fscanf(f, "%ld %ld", &pages, &resident)) {
        resident = -1;
    }
    fclose(f);
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* ------------------------------------------------------------------ */
/* MPI_T performance variables                                         */

/* The counters that must all exist, and that tc_expect_pvars prints. */
#define TC_NUM_PVARS BTL_OFI_PVARS_NUM_STANDARD
#define tc_all_pvars btl_ofi_pvars_standard

enum tc_pvar_scope {
    TC_PVAR_THIS_RANK, /* non-zero on every rank */
    TC_PVAR_SUM,       /* non-zero summed over all ranks */
};

/* Whether this is a comparison run with another btl/ofi: BTL_OFI_FLAVOUR is
 * "stock" (contrib/env --stock), and our counters must not exist. */
TC_UNUSED static int tc_stock_run(void)
{
    const char *flavour = getenv("BTL_OFI_FLAVOUR");
    return NULL != flavour && 0 == strcmp(flavour, "stock");
}

/* Collective.  Our counters on this rank into VALUES (0 where one does not
 * exist) and summed over ranks into SUMS; returns how many do not exist
 * here, the first of them in *FIRST_MISSING. */
TC_UNUSED static int tc_read_pvar_sums(unsigned long values[TC_NUM_PVARS],
                                       unsigned long sums[TC_NUM_PVARS], int *first_missing)
{
    int missing = 0;

    *first_missing = -1;
    for (int i = 0; i < TC_NUM_PVARS; ++i) {
        values[i] = 0;
        if (0 != btl_ofi_pvars_read(tc_all_pvars[i], &values[i])) {
            *first_missing = (0 == missing) ? i : *first_missing;
            ++missing;
        }
    }
    TC_MPI(MPI_Allreduce(values, sums, TC_NUM_PVARS, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD));
    return missing;
}

/*
 * Collective.  Fails unless all of our performance variables exist and each
 * counter in NAMES (space separated, e.g. "put_count get_count") is non-zero
 * on every rank or summed over ranks, as SCOPE says.  Prints the counters
 * from rank 0 either way: the log shows what carried the test.
 */
TC_UNUSED static void tc_expect_pvars(enum tc_pvar_scope scope, const char *names)
{
    unsigned long values[TC_NUM_PVARS], sums[TC_NUM_PVARS];
    int missing = 0, first_missing = -1;

    if (tc_stock_run()) {
        /* a comparison run: another btl/ofi (or none) carried the traffic */
        int present = 0, first = -1;
        for (int i = 0; i < TC_NUM_PVARS; ++i) {
            unsigned long ignored = 0;
            if (0 == btl_ofi_pvars_read(tc_all_pvars[i], &ignored)) {
                first = (first < 0) ? i : first;
                ++present;
            }
        }
        TC_CHECK(0 == present,
                 "BTL_OFI_FLAVOUR=stock but %d of our MPI_T variables exist (btl_ofi_%s...): "
                 "our btl/ofi is loaded",
                 present, first < 0 ? "" : tc_all_pvars[first]);
        tc_phase("stock run: none of our btl_ofi counters exists (checks of %s skipped)", names);
        return;
    }

    missing = tc_read_pvar_sums(values, sums, &first_missing);
    if (missing) {
        TC_FAIL("MPI_T performance variable btl_ofi_%s not found: our btl/ofi is not "
                "loaded (upstream's or none carried the traffic)",
                tc_all_pvars[first_missing]);
    }
    if (0 == tc_rank) {
        char line[1024];
        size_t used = 0;
        for (int i = 0; i < TC_NUM_PVARS && used < sizeof(line); ++i) {
            used += (size_t) snprintf(line + used, sizeof(line) - used, " %s=%lu", tc_all_pvars[i],
                                      sums[i]);
        }
        tc_phase("btl_ofi counters summed over ranks:%s", line);
    }
    if (missing) {
        return;
    }

    char list[256];
    snprintf(list, sizeof(list), "%s", names);
    for (char *save = NULL, *name = strtok_r(list, " ,", &save); name;
         name = strtok_r(NULL, " ,", &save)) {
        int which = -1;
        for (int i = 0; i < TC_NUM_PVARS; ++i) {
            if (0 == strcmp(name, tc_all_pvars[i])) {
                which = i;
            }
        }
        if (which < 0) {
            TC_FAIL("test asks for unknown counter %s", name);
            continue;
        }
        if (TC_PVAR_THIS_RANK == scope) {
            TC_CHECK(values[which] > 0,
                     "btl_ofi_%s is 0 on this rank: the traffic did not go through our btl/ofi",
                     name);
        } else if (0 == tc_rank) {
            TC_CHECK(sums[which] > 0,
                     "btl_ofi_%s is 0 on all ranks: the traffic did not go through our btl/ofi",
                     name);
        }
    }
}

/* ------------------------------------------------------------------ */
/* Start and finish                                                    */

/* MPI_Init_thread asking for REQUIRED; fails the test when less is given. */
TC_UNUSED static void tc_init_thread(int *argc, char ***argv, const char *name, int required)
{
    int provided = MPI_THREAD_SINGLE;

    tc_test_name = name;
    if (MPI_SUCCESS != MPI_Init_thread(argc, argv, required, &provided)) {
        fprintf(stderr, "[%s] FAIL MPI_Init_thread failed\n", name);
        exit(2);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &tc_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &tc_size);
    tc_start_time = MPI_Wtime();
    /* errors come back to TC_MPI, which names the call before aborting */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (provided < required) {
        TC_FAIL("MPI_Init_thread provided thread level %d, the test needs %d", provided, required);
    }
    /* counters count from here: before any traffic of the test */
    btl_ofi_pvars_open();
    tc_phase("start: %d ranks", tc_size);
}

TC_UNUSED static void tc_init(int *argc, char ***argv, const char *name)
{
    tc_init_thread(argc, argv, name, MPI_THREAD_SINGLE);
}

/* Errors on a window come back to TC_MPI too. */
TC_UNUSED static void tc_win_errors_return(MPI_Win win)
{
    TC_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
}

/* Collective.  Prints the verdict on rank 0, finalizes, and returns the exit
 * status for main: 0 when no rank recorded a failure. */
TC_UNUSED static int tc_finish(void)
{
    long total = 0;
    TC_MPI(MPI_Allreduce(&tc_failures, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    if (0 == tc_rank) {
        if (0 == total) {
            printf("%s: PASS on %d ranks in %.2fs\n", tc_test_name, tc_size, tc_elapsed());
        } else {
            printf("%s: FAIL: %ld failed checks on %d ranks\n", tc_test_name, total, tc_size);
        }
        fflush(stdout);
    }
    btl_ofi_pvars_close();
    MPI_Finalize();
    return 0 == total ? 0 : 1;
}

/* ------------------------------------------------------------------ */
/* Windows of the three flavours that a test can run over              */

enum tc_flavour {
    TC_WIN_CREATE,   /* MPI_Win_create: through the BTL */
    TC_WIN_DYNAMIC,  /* MPI_Win_create_dynamic + attach: through the BTL */
    TC_WIN_ALLOCATE, /* MPI_Win_allocate: shared memory on one node, no BTL */
    TC_NUM_FLAVOURS
};

TC_UNUSED static const char *const tc_flavour_names[TC_NUM_FLAVOURS] = { "create", "dynamic",
                                                                         "allocate" };

/* A window whose displacement for byte OFF at rank R is base_disp[R] + OFF,
 * whatever the flavour. */
typedef struct {
    MPI_Win win;
    enum tc_flavour flavour;
    uint8_t *base; /* local window memory */
    size_t bytes;
    MPI_Aint *base_disp; /* per rank: displacement of its byte 0 */
    int owns_memory;     /* base was malloc'd here */
} tc_window_t;

TC_UNUSED static void tc_window_open(tc_window_t *w, enum tc_flavour flavour, size_t bytes)
{
    MPI_Aint mine = 0;

    memset(w, 0, sizeof(*w));
    w->flavour = flavour;
    w->bytes = bytes;
    w->base_disp = tc_malloc((size_t) tc_size * sizeof(MPI_Aint));
    switch (flavour) {
    case TC_WIN_CREATE:
        w->base = tc_malloc(bytes);
        w->owns_memory = 1;
        memset(w->base, 0, bytes);
        TC_MPI(
            MPI_Win_create(w->base, (MPI_Aint) bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w->win));
        break;
    case TC_WIN_DYNAMIC:
        w->base = tc_malloc(bytes);
        w->owns_memory = 1;
        memset(w->base, 0, bytes);
        TC_MPI(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &w->win));
        TC_MPI(MPI_Win_attach(w->win, w->base, (MPI_Aint) bytes));
        TC_MPI(MPI_Get_address(w->base, &mine));
        break;
    case TC_WIN_ALLOCATE:
        TC_MPI(MPI_Win_allocate((MPI_Aint) bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w->base,
                                &w->win));
        memset(w->base, 0, bytes);
        break;
    default:
        abort();
    }
    tc_win_errors_return(w->win);
    TC_MPI(MPI_Allgather(&mine, 1, MPI_AINT, w->base_disp, 1, MPI_AINT, MPI_COMM_WORLD));
    /* nobody touches a peer before every memset above is done */
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

TC_UNUSED static void tc_window_close(tc_window_t *w)
{
    if (TC_WIN_DYNAMIC == w->flavour) {
        TC_MPI(MPI_Win_detach(w->win, w->base));
    }
    TC_MPI(MPI_Win_free(&w->win));
    if (w->owns_memory) {
        free(w->base);
    }
    free(w->base_disp);
    memset(w, 0, sizeof(*w));
}

TC_UNUSED static inline MPI_Aint tc_disp(const tc_window_t *w, int rank, size_t offset)
{
    return w->base_disp[rank] + (MPI_Aint) offset;
}

/* Collective.  The node of every rank, as the world rank of its node's
 * first rank (MPI_COMM_TYPE_SHARED); the caller frees it. */
TC_UNUSED static int *tc_node_of_ranks(void)
{
    MPI_Comm local;
    int leader = tc_rank;
    int *nodes = tc_malloc((size_t) tc_size * sizeof(int));

    TC_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local));
    TC_MPI(MPI_Bcast(&leader, 1, MPI_INT, 0, local));
    TC_MPI(MPI_Comm_free(&local));
    TC_MPI(MPI_Allgather(&leader, 1, MPI_INT, nodes, 1, MPI_INT, MPI_COMM_WORLD));
    return nodes;
}

#endif /* BTL_OFI_TESTS_MPI_COMMON_H */
