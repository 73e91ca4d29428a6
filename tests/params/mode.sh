#!/bin/bash
# An unknown btl_ofi_mode disqualifies btl/ofi with the "[bad mode]"
# message.  With sm in the BTL list the job still runs, and btl/ofi must
# have carried nothing; with only ofi,self no BTL reaches the peer and the
# job must end with an error, cleanly.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

for value in 7 -1; do
    run_job "mode=$value,btl=ofi,self,sm" none --mca btl ofi,self,sm \
        --mca btl_ofi_provider_include "$PARAMS_PROVIDER" --mca btl_ofi_mode "$value"
    expect_text "The OFI BTL was given an unknown mode."
    expect_line "btl_ofi_mode: +$value\$" "btl_ofi_mode: $value"
    expect_help_found
    expect_pass
done

run_job "mode=7,btl=ofi,self" any --mca btl ofi,self \
    --mca btl_ofi_provider_include "$PARAMS_PROVIDER" --mca btl_ofi_mode 7
expect_text "The OFI BTL was given an unknown mode."
expect_help_found
expect_clean_error
finish
