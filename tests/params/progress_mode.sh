#!/bin/bash
# An unknown btl_ofi_progress_mode gives the "[bad progress mode]" message
# and falls back to manual progress; the job still runs over btl/ofi.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

run_job "progress_mode=bogus" ofi --mca btl ofi,self \
    --mca btl_ofi_provider_include "$PARAMS_PROVIDER" --mca btl_ofi_progress_mode bogus
expect_text "The OFI BTL was given an unknown progress mode."
expect_line "btl_ofi_progress_mode: +bogus\$" "btl_ofi_progress_mode: bogus"
expect_help_found
expect_pass

# the valid values must pass silently
for value in manual auto unspec; do
    run_job "progress_mode=$value" ofi --mca btl ofi,self \
        --mca btl_ofi_provider_include "$PARAMS_PROVIDER" --mca btl_ofi_progress_mode "$value"
    expect_no_text "The OFI BTL was given an unknown progress mode." "$value is valid"
    expect_pass
done
finish
