#!/bin/bash
# btl_ofi_origin_rma: on shm the module says its writes and reads complete
# at the origin (the default); off, and on other providers, it does not.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

ORIGIN_TEXT="writes and reads complete at the origin"
run_job "origin_rma=1 shm" ofi --mca btl ofi,self --mca btl_ofi_provider_include shm \
    --mca btl_ofi_origin_rma 1 --mca btl_ofi_verbose 1
expect_text "$ORIGIN_TEXT"
expect_pass

run_job "origin_rma default shm" ofi --mca btl ofi,self --mca btl_ofi_provider_include shm \
    --mca btl_ofi_verbose 1
expect_text "$ORIGIN_TEXT"
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
