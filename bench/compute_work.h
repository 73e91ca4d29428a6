/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/* The fixed computation of bench/compute_tax.c and bench/look_cost.c:
 * what a thread that shares the core costs shows as time, cache misses
 * included.  Header-only: each program is one translation unit. */
#ifndef BTL_OFI_BENCH_COMPUTE_WORK_H
#define BTL_OFI_BENCH_COMPUTE_WORK_H

#include <stddef.h>
#include <time.h>

#define COMPUTE_WORK_DOUBLES (256 * 1024 / sizeof(double))

static inline double compute_work_now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec + 1e-9 * (double) t.tv_nsec;
}

/* @p units passes over a 256 KiB array (about 0.15 ms each here). */
static inline double compute_work(long units)
{
    static double a[COMPUTE_WORK_DOUBLES];
    double x = 1.0;

    for (size_t i = 0; i < COMPUTE_WORK_DOUBLES; ++i) {
        a[i] = (double) i;
    }
    for (long u = 0; u < units; ++u) {
        for (size_t i = 0; i < COMPUTE_WORK_DOUBLES; ++i) {
            a[i] = a[i] * 0.999999 + x;
            x = a[i] * 1e-9;
        }
    }
    return x + a[COMPUTE_WORK_DOUBLES / 2];
}

#endif
