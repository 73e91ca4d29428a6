#!/bin/bash
# btl_ofi_progress_threshold 0 is clamped to 1 with the "[bad parameter]"
# message, and the job still runs over btl/ofi (progress on every post).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

expect_clamped_runs progress_threshold 1 1000000 "0 1"
finish
