#!/bin/bash
# An include list naming no provider that exists: btl/ofi says so with the
# "[no provider]" message and stays out.  With only ofi,self the job cannot
# run and must end with an error, without a crash or a hang; with sm added
# it runs over sm.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

bogus=no_such_provider

run_job "include=$bogus,btl=ofi,self" any --mca btl ofi,self \
    --mca btl_ofi_provider_include "$bogus"
expect_text "The OFI BTL found no usable libfabric provider on this host."
expect_line "Include list: +$bogus\$" "Include list: $bogus"
expect_help_found
expect_clean_error

run_job "include=$bogus,btl=ofi,self,sm" none --mca btl ofi,self,sm \
    --mca btl_ofi_provider_include "$bogus"
expect_text "The OFI BTL found no usable libfabric provider on this host."
expect_help_found
expect_pass
finish
