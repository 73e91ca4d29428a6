#!/bin/bash
# btl_ofi_progress_rt_priority: out-of-range values are clamped with
# "[bad parameter]".  With 1, the progress thread (btl-ofi-look) of
# rma_busy_target runs under SCHED_RR at priority 1 (the scheduler's own
# record, /proc/PID/task/TID/sched); by default it stays SCHED_OTHER; where
# the process may not have the priority (here: CAP_SYS_NICE dropped from
# the job's bounding set by setpriv) the job says so once with "[progress
# rt refused]" and passes with the normal scheduler.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

BUSY=${BTL_OFI_BUILD:-$PARAMS_ROOT/build}/mpi/rma_busy_target
[ -x "$BUSY" ] || skip "$BUSY is not built (make -C standalone mpitests)"

expect_clamped_runs progress_rt_priority 0 99 "-1 0" "100 99"

# rt_job LABEL PRIORITY [WRAPPER...]: rma_busy_target with the priority;
# sets POLICIES to what the threads had.
rt_job() {
    local label=$1 prio=$2
    shift 2
    BUSY_WRAP=("$@")
    echo "job $label: ${*:+$* }rma_busy_target -s 3, btl_ofi_progress_rt_priority $prio"
    busy_target_log "$label"
    # "POLICY PRIORITY" of each thread
    look_threads_sched "$$.$label" '/^policy / { p = $3 } /^prio / { q = $3 } END { if (p != "") print p, q }' \
        >"$JOB_LOG.policies" &
    BUSY_WATCHERS=($!)
    busy_target_job "$label" --oversubscribe --mca btl_ofi_progress_rt_priority "$prio"
    POLICIES=$(sort -u "$JOB_LOG.policies" | tr '\n' ',')
}

# (policy 2 is SCHED_RR; the kernel shows a real-time priority P as prio 99 - P)
rt_job rr 1
if [ "$POLICIES" = "2 98," ]; then
    ok "with 1 the progress thread ran under SCHED_RR, priority 1"
else
    fail "with btl_ofi_progress_rt_priority 1 the threads had (policy prio): ${POLICIES:-none}"
fi
expect_no_text "could not take the real-time priority" "the priority was granted"

rt_job default 0
if [ -n "$POLICIES" ] && [[ ,$POLICIES == *",0 "* ]] && ! [[ $POLICIES == *"2 "* ]]; then
    ok "by default the thread kept SCHED_OTHER ($POLICIES)"
else
    fail "with btl_ofi_progress_rt_priority 0 the threads had: ${POLICIES:-none}"
fi

if command -v setpriv >/dev/null && setpriv --bounding-set=-sys_nice true 2>/dev/null; then
    rt_job refused 1 setpriv --bounding-set=-sys_nice --inh-caps=-sys_nice
    expect_text "could not take the real-time priority"
    expect_help_found
    if [[ $POLICIES == *"2 "* ]]; then
        fail "without CAP_SYS_NICE the thread still ran under SCHED_RR ($POLICIES)"
    else
        ok "without CAP_SYS_NICE the thread ran under the normal scheduler (${POLICIES:-not seen})"
    fi
else
    echo "setpriv cannot drop CAP_SYS_NICE here: the refusal is not checked"
fi
finish
