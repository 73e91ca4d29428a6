#!/bin/bash
# btl_ofi_progress_threshold 0 is clamped to 1 with the "[bad parameter]"
# message, and the job still runs over btl/ofi (progress on every post).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

run_job "progress_threshold=0" ofi --mca btl ofi,self \
    --mca btl_ofi_provider_include "$PARAMS_PROVIDER" --mca btl_ofi_progress_threshold 0
expect_bad_parameter btl_ofi_progress_threshold 0 1 1000000 1
expect_help_found
expect_pass
finish
