#!/bin/bash
# btl_ofi_local_atomics: -1 (the default) opens the shm module for
# same-host peers' atomics only in a job that spans hosts, so a one-node
# job keeps its provider's path; 1 opens it on one node too (verbose 1
# says so), except where the provider is shm or the exclude list names
# shm; a value outside -1..1 is clamped with "[bad parameter]".  The
# atomics themselves, their values and their counter: rma_local_copy -a 1
# (mpi lane with the value forced to 1, hosts lane with the default).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

SHM_TEXT="atomics to same-host peers go through shm"
expect_clamped_runs local_atomics -1 1 "4 1" "-3 -1"

if fi_info -p shm -t FI_EP_RDM >/dev/null 2>&1; then
    expect_on_across_hosts local_atomics "$SHM_TEXT" \
        "a one-node job keeps the provider's path by default"

    run_job "local_atomics=1 shm" ofi --mca btl ofi,self --mca btl_ofi_provider_include shm \
        --mca btl_ofi_local_atomics 1 --mca btl_ofi_verbose 10
    expect_no_text "$SHM_TEXT" "the provider is shm already"
    expect_text "same-host atomics through shm: the provider is shm"
    expect_pass

    run_job "local_atomics=1, shm excluded" ofi --mca btl ofi,self \
        --mca opal_common_ofi_provider_exclude shm --mca btl_ofi_local_atomics 1 \
        --mca btl_ofi_verbose 10
    expect_no_text "$SHM_TEXT" "the user excluded shm"
    expect_text "shm is in the exclude list"
    expect_pass
fi
finish
