#!/bin/bash
# btl_ofi_progress_sleep_us and btl_ofi_progress_linger_us: out-of-range
# values are clamped with "[bad parameter]".  And a sleeping thread is woken
# by the origins that wait for it: with the thread's safety-net period at
# 5 s, rma_busy_target's target computes for 1 s with nothing aimed at it
# (its thread goes to sleep), then serves every operation while it computes
# for 3 s more, and its counters show looks that wake-ups started.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

BUSY=${BTL_OFI_BUILD:-$PARAMS_ROOT/build}/mpi/rma_busy_target
[ -x "$BUSY" ] || skip "$BUSY is not built (make -C standalone mpitests)"

expect_clamped_runs progress_sleep_us 10 10000000 "5 10"
expect_clamped_runs progress_linger_us 0 10000000 "20000000 10000000"

JOB_NAME=asleep
JOB_LOG=$PARAMS_LOGS/$PARAMS_TEST.asleep.log
echo "job asleep: rma_busy_target -q 1 -s 3, btl_ofi_progress_sleep_us 5000000"
set +e
timeout -k 10 "$PARAMS_TIMEOUT" "$PARAMS_ROOT/contrib/mpirun" -np 2 --oversubscribe \
    --mca pml ob1 --mca osc rdma --mca btl ofi,self \
    --mca btl_ofi_provider_include "$PARAMS_PROVIDER" \
    --mca btl_ofi_progress_sleep_us 5000000 "$BUSY" -q 1 -s 3 >"$JOB_LOG" 2>&1 </dev/null
JOB_RC=$?
set -e
echo "  (exit status $JOB_RC, log $JOB_LOG)"
expect_no_crash
if [ "$JOB_RC" = 0 ] && grep -aqF "rma_busy_target: PASS" "$JOB_LOG"; then
    ok "the sleeping target served every operation while it computed"
else
    fail "rma_busy_target did not pass (exit status $JOB_RC)"
    show_log_tail
fi
woken=$(grep -a '^PVARS rank=0 ' "$JOB_LOG" | sed -n 's/.* look_woken=\([0-9]*\).*/\1/p')
if [ "${woken:-0}" -gt 0 ]; then
    ok "the target's thread took $woken look(s) on a waiting origin's wake-up"
else
    fail "the target's counters show ${woken:-no} looks started by a wake-up"
fi
finish
