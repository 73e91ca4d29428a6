/*
 * Windows created and freed 1000 times in a row, rotating through the three
 * flavours, with one put and one get through each so that every window
 * registers memory with the BTL and uses it.  Leaked registrations, keys or
 * endpoints show as failures late in the loop or as resident memory that
 * grows: the count and the resident set size at start and end are printed.
 *
 * A loaded, oversubscribed machine may not manage 1000 windows in the time
 * a CI test deserves: the loop stops after TIME_BUDGET seconds and says how
 * far it got.
 */
#include "common.h"

#define ITERATIONS       1000
#define TIME_BUDGET      20.0
#define CHECK_TIME_EVERY 25
#define WIN_BYTES        (64 * 1024)
/* Resident memory may grow a little (allocator caches, free lists); this
 * much over the loop is a leak. */
#define RSS_GROWTH_LIMIT_KIB (128 * 1024)

static int64_t value_of(int origin, int iteration)
{
    return ((int64_t) origin << 32) | (int64_t) (iteration + 1);
}

static void churn_once(int iteration)
{
    const int right = (tc_rank + 1) % tc_size, left = (tc_rank + tc_size - 1) % tc_size;
    /* at an odd offset in the window, different each time */
    const size_t offset = (size_t) (iteration * 8 + 3) % (WIN_BYTES - 16);
    enum tc_flavour flavour = (enum tc_flavour)(iteration % TC_NUM_FLAVOURS);
    int64_t out = value_of(tc_rank, iteration), in = 0, got;
    tc_window_t w;
    char what[128];

    tc_window_open(&w, flavour, WIN_BYTES);
    TC_MPI(MPI_Win_fence(0, w.win));
    TC_MPI(MPI_Put(&out, 1, MPI_INT64_T, right, tc_disp(&w, right, offset), 1, MPI_INT64_T, w.win));
    TC_MPI(MPI_Win_fence(0, w.win));
    TC_MPI(MPI_Get(&in, 1, MPI_INT64_T, right, tc_disp(&w, right, offset), 1, MPI_INT64_T, w.win));
    TC_MPI(MPI_Win_fence(0, w.win));
    memcpy(&got, w.base + offset, sizeof(got));
    snprintf(what, sizeof(what), "window %d (%s): value put by rank %d", iteration,
             tc_flavour_names[flavour], left);
    TC_CHECK_EQ_INT(what, value_of(left, iteration), got);
    snprintf(what, sizeof(what), "window %d (%s): value read back from rank %d", iteration,
             tc_flavour_names[flavour], right);
    TC_CHECK_EQ_INT(what, out, in);
    tc_window_close(&w);
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "rma_win_churn");

    /* one window first, so that one-time setup does not count as growth */
    churn_once(0);
    long rss_start = tc_rss_kib();
    double t0 = MPI_Wtime();
    int done = 1;
    while (done < ITERATIONS) {
        churn_once(done);
        ++done;
        if (done % CHECK_TIME_EVERY == 0) {
            /* every rank must stop at the same iteration */
            int out_of_time = MPI_Wtime() - t0 > TIME_BUDGET, any = 0;
            TC_MPI(MPI_Allreduce(&out_of_time, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD));
            if (any) {
                break;
            }
        }
    }
    double elapsed = MPI_Wtime() - t0;
    long rss_end = tc_rss_kib();

    long growth = rss_end - rss_start, max_growth = 0;
    TC_MPI(MPI_Reduce(&growth, &max_growth, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD));
    tc_phase("%d of %d windows created and freed in %.2fs%s; rank 0 resident memory %ld KiB "
             "after the first, %ld KiB at the end; largest growth on any rank %ld KiB",
             done, ITERATIONS, elapsed, done < ITERATIONS ? " (stopped at the time budget)" : "",
             rss_start, rss_end, max_growth);
    TC_CHECK(growth <= RSS_GROWTH_LIMIT_KIB,
             "resident memory grew by %ld KiB over %d windows: a leak", growth, done);

    tc_expect_pvars(TC_PVAR_THIS_RANK, "put_count get_count");
    return tc_finish();
}
