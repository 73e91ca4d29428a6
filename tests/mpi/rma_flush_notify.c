/*
 * What MPI_Win_flush promises a third process.  Once flush returns, the
 * put is complete at the target too, so a process that learns of it by a
 * message and then reads the target must find the new value: the pattern of
 * producer/consumer codes that publish through a window and notify through
 * messages.
 *
 * np >= 3.  Rank 0, the writer, puts a value into slot r of rank 1's window
 * (the target), flushes, then sends r to every observer (ranks 2 and up).
 * Each observer, once it has the message, gets slot r from the target,
 * flushes and checks the value.  Every round has a slot of its own, so a
 * read that overtook the put finds 0.  The target takes no part: it
 * computes outside MPI (default) or waits in MPI_Barrier (-m), until the
 * writer, done, puts a stop flag into its window.
 *
 * Options: -r rounds (default 500), -m target waits in MPI, -d dynamic
 * window instead of MPI_Win_create, -T seconds before the target gives up
 * computing (default 60).
 */
#include "common.h"

enum { WRITER, TARGET, FIRST_OBSERVER };

typedef struct {
    int rounds;
    int target_in_mpi;
    enum tc_flavour flavour;
    double give_up_s;
} options_t;

static int64_t round_value(int r)
{
    return ((int64_t) 0x5eed << 32) | (int64_t) (r + 1);
}

/* The target: busy outside MPI until the writer's stop flag lands. */
static void compute_until_stopped(const volatile int64_t *stop, double give_up_s)
{
    volatile double x = 1.0;
    double deadline = tc_now() + give_up_s;

    while (0 == *stop) {
        tc_compute_slice(&x);
        if (tc_now() > deadline) {
            TC_FAIL("the writer's stop flag did not arrive within %.0f s", give_up_s);
            return;
        }
    }
}

static void write_and_notify(const tc_window_t *w, const options_t *o, size_t stop_offset)
{
    const int64_t stop = 1;

    TC_MPI(MPI_Win_lock_all(0, w->win));
    for (int r = 0; r < o->rounds; ++r) {
        int64_t value = round_value(r);

        TC_MPI(MPI_Put(&value, 1, MPI_INT64_T, TARGET, tc_disp(w, TARGET, (size_t) r * 8), 1,
                       MPI_INT64_T, w->win));
        TC_MPI(MPI_Win_flush(TARGET, w->win));
        for (int obs = FIRST_OBSERVER; obs < tc_size; ++obs) {
            TC_MPI(MPI_Send(&r, 1, MPI_INT, obs, 0, MPI_COMM_WORLD));
        }
    }
    TC_MPI(MPI_Put(&stop, 1, MPI_INT64_T, TARGET, tc_disp(w, TARGET, stop_offset), 1, MPI_INT64_T,
                   w->win));
    TC_MPI(MPI_Win_unlock_all(w->win));
}

static void observe(const tc_window_t *w, const options_t *o)
{
    long stale = 0;

    TC_MPI(MPI_Win_lock_all(0, w->win));
    for (int r = 0; r < o->rounds; ++r) {
        int64_t found = -1;
        int announced = -1;

        TC_MPI(MPI_Recv(&announced, 1, MPI_INT, WRITER, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        TC_CHECK_EQ_INT("announced round", r, announced);
        TC_MPI(MPI_Get(&found, 1, MPI_INT64_T, TARGET, tc_disp(w, TARGET, (size_t) r * 8), 1,
                       MPI_INT64_T, w->win));
        TC_MPI(MPI_Win_flush(TARGET, w->win));
        if (found != round_value(r)) {
            ++stale;
            TC_FAIL("round %d: the writer's flush had returned, yet the target's slot holds "
                    "0x%" PRIx64 ", not 0x%" PRIx64,
                    r, (uint64_t) found, (uint64_t) round_value(r));
        }
    }
    TC_MPI(MPI_Win_unlock_all(w->win));
    tc_phase("observer %d: %d rounds, %ld stale reads", tc_rank, o->rounds, stale);
}

static void parse(int argc, char **argv, options_t *o)
{
    int opt;

    while ((opt = getopt(argc, argv, "r:mdT:")) != -1) {
        switch (opt) {
        case 'r':
            o->rounds = atoi(optarg);
            break;
        case 'm':
            o->target_in_mpi = 1;
            break;
        case 'd':
            o->flavour = TC_WIN_DYNAMIC;
            break;
        case 'T':
            o->give_up_s = atof(optarg);
            break;
        default:
            if (0 == tc_rank) {
                fprintf(stderr, "usage: rma_flush_notify [-r rounds] [-m] [-d] [-T seconds]\n");
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (o->rounds < 1) {
        o->rounds = 1;
    }
}

int main(int argc, char **argv)
{
    options_t o = { .rounds = 500, .flavour = TC_WIN_CREATE, .give_up_s = 60.0 };
    tc_window_t w;
    size_t stop_offset;

    tc_init(&argc, &argv, "rma_flush_notify");
    parse(argc, argv, &o);
    if (tc_size < 3) {
        TC_FAIL("needs at least 3 ranks (writer, target, observers), got %d", tc_size);
        return tc_finish();
    }
    stop_offset = (size_t) o.rounds * 8;
    tc_window_open(&w, o.flavour, stop_offset + 8);
    tc_phase("%s window, %d rounds, target %s", tc_flavour_names[o.flavour], o.rounds,
             o.target_in_mpi ? "in MPI_Barrier" : "computing outside MPI");
    if (WRITER == tc_rank) {
        write_and_notify(&w, &o, stop_offset);
    } else if (TARGET == tc_rank) {
        if (!o.target_in_mpi) {
            compute_until_stopped((const volatile int64_t *) (w.base + stop_offset), o.give_up_s);
        }
    } else {
        observe(&w, &o);
    }
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (TARGET == tc_rank) {
        for (int r = 0; r < o.rounds; ++r) {
            int64_t v;
            memcpy(&v, w.base + (size_t) r * 8, sizeof(v));
            TC_CHECK(v == round_value(r), "slot %d holds 0x%" PRIx64 " after the run", r,
                     (uint64_t) v);
        }
    }
    tc_expect_pvars(TC_PVAR_SUM, "put_count,get_count");
    tc_window_close(&w);
    return tc_finish();
}
