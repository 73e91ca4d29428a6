#!/bin/bash
# btl_ofi_origin_rma: on shm of libfabric 1.x the module says its writes and
# reads complete at the origin (the default); off, on libfabric 2.x and on
# other providers, it does not.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

ORIGIN_TEXT="writes and reads complete at the origin"
# shm's provider version is libfabric's: 117.0 on 1.17, 201.0 on 2.1
expect_origin_copies() {
    if grep -aqE "shm: shm 1[0-9]{2}\." "$JOB_LOG"; then
        expect_text "$ORIGIN_TEXT"
    else
        expect_no_text "$ORIGIN_TEXT" "libfabric 2.x keeps delivery-complete"
    fi
}

run_job "origin_rma=1 shm" ofi --mca btl ofi,self --mca btl_ofi_provider_include shm \
    --mca btl_ofi_origin_rma 1 --mca btl_ofi_verbose 1
expect_origin_copies
expect_pass

run_job "origin_rma default shm" ofi --mca btl ofi,self --mca btl_ofi_provider_include shm \
    --mca btl_ofi_verbose 1
expect_origin_copies
expect_pass

run_job "origin_rma=0 shm" ofi --mca btl ofi,self --mca btl_ofi_provider_include shm \
    --mca btl_ofi_origin_rma 0 --mca btl_ofi_verbose 1
expect_no_text "$ORIGIN_TEXT" "off when asked"
expect_pass

run_job "origin_rma=1 $PARAMS_PROVIDER" ofi --mca btl ofi,self \
    --mca btl_ofi_provider_include "$PARAMS_PROVIDER" --mca btl_ofi_origin_rma 1 \
    --mca btl_ofi_verbose 1
expect_no_text "$ORIGIN_TEXT" "only shm copies at the origin"
expect_pass
finish
