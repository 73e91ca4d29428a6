#!/bin/bash
# An include and an exclude list of providers together give the
# "[include and exclude]" message; the include list wins and the job runs
# over btl/ofi with the included provider.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

# exclude a provider other than the included one, so that only the message
# tells whether the exclude list was looked at
exclude=shm
[ "$PARAMS_PROVIDER" = shm ] && exclude=sockets

run_job "include=$PARAMS_PROVIDER,exclude=$exclude" ofi --mca btl ofi,self \
    --mca btl_ofi_provider_include "$PARAMS_PROVIDER" --mca btl_ofi_provider_exclude "$exclude"
expect_text "Both an include and an exclude list of libfabric providers were given"
expect_line "Include: +$PARAMS_PROVIDER\$" "Include: $PARAMS_PROVIDER"
expect_line "Exclude: +$exclude\$" "Exclude: $exclude"
expect_help_found
expect_pass
finish
