#!/bin/bash
# btl_ofi_progress_nudge_us: out-of-range values are clamped with
# "[bad parameter]".  While rma_busy_target's target (rank 0, np 2, each
# rank bound to a core) computes, the default gives each rank's progress
# thread a helper, named btl-ofi-nudge, bound to the one CPU where the
# thread waits (the rank's).  A real-time hog takes the target's CPU for
# 5 ms in every 25, so that the thread's timed wake-ups run late: the
# MPI_T counter look_late_count must count some (nudge_count is there to
# read).  With 0 there is no helper and both counters stay 0.  The hog
# needs SCHED_FIFO (root or CAP_SYS_NICE): without it the late looks are
# not required.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

BUSY=${BTL_OFI_BUILD:-$PARAMS_ROOT/build}/mpi/rma_busy_target
[ -x "$BUSY" ] || skip "$BUSY is not built (make -C standalone mpitests)"

expect_clamped_runs progress_nudge_us 0 1000000 "-5 0" "2000000 1000000"

# cpus_of PID TASK: "RANK_CPUS THREAD_CPUS" (job_threads' command);
# nothing for a thread that ended between the listing and the read.
cpus_of() {
    local rank helper

    rank=$(awk '/^Cpus_allowed_list/ { print $2 }' "/proc/$1/status" 2>/dev/null)
    helper=$(awk '/^Cpus_allowed_list/ { print $2 }' "$2/status" 2>/dev/null)
    if [ -n "$rank" ] && [ -n "$helper" ]; then
        echo "$rank $helper"
    fi
}

# hog_cpu CPU SECONDS: SCHED_FIFO busy bursts of 5 ms every 25 ms on CPU.
hog_cpu() {
    chrt -f 10 taskset -c "$1" python3 -c '
import sys, time
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    t = time.monotonic() + 0.005
    while time.monotonic() < t:
        pass
    time.sleep(0.02)
' "$2" 2>/dev/null
}

# nudge_job LABEL NUDGE: rma_busy_target -s 3 with btl_ofi_progress_nudge_us
# NUDGE, the hog on rank 0's CPU; sets BINDINGS to what the helpers had and
# COUNTS to rank 0's (the computing target's) "look_late=N nudge=N".
nudge_job() {
    local label=$1 nudge=$2
    echo "job $label: rma_busy_target -s 3, btl_ofi_progress_nudge_us $nudge"
    busy_target_log "$label"
    job_threads "$$.$label" btl-ofi-nudge cpus_of >"$JOB_LOG.bindings" &
    BUSY_WATCHERS=($!)
    hog_cpu 0 8 &
    BUSY_WATCHERS+=($!)
    busy_target_job "$label" --bind-to core --mca btl_ofi_progress_nudge_us "$nudge"
    BINDINGS=$(sort -u "$JOB_LOG.bindings" | tr '\n' ';')
    COUNTS=$(grep -a '^PVARS rank=0 ' "$JOB_LOG" | grep -o 'look_late=-\?[0-9]* nudge=-\?[0-9]*' |
        head -1)
}

nudge_job default 200
if [ -z "$BINDINGS" ]; then
    fail "no btl-ofi-nudge thread was seen during the job"
elif awk -v RS=';' 'NF && ($1 != $2 || $2 ~ /[-,]/) { bad = 1 } END { exit !bad }' \
    <<<"$BINDINGS"; then
    fail "a helper was not bound to its rank's one CPU (rank CPUs, helper CPUs: $BINDINGS)"
else
    ok "each helper was bound to its rank's CPU ($BINDINGS)"
fi
if ! [[ "$COUNTS" =~ ^look_late=([0-9]+)\ nudge=[0-9]+$ ]]; then
    fail "rank 0's look_late_count and nudge_count were not read: '${COUNTS:-no PVARS line}'"
elif [ "${BASH_REMATCH[1]}" != 0 ]; then
    ok "rank 0's counters read $COUNTS"
elif chrt -f 1 true 2>/dev/null; then
    fail "the hog ran at real-time priority, yet no look ran late ($COUNTS)"
else
    ok "rank 0's counters read $COUNTS (no real-time hog here: no look had to run late)"
fi

nudge_job off 0
if [ -n "$BINDINGS" ]; then
    fail "with btl_ofi_progress_nudge_us 0 a btl-ofi-nudge thread ran ($BINDINGS)"
else
    ok "with 0 no helper ran"
fi
if [ "$COUNTS" = "look_late=0 nudge=0" ]; then
    ok "with 0 the counters stayed 0"
else
    fail "with btl_ofi_progress_nudge_us 0 rank 0's counters read '${COUNTS:-nothing}'"
fi
finish
