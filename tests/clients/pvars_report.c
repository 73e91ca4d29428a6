/* -*- Mode: C; c-basic-offset:4 ; indent-tabs-mode:nil -*- */
/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * $HEADER$
 */

/*
 * A PMPI layer that contrib/setup --clients links into the programs of a
 * client library (ARMCI-MPI's tests and benchmarks), which we do not edit:
 * it opens btl/ofi's MPI_T counters right after MPI_Init(_thread) and
 * prints them at MPI_Finalize, one "PVARS rank=R put=.. get=.. atomic=.."
 * line per rank (tests/common/btl_ofi_pvars.h), so that the clients lane can
 * tell that our component carried the traffic (every counter reads -1
 * when another BTL did).  Linked as an object, not preloaded: the
 * program's own MPI_Init and MPI_Finalize symbols are these.
 */

#include <mpi.h>
#include <stdio.h>

#include "btl_ofi_pvars.h"

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);

    if (MPI_SUCCESS == rc) {
        (void) btl_ofi_pvars_open();
    }
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);

    if (MPI_SUCCESS == rc) {
        (void) btl_ofi_pvars_open();
    }
    return rc;
}

int MPI_Finalize(void)
{
    int rank = -1;

    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    btl_ofi_pvars_print(stdout, rank);
    btl_ofi_pvars_close();
    return PMPI_Finalize();
}
