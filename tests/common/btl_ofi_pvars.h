/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * Reading btl/ofi's MPI_T performance variables: the one reader shared by
 * the test programs (tests/mpi, tests/robustness, tests/hosts), the MPI
 * benchmarks (bench/) and the in-tree lane's program (contrib/intree-test.c).
 *
 * One MPI_T session per process, opened right after MPI_Init(_thread) with
 * a handle for every counter our component registers (upstream's btl/ofi
 * registers none, so a counter that is absent means "not our component").
 * A counter handle reads what was counted since it was allocated, which is
 * why all handles are allocated at open, before any traffic.
 *
 * MPI_T is initialised at the thread level MPI_Query_thread() returns:
 * Open MPI 5.0.7's MPI_T_init_thread sets the library's thread level to
 * the one it is given, and a lower one under MPI_THREAD_MULTIPLE turns on
 * ob1's single-thread shortcuts (two threads then share one receive
 * request).
 *
 * Counters are named without the "btl_ofi_" prefix ("put_count").  The
 * per-NIC counters (nic_send_bytes, ...) hold one value per module; read
 * summed they give the total over modules.
 */

#ifndef BTL_OFI_TESTS_PVARS_H
#define BTL_OFI_TESTS_PVARS_H

#include <stdio.h>

/** Most values (modules) one counter may hold. */
#define BTL_OFI_PVARS_MAX_VALUES 16

/** The counters every run of our component moves or registers, in the
 * order the test and benchmark reports print them. */
extern const char *const btl_ofi_pvars_standard[];
#define BTL_OFI_PVARS_NUM_STANDARD 15

/**
 * Start MPI_T (at MPI's thread level) and allocate a handle for every
 * counter of ours that exists.  Call after MPI_Init(_thread), before the
 * traffic to be counted.
 *
 * @return 0 when the MPI_T session is open (even if no counter of ours
 *         exists), -1 when MPI_T could not be started
 */
int btl_ofi_pvars_open(void);

/** Free the handles and the session and finalize MPI_T (before
 * MPI_Finalize); a no-op when not open. */
void btl_ofi_pvars_close(void);

/**
 * How many values counter NAME holds: 1 for the global counters, one per
 * module for the nic_ ones; 0 when it does not exist (or MPI_T is not
 * open).  A count above BTL_OFI_PVARS_MAX_VALUES is returned but such a
 * counter cannot be read.
 */
int btl_ofi_pvars_count(const char *name);

/**
 * Counter NAME since open, summed over its values, into *SUM.
 * @return 0 on success, -1 when it does not exist or cannot be read
 */
int btl_ofi_pvars_read(const char *name, unsigned long *sum);

/** Counter NAME summed over its values; -1 when it does not exist. */
long btl_ofi_pvars_get(const char *name);

/**
 * Counter NAME per value (per NIC: module by module) into VALUES, which
 * holds MAX entries.
 * @return the number of values written, -1 when it does not exist, cannot
 *         be read or holds more than MAX values
 */
int btl_ofi_pvars_read_each(const char *name, unsigned long *values, int max);

/** Provider memory registrations btl/ofi holds now, cached ones included
 * (mr_count - mr_release_count); -1 without our component. */
long btl_ofi_pvars_mr_held(void);

/**
 * The line the robustness scripts parse (tests/robustness/lib.sh:
 * faults_sum), absent counters as -1, mr_held = mr_count -
 * mr_release_count:
 *   PVARS rank=R put=.. get=.. atomic=.. send=.. recv=.. flush=.. retry=..
 *   error=.. mr_held=..
 * Flushes OUT.
 */
void btl_ofi_pvars_print(FILE *out, int rank);

#endif /* BTL_OFI_TESTS_PVARS_H */
