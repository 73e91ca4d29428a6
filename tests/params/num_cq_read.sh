#!/bin/bash
# btl_ofi_num_cq_read outside 1..256 is clamped with the "[bad parameter]"
# message, and the job still runs over btl/ofi.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

expect_clamped_runs num_cq_read 1 256 "0 1" "-1 1" "100000 256"
finish
