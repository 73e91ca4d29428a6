/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * What an MPI library's progress costs a rank that computes: every rank
 * runs the same fixed work with no MPI call inside and reports how long it
 * took; bench/tax.py compares the times of one configuration against
 * another (ours with and without its progress thread, btl/sm, upstream,
 * MPICH).
 *
 *   compute_tax [-w] [-s PERIOD_US | -i] [-n WORK] [-m]
 *
 *   -w      create an MPI_Win_create window and open an MPI_Win_lock_all
 *           epoch before computing, as an RMA code would
 *   -s P    serve: rank 0 does not compute but puts 8 bytes into rank 1's
 *           window and flushes every P microseconds until rank 1 has
 *           computed, asleep in between (implies -w; np 2)
 *   -i      idle: the same without the puts (rank 0 only looks every
 *           100 us whether rank 1 is done): the time to compare -s with
 *   -n N    units of work (each a pass over a 256 KiB array; default 4000)
 *   -m      ask for MPI_THREAD_MULTIPLE (MPICH's asynchronous progress
 *           needs it)
 *
 * Output, from rank 0: one line
 *   TAX window=W serve=P ranks=R median_s=.. max_s=.. served=N threads_ms=T
 * where the times are the computing ranks' and served counts the puts
 * that completed while rank 1 computed; T is the most CPU time, over the
 * computing ranks, that a rank's other threads (a progress thread, ours or
 * a provider's) ran while it computed: the thread's share without the
 * launch-to-launch noise of the compute times.  How fast one vCPU computes here
 * depends on what the other does (up to 2 x), so -s is compared with -i,
 * never with both ranks computing.  Also each rank's btl/ofi
 * counters (PVARS lines) where btl/ofi is loaded.
 */

#include <dirent.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "btl_ofi_pvars.h"
#include "compute_work.h"

enum { SLOT_DATA, SLOTS };

#define now_s compute_work_now

static void die(const char *msg)
{
    fprintf(stderr, "compute_tax: %s\n", msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* Nanoseconds that this process's threads other than the caller have run
 * (the first field of each task's schedstat); -1 without /proc. */
static long long other_threads_ns(void)
{
    char path[64], self[24];
    long long total = 0, ns;
    struct dirent *e;
    DIR *d = opendir("/proc/self/task");

    if (NULL == d) {
        return -1;
    }
    snprintf(self, sizeof(self), "%ld", (long) syscall(SYS_gettid));
    while (NULL != (e = readdir(d))) {
        FILE *f;
        if ('.' == e->d_name[0] || 0 == strcmp(e->d_name, self)) {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/self/task/%.32s/schedstat", e->d_name);
        if (NULL != (f = fopen(path, "r"))) {
            if (1 == fscanf(f, "%lld", &ns)) {
                total += ns;
            }
            fclose(f);
        }
    }
    closedir(d);
    return total;
}

static void sleep_until(double when)
{
    struct timespec t;
    double left = when - now_s();

    if (left > 0.0) {
        t.tv_sec = (time_t) left;
        t.tv_nsec = (long) ((left - (double) t.tv_sec) * 1e9);
        nanosleep(&t, NULL);
    }
}

/* Rank 0 while rank 1 computes: every period_us, one 8-byte put and a
 * flush when serving (period_us > 0), then a test of the barrier rank 1
 * enters once it has computed; asleep in between, no MPI call, so that it
 * takes nothing from the computing rank's core or its SMT sibling.
 * Returns the puts that completed before rank 1 was done. */
static long attend(MPI_Win win, double period_us, bool serving)
{
    MPI_Request done;
    int finished = 0;
    int64_t value = 0;
    long served = 0;
    double next = now_s();

    MPI_Ibarrier(MPI_COMM_WORLD, &done);
    while (!finished) {
        if (serving) {
            ++value;
            MPI_Put(&value, 1, MPI_INT64_T, 1, SLOT_DATA, 1, MPI_INT64_T, win);
            MPI_Win_flush(1, win);
        }
        MPI_Test(&done, &finished, MPI_STATUS_IGNORE);
        served += serving && !finished;
        next += 1e-6 * period_us;
        sleep_until(next);
    }
    return served;
}

int main(int argc, char **argv)
{
    int rank, size, opt, window = 0, multiple = 0, idle = 0, provided;
    long units = 4000, served = 0;
    double period_us = 0.0, took, *all = NULL, sink, threads_ms = -1.0, *all_threads = NULL;
    long long threads_before;
    int64_t *mine = NULL;
    MPI_Win win = MPI_WIN_NULL;

    while ((opt = getopt(argc, argv, "ws:in:m")) != -1) {
        switch (opt) {
        case 'w':
            window = 1;
            break;
        case 's':
            period_us = atof(optarg);
            window = 1;
            break;
        case 'i':
            idle = 1;
            period_us = 100.0;
            window = 1;
            break;
        case 'n':
            units = atol(optarg);
            break;
        case 'm':
            multiple = 1;
            break;
        default:
            fprintf(stderr, "usage: compute_tax [-w] [-s PERIOD_US | -i] [-n WORK] [-m]\n");
            return 2;
        }
    }
    MPI_Init_thread(&argc, &argv, multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    (void) btl_ofi_pvars_open(); /* counts from here on: the look counts show the thread's cost */
    if (period_us > 0.0 && size != 2) {
        die("-s and -i need exactly 2 ranks");
    }
    if (window) {
        MPI_Alloc_mem(SLOTS * sizeof(int64_t), MPI_INFO_NULL, &mine);
        memset(mine, 0, SLOTS * sizeof(int64_t));
        MPI_Win_create(mine, SLOTS * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL,
                       MPI_COMM_WORLD, &win);
        MPI_Win_lock_all(0, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    took = now_s();
    if (period_us > 0.0 && 0 == rank) {
        served = attend(win, period_us, !idle);
        took = -1.0; /* not a computing rank */
    } else {
        threads_before = other_threads_ns();
        sink = compute_work(units);
        took = now_s() - took;
        if (threads_before >= 0) {
            threads_ms = 1e-6 * (double) (other_threads_ns() - threads_before);
        }
        if (sink == 42.0) {
            printf("(unlikely)\n");
        }
        if (period_us > 0.0) {
            MPI_Request done;
            MPI_Ibarrier(MPI_COMM_WORLD, &done);
            MPI_Wait(&done, MPI_STATUS_IGNORE);
        }
    }

    if (0 == rank) {
        all = malloc((size_t) size * sizeof(double));
        all_threads = malloc((size_t) size * sizeof(double));
    }
    MPI_Gather(&took, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Gather(&threads_ms, 1, MPI_DOUBLE, all_threads, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (0 == rank) {
        double t[64], max = 0.0, threads_max = 0.0;
        int n = 0;

        for (int r = 0; r < size && n < 64; ++r) {
            if (all[r] >= 0.0) {
                t[n++] = all[r];
                max = all[r] > max ? all[r] : max;
                threads_max = all_threads[r] > threads_max ? all_threads[r] : threads_max;
            }
        }
        for (int i = 1; i < n; ++i) { /* insertion sort: a handful of ranks */
            double v = t[i];
            int j = i - 1;
            for (; j >= 0 && t[j] > v; --j) {
                t[j + 1] = t[j];
            }
            t[j + 1] = v;
        }
        printf("TAX window=%d serve=%.0f ranks=%d median_s=%.4f max_s=%.4f served=%ld "
               "threads_ms=%.3f\n",
               window, idle ? 0.0 : period_us, n,
               n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]), max, served, threads_max);
        fflush(stdout);
        free(all);
        free(all_threads);
    }
    if (window) {
        MPI_Win_unlock_all(win);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    btl_ofi_pvars_print(stdout, rank);
    btl_ofi_pvars_close();
    if (window) {
        MPI_Win_free(&win);
        MPI_Free_mem(mine);
    }
    MPI_Finalize();
    return 0;
}
