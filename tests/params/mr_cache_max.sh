#!/bin/bash
# btl_ofi_mr_cache_max outside 0..1000000 is clamped with the
# "[bad parameter]" message, and the job still runs over btl/ofi (with 0,
# every registration is released as soon as its user releases it).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

expect_clamped_runs mr_cache_max 0 1000000 "-1 0" "2000000 1000000"
finish
