/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 *
 * An LD_PRELOAD shim for the ranks of a job: one rank (PMIX_RANK equal to
 * BTL_OFI_FENCE_DELAY_RANK, default 1) gets the release of every
 * PMIx_Fence_nb it calls BTL_OFI_FENCE_DELAY_MS late (default 300), held in
 * PMIx's callback while the rank's main thread keeps calling opal_progress()
 * in its wait loop.  Where the launcher's fences without data do not wait
 * for every node (Slurm 22.05's, see docs/slurm.md), the other ranks leave
 * MPI_Init and send while the held rank still waits in the fence of its
 * modex, before MPI_COMM_WORLD was handed to the PML: the start-up crash that
 * appeared under srun about once in 25-60 launches, made to happen every
 * time.
 *
 * Every rank prints one line a fence, which tests/slurm/slurm.sh reads to
 * see that the shim ran and that a peer did pass a fence while the held
 * rank was still in the one before:
 *
 *   fence_delay: rank R fence K released T [held MS ms]
 *
 * T is CLOCK_REALTIME in seconds (the simulated hosts share one clock).
 * No PMIx header: the one call it wraps takes pointers, sizes and a
 * callback in every PMIx version Open MPI 4.1 and 5.0 use.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef int pmix_status_t;
typedef void (*op_cbfunc_t)(pmix_status_t status, void *cbdata);
typedef pmix_status_t (*fence_nb_fn_t)(const void *procs, size_t nprocs, const void *info,
                                       size_t ninfo, op_cbfunc_t cbfunc, void *cbdata);

pmix_status_t PMIx_Fence_nb(const void *procs, size_t nprocs, const void *info, size_t ninfo,
                            op_cbfunc_t cbfunc, void *cbdata);

/** What a wrapped fence hands its own callback. */
typedef struct {
    op_cbfunc_t cbfunc;
    void *cbdata;
    int number;
} fence_t;

static int fences;

static int env_int(const char *name, int fallback)
{
    const char *value = getenv(name);

    return (NULL != value && '\0' != value[0]) ? atoi(value) : fallback;
}

static void fence_released(pmix_status_t status, void *arg)
{
    fence_t *fence = arg;
    int rank = env_int("PMIX_RANK", -1);
    int delay_ms = env_int("BTL_OFI_FENCE_DELAY_MS", 300);
    int held = rank == env_int("BTL_OFI_FENCE_DELAY_RANK", 1);
    struct timespec now;

    if (held) {
        usleep((useconds_t) delay_ms * 1000);
    }
    clock_gettime(CLOCK_REALTIME, &now);
    if (held) {
        fprintf(stderr, "fence_delay: rank %d fence %d released %ld.%06ld held %d ms\n", rank,
                fence->number, (long) now.tv_sec, now.tv_nsec / 1000, delay_ms);
    } else {
        fprintf(stderr, "fence_delay: rank %d fence %d released %ld.%06ld\n", rank, fence->number,
                (long) now.tv_sec, now.tv_nsec / 1000);
    }
    fence->cbfunc(status, fence->cbdata);
    free(fence);
}

pmix_status_t PMIx_Fence_nb(const void *procs, size_t nprocs, const void *info, size_t ninfo,
                            op_cbfunc_t cbfunc, void *cbdata)
{
    static fence_nb_fn_t next;
    fence_t *fence;
    pmix_status_t rc;

    if (NULL == next) {
        next = (fence_nb_fn_t) dlsym(RTLD_NEXT, "PMIx_Fence_nb");
        if (NULL == next) {
            return -1; /* PMIX_ERROR: no PMIx library behind this one */
        }
    }
    fence = malloc(sizeof(*fence));
    if (NULL == cbfunc || NULL == fence) {
        free(fence);
        return next(procs, nprocs, info, ninfo, cbfunc, cbdata);
    }
    fence->cbfunc = cbfunc;
    fence->cbdata = cbdata;
    fence->number = ++fences;
    rc = next(procs, nprocs, info, ninfo, fence_released, fence);
    if (0 != rc) {
        /* not started (or done at once, PMIX_OPERATION_SUCCEEDED): no callback comes */
        free(fence);
    }
    return rc;
}
