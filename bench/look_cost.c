/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * What one look of a progress thread costs the computation it shares a
 * core with, without MPI or libfabric: the part that is the timer's
 * wake-up and the two context switches, and the part that is a colder
 * cache.  The main thread runs bench/compute_work.h's fixed work alone,
 * then with a second thread pinned to the same CPU that wakes every
 * PERIOD microseconds (ppoll, as our progress thread does) and, with
 * -k KIB, reads and writes KIB of its own memory on each wake-up (what a
 * provider's progress call touches); rounds alternate, medians are
 * compared.
 *
 *   look_cost [-p PERIOD_US] [-n WORK] [-k KIB] [-r ROUNDS]
 *
 * Prints: LOOK period_us=P kib=K alone_s=.. shared_s=.. wakes_per_s=..
 * cost_per_wake_us=.. tax=..
 * (contrib/bench --tax runs the MPI side: bench/tax.py.)
 */

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compute_work.h"

static struct {
    int period_us;
    size_t touch_bytes;
    volatile int stop;
    long wakes;
    int cpu;
} looker;

static void pin_to(int cpu)
{
    cpu_set_t set;

    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void) sched_setaffinity(0, sizeof(set), &set);
}

static void *look_main(void *arg)
{
    struct timespec period = { .tv_sec = 0, .tv_nsec = 0 };
    unsigned char *mine = NULL;

    (void) arg;
    pin_to(looker.cpu);
    period.tv_sec = looker.period_us / 1000000;
    period.tv_nsec = (long) (looker.period_us % 1000000) * 1000;
    if (looker.touch_bytes > 0) {
        mine = calloc(1, looker.touch_bytes);
    }
    while (!looker.stop) {
        (void) ppoll(NULL, 0, &period, NULL);
        if (NULL != mine) {
            for (size_t i = 0; i < looker.touch_bytes; i += 64) {
                mine[i] = (unsigned char) (mine[i] + 1);
            }
        }
        ++looker.wakes;
    }
    free(mine);
    return NULL;
}

static double timed_work(long units, int with_looker, long *wakes)
{
    pthread_t thread;
    double t0, took;

    looker.stop = 0;
    looker.wakes = 0;
    if (with_looker && 0 != pthread_create(&thread, NULL, look_main, NULL)) {
        perror("pthread_create");
        exit(1);
    }
    t0 = compute_work_now();
    if (compute_work(units) == 42.0) {
        printf("(unlikely)\n");
    }
    took = compute_work_now() - t0;
    if (with_looker) {
        looker.stop = 1;
        pthread_join(thread, NULL);
        *wakes = looker.wakes;
    }
    return took;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long units = 8000, wakes = 0, total_wakes = 0;
    int rounds = 5, opt;
    double alone[64], shared[64], a, s, shared_total = 0.0;

    looker.period_us = 100;
    while ((opt = getopt(argc, argv, "p:n:k:r:")) != -1) {
        switch (opt) {
        case 'p':
            looker.period_us = atoi(optarg);
            break;
        case 'n':
            units = atol(optarg);
            break;
        case 'k':
            looker.touch_bytes = (size_t) atol(optarg) * 1024;
            break;
        case 'r':
            rounds = atoi(optarg);
            break;
        default:
            fprintf(stderr, "usage: look_cost [-p PERIOD_US] [-n WORK] [-k KIB] [-r ROUNDS]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > 64 || looker.period_us < 1) {
        fprintf(stderr, "look_cost: rounds 1..64, period >= 1 us\n");
        return 2;
    }
    looker.cpu = sched_getcpu();
    pin_to(looker.cpu);
    for (int r = 0; r < rounds; ++r) {
        alone[r] = timed_work(units, 0, NULL);
        shared[r] = timed_work(units, 1, &wakes);
        total_wakes += wakes;
        shared_total += shared[r];
    }
    qsort(alone, (size_t) rounds, sizeof(double), compare_double);
    qsort(shared, (size_t) rounds, sizeof(double), compare_double);
    a = alone[rounds / 2];
    s = shared[rounds / 2];
    printf("LOOK period_us=%d kib=%zu alone_s=%.4f shared_s=%.4f wakes_per_s=%.0f "
           "cost_per_wake_us=%.2f tax=%.4f\n",
           looker.period_us, looker.touch_bytes / 1024, a, s, (double) total_wakes / shared_total,
           1e6 * (s - a) / ((double) total_wakes / shared_total * s), s / a);
    return 0;
}
