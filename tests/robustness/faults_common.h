/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * Helpers shared by the robustness test programs: btl/ofi's MPI_T counters
 * (through tests/common/btl_ofi_pvars.h), reporting MPI errors returned
 * under MPI_ERRORS_RETURN, and the one-line summaries the scripts parse.
 *
 * Lines the scripts read (one per rank):
 *   PVARS rank=R put=.. get=.. atomic=.. send=.. recv=.. flush=.. retry=.. error=.. mr_held=..
 *   RESULT rank=R ops=N mpi_errors=E mismatches=M
 * Exit status: 0 clean, 2 MPI calls returned errors (reported), 3 wrong
 * data without any error reported, 1 usage or setup problem.
 *
 * With FAULTS_ABORT_ON_ERROR=1 in the environment the first MPI error is
 * reported ("MPI_ERROR ...", then "RESULT ...") and the job ends with
 * MPI_Abort(MPI_COMM_WORLD, 2): after an error MPI's state is undefined,
 * so carrying on would test the application, not the library.
 */

#ifndef FAULTS_COMMON_H
#define FAULTS_COMMON_H

#include <mpi.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "btl_ofi_pvars.h"

static int fc_rank = -1;
static long fc_mpi_errors;
static long fc_mismatches;
static long fc_ops_so_far;

/* Called right after MPI_Init_thread: the counters exist only with our
 * component loaded; absent ones read as -1.  MPI_T starts at the thread
 * level MPI_Init_thread gave (see tests/common/btl_ofi_pvars.h). */
static inline void fc_pvars_init(void)
{
    (void) btl_ofi_pvars_open();
}

static inline void fc_print_pvars(void)
{
    btl_ofi_pvars_print(stdout, fc_rank);
}

static inline void fc_pvars_fini(void)
{
    btl_ofi_pvars_close();
}

/** "COMPONENT rank=R path=..." for every mca_btl_ofi.so mapped in this
 * process: proves which build of the component is loaded. */
static inline void fc_print_component_path(void)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[4096], last[4096] = "";

    if (NULL == maps) {
        return;
    }
    while (NULL != fgets(line, sizeof(line), maps)) {
        char *path = strchr(line, '/');
        if (NULL != path && NULL != strstr(path, "mca_btl_ofi.so") && 0 != strcmp(path, last)) {
            snprintf(last, sizeof(last), "%s", path);
            printf("COMPONENT rank=%d path=%s", fc_rank, path);
        }
    }
    fclose(maps);
    fflush(stdout);
}

/** Check an MPI return code; errors are counted and reported, not fatal. */
static inline int fc_check(int rc, const char *what, int line)
{
    if (MPI_SUCCESS != rc) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        ++fc_mpi_errors;
        if (fc_mpi_errors <= 10) {
            printf("MPI_ERROR rank=%d line=%d call=%s: %s\n", fc_rank, line, what, msg);
            fflush(stdout);
        }
        const char *abort_env = getenv("FAULTS_ABORT_ON_ERROR");
        if (NULL != abort_env && '1' == abort_env[0]) {
            fc_print_pvars();
            printf("RESULT rank=%d ops=%ld mpi_errors=%ld mismatches=%ld aborting=1\n", fc_rank,
                   fc_ops_so_far, fc_mpi_errors, fc_mismatches);
            fflush(stdout);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    return rc;
}
#define FC(call) fc_check((call), #call, __LINE__)

static inline void fc_mismatch(const char *fmt, ...)
{
    va_list ap;
    ++fc_mismatches;
    if (fc_mismatches <= 10) {
        printf("MISMATCH rank=%d: ", fc_rank);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
        fflush(stdout);
    }
}

static inline double fc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

/** RESULT line and exit status, see the file comment. */
static inline int fc_result(long ops)
{
    printf("RESULT rank=%d ops=%ld mpi_errors=%ld mismatches=%ld\n", fc_rank, ops, fc_mpi_errors,
           fc_mismatches);
    fflush(stdout);
    if (fc_mpi_errors > 0) {
        return 2;
    }
    return fc_mismatches > 0 ? 3 : 0;
}

#endif /* FAULTS_COMMON_H */
