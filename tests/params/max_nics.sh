#!/bin/bash
# btl_ofi_max_nics outside 1..16 is clamped with the "[bad parameter]"
# message, and the job still runs over btl/ofi.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

for case in "0 1" "100 16"; do
    read -r value used <<<"$case"
    run_job "max_nics=$value" ofi --mca btl ofi,self \
        --mca btl_ofi_provider_include "$PARAMS_PROVIDER" --mca btl_ofi_max_nics "$value"
    expect_bad_parameter btl_ofi_max_nics "$value" 1 16 "$used"
    expect_help_found
    expect_pass
done
finish
