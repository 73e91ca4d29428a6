#!/bin/bash
# btl_ofi_progress_slice_us: out-of-range values are clamped with
# "[bad parameter]".  And the progress thread (named btl-ofi-look) gets the
# slice it asks for: while rma_busy_target's target computes, the
# scheduler's own record of the thread (/proc/PID/task/TID/sched, se.slice,
# Linux 6.12 and later) says 100 us by default and the kernel's default
# with 0.  Skipped where the kernel shows no se.slice.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

BUSY=${BTL_OFI_BUILD:-$PARAMS_ROOT/build}/mpi/rma_busy_target
[ -x "$BUSY" ] || skip "$BUSY is not built (make -C standalone mpitests)"

expect_clamped_runs progress_slice_us 0 100000 "-5 0" "200000 100000"

grep -q '^se.slice' /proc/self/sched 2>/dev/null ||
    { echo "this kernel shows no se.slice: the slice itself is not checked"; finish; }

# slice_job LABEL SLICE: rma_busy_target with btl_ofi_progress_slice_us
# SLICE; sets SLICES to what the threads had.
slice_job() {
    local label=$1 slice=$2
    echo "job $label: rma_busy_target -s 3, btl_ofi_progress_slice_us $slice"
    busy_target_log "$label"
    look_threads_sched "$$.$label" '/^se.slice / { print $3 + 0 }' >"$JOB_LOG.slices" &
    BUSY_WATCHERS=($!)
    busy_target_job "$label" --oversubscribe --mca btl_ofi_progress_slice_us "$slice"
    SLICES=$(sort -u "$JOB_LOG.slices" | tr '\n' ' ')
}

slice_job default 100
if [ -z "$SLICES" ]; then
    fail "no btl-ofi-look thread was seen during the job"
elif [ "$SLICES" = "100000 " ]; then
    ok "the progress thread ran with a 100 us slice"
else
    fail "the progress thread's slices were: $SLICES(expected 100000 ns)"
fi
slice_job kernel 0
if [ -n "$SLICES" ] && ! [[ " $SLICES" == *" 100000 "* ]]; then
    ok "with 0 the thread kept the kernel's slice ($SLICES ns)"
else
    fail "with btl_ofi_progress_slice_us 0 the slices were: ${SLICES:-none}"
fi
finish
