#!/bin/bash
# btl_ofi_progress_thread: an unknown value gives "[bad progress thread]"
# and auto; on, off and auto run silently, and at verbose level 1 the
# component says whether the thread runs and why.  btl_ofi_progress_idle_us
# out of range is clamped with "[bad parameter]".
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

# run_thread_job VALUE TEXT: the job runs with btl_ofi_progress_thread VALUE
# and says TEXT at verbose level 1
run_thread_job() {
    run_job "progress_thread=$1" ofi --mca btl ofi,self \
        --mca btl_ofi_provider_include "$PARAMS_PROVIDER" --mca btl_ofi_progress_thread "$1" \
        --mca btl_ofi_verbose 1
    expect_text "$2"
    expect_pass
}

run_thread_job bogus "progress thread on: the provider moves data only when called"
expect_text "The OFI BTL was given an unknown value for its progress thread."
expect_line "btl_ofi_progress_thread: +bogus\$" "btl_ofi_progress_thread: bogus"
expect_help_found

run_thread_job off "no progress thread: btl_ofi_progress_thread is off"
run_thread_job on "progress thread on: btl_ofi_progress_thread is on"
run_thread_job auto "progress thread on: the provider moves data only when called"
for value in off on auto; do
    run_job "progress_thread=$value quiet" ofi --mca btl ofi,self \
        --mca btl_ofi_provider_include "$PARAMS_PROVIDER" --mca btl_ofi_progress_thread "$value"
    expect_no_text "unknown value for its progress thread" "$value is valid"
    expect_pass
done

expect_clamped_runs progress_idle_us 10 1000000 "5 10" "2000000 1000000"
finish
