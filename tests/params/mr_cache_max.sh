#!/bin/bash
# btl_ofi_mr_cache_max outside 0..1000000 is clamped with the
# "[bad parameter]" message, and the job still runs over btl/ofi (with 0,
# every registration is released as soon as its user releases it).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

for case in "-1 0" "2000000 1000000"; do
    read -r value used <<<"$case"
    run_job "mr_cache_max=$value" ofi --mca btl ofi,self \
        --mca btl_ofi_provider_include "$PARAMS_PROVIDER" --mca btl_ofi_mr_cache_max "$value"
    expect_bad_parameter btl_ofi_mr_cache_max "$value" 0 1000000 "$used"
    expect_help_found
    expect_pass
done
finish
