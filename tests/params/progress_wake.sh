#!/bin/bash
# btl_ofi_progress_wake_us and btl_ofi_progress_gap_us: out-of-range
# values are clamped with "[bad parameter]".  And the wake-ups are what
# serves a computing target when the thread's timer cannot: with the timer
# at 100 ms, rma_busy_target's origins finish their 300 operations within the
# target's 3 s of computing only while wake-ups are on (the default); with
# btl_ofi_progress_wake_us 0 the same job fails its bound.  The counters
# show who woke whom.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

BUSY=${BTL_OFI_BUILD:-$PARAMS_ROOT/build}/mpi/rma_busy_target
[ -x "$BUSY" ] || skip "$BUSY is not built (make -C standalone mpitests)"

expect_clamped_runs progress_wake_us 0 1000000 "-1 0" "2000000 1000000"
expect_clamped_runs progress_gap_us 0 1000000 "-5 0" "3000000 1000000"

# run_busy NAME WAKE_US: rma_busy_target with the thread's timer at 100 ms
run_busy() {
    JOB_NAME=$1
    JOB_LOG=$PARAMS_LOGS/$PARAMS_TEST.$1.log
    echo "job $1: rma_busy_target, btl_ofi_progress_idle_us 100000, btl_ofi_progress_wake_us $2"
    set +e
    timeout -k 10 "$PARAMS_TIMEOUT" "$PARAMS_ROOT/contrib/mpirun" -np 2 --oversubscribe \
        --mca pml ob1 --mca osc rdma --mca btl ofi,self \
        --mca btl_ofi_provider_include "$PARAMS_PROVIDER" \
        --mca btl_ofi_progress_idle_us 100000 --mca btl_ofi_progress_wake_us "$2" \
        "$BUSY" >"$JOB_LOG" 2>&1 </dev/null
    JOB_RC=$?
    set -e
    echo "  (exit status $JOB_RC, log $JOB_LOG)"
}

# the sum of counter KEY over the PVARS lines of the job
pvar_sum() {
    grep -a '^PVARS rank=' "$JOB_LOG" | sed -n "s/.* $1=\\([0-9]*\\).*/\\1/p" |
        awk '{ s += $1 } END { print s + 0 }'
}

run_busy wake-on 30
expect_no_crash
if [ "$JOB_RC" = 0 ] && grep -aqF "rma_busy_target: PASS" "$JOB_LOG"; then
    ok "wake-ups on: the origins finished while the target computed"
else
    fail "wake-ups on: rma_busy_target did not pass (exit status $JOB_RC)"
    show_log_tail
fi
sent=$(pvar_sum wake_sent) received=$(pvar_sum wake_recv)
if [ "$sent" -gt 0 ] && [ "$received" -gt 0 ]; then
    ok "wake-ups on: $sent sent, $received received"
else
    fail "wake-ups on: counters show $sent sent and $received received"
fi

run_busy wake-off 0
expect_no_crash
if [ "$JOB_RC" != 0 ] && grep -aqF "rma_busy_target: FAIL" "$JOB_LOG"; then
    ok "wake-ups off: the origins waited for the target, as the test must see"
else
    fail "wake-ups off: rma_busy_target did not fail (exit status $JOB_RC): the test cannot tell"
    show_log_tail
fi
[ "$(pvar_sum wake_sent)" = 0 ] && ok "wake-ups off: none sent" ||
    fail "wake-ups off: $(pvar_sum wake_sent) sent"
finish
