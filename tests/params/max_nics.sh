#!/bin/bash
# btl_ofi_max_nics outside 1..16 is clamped with the "[bad parameter]"
# message, and the job still runs over btl/ofi.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

expect_clamped_runs max_nics 1 16 "0 1" "100 16"
finish
