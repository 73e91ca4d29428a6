/*
 * A shared linked list in an MPI_Win_create_dynamic window, the way RMA
 * codes written for other MPIs build distributed queues: every rank
 * allocates its elements as it goes, attaches them, and appends them to one
 * list whose head lives on rank 0.
 *
 * Append: MPI_Compare_and_swap (MPI_INT) of the tail element's next.rank
 * from "none" to the appender's rank; the winner then stores next.disp with
 * MPI_Fetch_and_op(MPI_REPLACE) (MPI_AINT); a loser reads next.disp with
 * MPI_NO_OP fetches until the winner's store shows, and follows it.  Each
 * access is its own epoch of the chosen lock variant (-l):
 *
 *   nocheck    MPI_Win_lock(SHARED, MPI_MODE_NOCHECK)     (the default)
 *   shared     MPI_Win_lock(SHARED, 0)
 *   exclusive  MPI_Win_lock(EXCLUSIVE, 0)
 *   lockall    one MPI_Win_lock_all for the whole run, MPI_Win_flush after
 *              every access
 *
 * Elements come in page-aligned chunks of CHUNK_ELEMS, each chunk attached
 * when it is first needed, so the target's region table grows while others
 * read it; with -c (the default; -C turns it off) every append also
 * attaches a scratch buffer and detaches the one attached two appends
 * before, so the table changes under the readers all the time.
 *
 * Checks: rank 0 walks the list with MPI_Get and finds every rank's -n
 * elements (default 32) exactly once, each rank's in the order it appended
 * them, and nothing else; no MPI call fails (a stale or torn region table
 * read shows as MPI_ERR_RMA_RANGE), and our btl/ofi carried gets.
 *
 * -b (benchmark mode, what contrib/bench runs for every implementation):
 * the same checks of the list, but the time per append is printed as a
 * benchmark row and our counters are reported, not required, so that
 * upstream's btl/ofi and btl/sm can be measured too.
 */
#include "common.h"

/* offsetof: Open MPI's mpi.h happens to include it, MPICH's does not */
#include <stddef.h>
#include <time.h>

#define CHUNK_ELEMS   8
#define SCRATCH_BYTES 4096
#define NO_RANK       (-1)

typedef struct {
    MPI_Aint disp;
    int rank;
    int pad;
} list_ptr_t;

typedef struct {
    list_ptr_t next;
    int64_t value; /* rank << 32 | index */
} list_elem_t;

enum lock_variant { LOCK_NOCHECK, LOCK_SHARED, LOCK_EXCLUSIVE, LOCK_ALL, NUM_VARIANTS };
static const char *const variant_names[NUM_VARIANTS] = { "nocheck", "shared", "exclusive",
                                                         "lockall" };

typedef struct {
    MPI_Win win;
    enum lock_variant variant;
    list_elem_t **chunks; /* attached chunks of this rank */
    int num_chunks;
    int used_in_chunk;
    void *scratch[2];
    long steps; /* loser follow-ups, for the log */
} list_t;

static void begin_access(list_t *l, int rank)
{
    switch (l->variant) {
    case LOCK_NOCHECK:
        TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, rank, MPI_MODE_NOCHECK, l->win));
        break;
    case LOCK_SHARED:
        TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, l->win));
        break;
    case LOCK_EXCLUSIVE:
        TC_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, l->win));
        break;
    default:
        break;
    }
}

static void end_access(list_t *l, int rank)
{
    if (LOCK_ALL == l->variant) {
        TC_MPI(MPI_Win_flush(rank, l->win));
    } else {
        TC_MPI(MPI_Win_unlock(rank, l->win));
    }
}

static MPI_Aint address_of(const void *p)
{
    MPI_Aint a = 0;
    TC_MPI(MPI_Get_address(p, &a));
    return a;
}

/* A new element of this rank, in an attached chunk; returns its pointer. */
static list_ptr_t new_element(list_t *l, int64_t value)
{
    if (0 == l->num_chunks || CHUNK_ELEMS == l->used_in_chunk) {
        void *chunk = NULL;
        if (0 != posix_memalign(&chunk, 4096, CHUNK_ELEMS * sizeof(list_elem_t))) {
            TC_FAIL("posix_memalign failed");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        memset(chunk, 0, CHUNK_ELEMS * sizeof(list_elem_t));
        l->chunks = realloc(l->chunks, (size_t) (l->num_chunks + 1) * sizeof(*l->chunks));
        if (NULL == l->chunks) {
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        l->chunks[l->num_chunks++] = chunk;
        l->used_in_chunk = 0;
        TC_MPI(MPI_Win_attach(l->win, chunk, CHUNK_ELEMS * sizeof(list_elem_t)));
    }
    list_elem_t *e = &l->chunks[l->num_chunks - 1][l->used_in_chunk++];
    e->value = value;
    e->next = (list_ptr_t){ .disp = 0, .rank = NO_RANK };
    return (list_ptr_t){ .disp = address_of(e), .rank = tc_rank };
}

/* Attach a fresh scratch buffer, detach the one of two appends ago. */
static void churn_regions(list_t *l, long step)
{
    int slot = (int) (step & 1);

    if (NULL != l->scratch[slot]) {
        TC_MPI(MPI_Win_detach(l->win, l->scratch[slot]));
        free(l->scratch[slot]);
    }
    l->scratch[slot] = tc_malloc(SCRATCH_BYTES);
    TC_MPI(MPI_Win_attach(l->win, l->scratch[slot], SCRATCH_BYTES));
}

/* Time between appends, as an application computes its next element; it
 * lets the other ranks take the tail, so appends contend. */
static void think(int usec)
{
    struct timespec ts = { .tv_sec = usec / 1000000, .tv_nsec = (usec % 1000000) * 1000L };

    if (usec > 0) {
        nanosleep(&ts, NULL);
    }
}

/* Append ELEM after the list's tail, starting the search at *TAIL; *TAIL
 * ends at ELEM. */
static void append(list_t *l, list_ptr_t *tail, list_ptr_t elem)
{
    const MPI_Aint rank_off = offsetof(list_elem_t, next.rank);
    const MPI_Aint disp_off = offsetof(list_elem_t, next.disp);

    for (;;) {
        int none = NO_RANK, found = NO_RANK - 1;

        begin_access(l, tail->rank);
        TC_MPI(MPI_Compare_and_swap(&elem.rank, &none, &found, MPI_INT, tail->rank,
                                    tail->disp + rank_off, l->win));
        end_access(l, tail->rank);
        if (NO_RANK == found) {
            MPI_Aint old = -1;
            begin_access(l, tail->rank);
            TC_MPI(MPI_Fetch_and_op(&elem.disp, &old, MPI_AINT, tail->rank, tail->disp + disp_off,
                                    MPI_REPLACE, l->win));
            end_access(l, tail->rank);
            TC_CHECK(0 == old, "next.disp of the tail at %d:%#lx was %#lx before we stored it",
                     tail->rank, (unsigned long) tail->disp, (unsigned long) old);
            *tail = elem;
            return;
        }
        if (found < 0 || found >= tc_size) {
            TC_FAIL("compare-and-swap on %d:%#lx returned next.rank %d", tail->rank,
                    (unsigned long) tail->disp, found);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        /* somebody appended first: wait for their next.disp and follow it */
        MPI_Aint next_disp = 0;
        while (0 == next_disp) {
            begin_access(l, tail->rank);
            TC_MPI(MPI_Fetch_and_op(NULL, &next_disp, MPI_AINT, tail->rank, tail->disp + disp_off,
                                    MPI_NO_OP, l->win));
            end_access(l, tail->rank);
        }
        *tail = (list_ptr_t){ .disp = next_disp, .rank = found };
        ++l->steps;
    }
}

/* Rank 0: follow the list from HEAD and check what every rank appended. */
static void walk_and_check(list_t *l, list_ptr_t head, int per_rank)
{
    int *seen = calloc((size_t) tc_size, sizeof(int));
    list_ptr_t at = head;
    long total = 0, limit = (long) per_rank * tc_size + 1;

    if (NULL == seen) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    TC_MPI(MPI_Win_lock_all(0, l->win));
    while (NO_RANK != at.rank && total < limit) {
        list_elem_t e;
        TC_MPI(MPI_Get(&e, sizeof(e), MPI_BYTE, at.rank, at.disp, sizeof(e), MPI_BYTE, l->win));
        TC_MPI(MPI_Win_flush(at.rank, l->win));
        if (total > 0) { /* the head is nobody's element */
            int owner = (int) (e.value >> 32), index = (int) (e.value & 0xffffffff);
            if (owner != at.rank) {
                TC_FAIL("element %ld at %d:%#lx holds value of rank %d", total, at.rank,
                        (unsigned long) at.disp, owner);
            } else if (index != seen[owner]) {
                TC_FAIL("element %ld: rank %d's element %d where %d was next", total, owner, index,
                        seen[owner]);
                seen[owner] = index + 1;
            } else {
                ++seen[owner];
            }
        }
        if (NO_RANK != e.next.rank && 0 == e.next.disp) {
            TC_FAIL("element %ld names rank %d with no displacement", total, e.next.rank);
            break;
        }
        at = e.next;
        ++total;
    }
    TC_MPI(MPI_Win_unlock_all(l->win));
    for (int r = 0; r < tc_size; ++r) {
        TC_CHECK(seen[r] == per_rank, "rank %d inserted %d elements, expected %d", r, seen[r],
                 per_rank);
    }
    TC_CHECK(total == limit, "the list has %ld elements after the head, expected %ld", total - 1,
             limit - 1);
    free(seen);
}

/* Collective.  What contrib/bench reads: a header, one row (the slowest
 * rank's append time over the elements of the whole list, in microseconds)
 * and our counters summed over
 * ranks, or "absent" when another BTL carried the window. */
static void print_bench_row(const list_t *l, double slowest, int per_rank)
{
    unsigned long values[TC_NUM_PVARS], sums[TC_NUM_PVARS];
    int first_missing, any_missing = 0;
    int missing = tc_read_pvar_sums(values, sums, &first_missing);

    TC_MPI(MPI_Allreduce(&missing, &any_missing, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (0 != tc_rank) {
        return;
    }
    printf("# rma_dyn_list list_%s_lat: us per list element, %d ranks x %d appends\n",
           variant_names[l->variant], tc_size, per_rank);
    printf("%8d %12.3f\n", 8, slowest * 1e6 / ((double) per_rank * tc_size));
    printf("# btl_ofi pvars (sum over ranks):");
    if (any_missing) {
        printf(" absent");
    }
    for (int i = 0; i < TC_NUM_PVARS && !any_missing; ++i) {
        printf(" %s=%lu", tc_all_pvars[i], sums[i]);
    }
    printf("\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int per_rank = 32, churn = 1, think_us = 20, bench = 0, opt;
    list_t l = { .variant = LOCK_NOCHECK };
    list_ptr_t head = { .disp = 0, .rank = 0 }, tail;
    double t0, elapsed, slowest;
    long steps = 0;

    tc_init(&argc, &argv, "rma_dyn_list");
    while ((opt = getopt(argc, argv, "n:l:w:bcC")) != -1) {
        switch (opt) {
        case 'n':
            per_rank = atoi(optarg);
            break;
        case 'w':
            think_us = atoi(optarg);
            break;
        case 'b':
            bench = 1;
            break;
        case 'c':
            churn = 1;
            break;
        case 'C':
            churn = 0;
            break;
        case 'l':
            l.variant = NUM_VARIANTS;
            for (int v = 0; v < NUM_VARIANTS; ++v) {
                if (0 == strcmp(optarg, variant_names[v])) {
                    l.variant = (enum lock_variant) v;
                }
            }
            if (NUM_VARIANTS == l.variant) {
                TC_FAIL("-l takes nocheck, shared, exclusive or lockall, not %s", optarg);
                l.variant = LOCK_NOCHECK;
            }
            break;
        default:
            TC_FAIL("usage: rma_dyn_list [-n per-rank] [-l variant] [-w think-usec] [-b] [-c|-C]");
        }
    }
    if (per_rank < 1 || per_rank > 100000) {
        TC_FAIL("-n takes 1 to 100000, not %d", per_rank);
        per_rank = 32;
    }
    TC_MPI(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &l.win));
    tc_win_errors_return(l.win);

    if (0 == tc_rank) {
        /* the head: an element of nobody, value -1 */
        head = new_element(&l, -1);
    }
    TC_MPI(MPI_Bcast(&head.disp, 1, MPI_AINT, 0, MPI_COMM_WORLD));
    head.rank = 0;
    tail = head;
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));

    tc_phase("%d ranks append %d elements each, %s locks%s", tc_size, per_rank,
             variant_names[l.variant], churn ? ", regions churning" : "");
    if (LOCK_ALL == l.variant) {
        TC_MPI(MPI_Win_lock_all(0, l.win));
    }
    t0 = MPI_Wtime();
    for (int i = 0; i < per_rank; ++i) {
        list_ptr_t elem = new_element(&l, ((int64_t) tc_rank << 32) | i);
        append(&l, &tail, elem);
        if (churn) {
            churn_regions(&l, i);
        }
        think(think_us);
    }
    elapsed = MPI_Wtime() - t0;
    if (LOCK_ALL == l.variant) {
        TC_MPI(MPI_Win_unlock_all(l.win));
    }
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    TC_MPI(MPI_Reduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    TC_MPI(MPI_Reduce(&l.steps, &steps, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
    if (0 == tc_rank) {
        walk_and_check(&l, head, per_rank);
        printf("rma_dyn_list: variant %s np %d elements %d append_s %.4f follow_ups %ld\n",
               variant_names[l.variant], tc_size, per_rank * tc_size, slowest, steps);
    }
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (bench) {
        print_bench_row(&l, slowest, per_rank);
    } else {
        tc_expect_pvars(TC_PVAR_SUM, "get_count");
    }

    for (int s = 0; s < 2; ++s) {
        if (NULL != l.scratch[s]) {
            TC_MPI(MPI_Win_detach(l.win, l.scratch[s]));
            free(l.scratch[s]);
        }
    }
    for (int c = 0; c < l.num_chunks; ++c) {
        TC_MPI(MPI_Win_detach(l.win, l.chunks[c]));
    }
    TC_MPI(MPI_Win_free(&l.win));
    for (int c = 0; c < l.num_chunks; ++c) {
        free(l.chunks[c]);
    }
    free(l.chunks);
    return tc_finish();
}
