#!/bin/bash
# btl_ofi_local_copy: -1 (the default) copies same-host peers' puts and
# gets only in a job that spans hosts, so a one-node job keeps its
# provider's path; 1 copies them on one node too (the module says so at
# verbose 1), except on shm, which copies by itself; a value outside -1..1
# is clamped with "[bad parameter]".  The copies themselves, their bytes
# and their counter: tests/hosts/hosts-local.c (hosts lane, and the mpi
# lane's hosts_local lines).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

COPY_TEXT="same-host peers' puts and gets copied"
expect_clamped_runs local_copy -1 1 "7 1" "-9 -1"

expect_on_across_hosts local_copy "$COPY_TEXT" "a one-node job keeps the provider's path by default"

if fi_info -p shm -t FI_EP_RDM >/dev/null 2>&1; then
    run_job "local_copy=1 shm" ofi --mca btl ofi,self --mca btl_ofi_provider_include shm \
        --mca btl_ofi_local_copy 1 --mca btl_ofi_verbose 1
    expect_no_text "$COPY_TEXT" "shm copies by itself"
    expect_pass
fi
finish
