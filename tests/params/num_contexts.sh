#!/bin/bash
# btl_ofi_num_contexts_per_module outside 1..64 is clamped with the
# "[bad parameter]" message; asking for 4 contexts with scalable endpoints
# disabled gives the "[contexts clamped]" message.  Every job still runs
# over btl/ofi.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

expect_clamped_runs num_contexts_per_module 1 64 "0 1" "1000 64"

run_job "num_contexts_per_module=4,disable_sep=1" ofi --mca btl ofi,self \
    --mca btl_ofi_provider_include "$PARAMS_PROVIDER" \
    --mca btl_ofi_num_contexts_per_module 4 --mca btl_ofi_disable_sep 1
expect_text "The OFI BTL cannot create as many communication contexts as requested."
expect_line "Requested: +4\$" "Requested: 4"
expect_line "Using: +1\$" "Using: 1"
expect_line "Reason: +btl_ofi_disable_sep is set\$" "Reason: btl_ofi_disable_sep is set"
expect_no_text "An MCA parameter of the OFI BTL has a value outside its valid range." \
    "4 contexts is a valid value"
expect_help_found
expect_pass
finish
