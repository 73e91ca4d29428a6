#!/bin/bash
# btl_ofi_num_cq_read outside 1..256 is clamped with the "[bad parameter]"
# message, and the job still runs over btl/ofi.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

for case in "0 1" "-1 1" "100000 256"; do
    read -r value used <<<"$case"
    run_job "num_cq_read=$value" ofi --mca btl ofi,self \
        --mca btl_ofi_provider_include "$PARAMS_PROVIDER" --mca btl_ofi_num_cq_read "$value"
    expect_bad_parameter btl_ofi_num_cq_read "$value" 1 256 "$used"
    expect_help_found
    expect_pass
done
finish
