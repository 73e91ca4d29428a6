#!/bin/bash
# Soak test of btl/ofi (contrib/check --soak):
#
#   tests/soak.sh [SECONDS]            default 600; 30 for a quick check
#
# np 4, 4 threads per rank under MPI_THREAD_MULTIPLE (tests/faults/soak.c):
# every cycle, every thread does verified puts, gets and fetch_and_op in a
# window, then a verified isend/irecv exchange with every rank.  Thread 0
# creates and frees its window over fresh malloc'd memory every cycle; the
# other threads keep theirs for the run.  Meanwhile the resident memory
# (VmRSS of /proc/PID/status) of every rank is sampled.
#
# Thread 0 creates and frees its windows while the rank's other threads
# wait outside MPI (soak -S).  Open MPI 5.0.7 does not survive a window
# being created while other threads of the process communicate: with
# btl/sm alone (no btl/ofi loaded) a rank crashed in
# ompi_osc_rdma_component_select, calling through the new communicator's
# collectives table, after 115 s with one thread creating windows and
# after 280 s with all four (and in ob1's mca_pml_ob1_recv_req_start).
# SOAK_SERIAL=0 (with SOAK_CHURN=N: N threads creating windows) runs that.
#
# Cases:
#   run       every operation of every thread exact, no MPI error, no hang
#   baseline  the same windows (-m rma) with upstream's btl/ofi
#             (contrib/env --stock, btl ofi,sm,self) for a fifth of the
#             time: how much heap osc/rdma and the rest of Open MPI keep per
#             window cycle without us (5.0.7 keeps ~35 KiB per window:
#             osc/rdma's, not ours; measured, not assumed)
#   memory    per rank: RSS at start, after warm-up (the first 20% of the
#             run, at least 10 s) and at the end, and heap in use (mallinfo2)
#             likewise; fails when a rank's RSS grew after warm-up by more
#             than the tolerance: 10% of its after-warm-up RSS, at least
#             16 MiB (SOAK_TOLERANCE_PCT, SOAK_TOLERANCE_MIN_KB), plus what
#             the baseline's per-cycle heap growth explains for the cycles
#             run after warm-up
#
# Environment: SOAK_PROVIDER (default shm, the fastest here, so the most
# cycles), SOAK_THREADS (4), SOAK_NP (4), SOAK_MIX (both, rma or p2p: to
# tell which traffic a growth comes with), SOAK_SERIAL (1), SOAK_CHURN (1:
# threads creating windows, used with SOAK_SERIAL=0), SOAK_EXTRA (more
# mpirun args, e.g. "--mca btl_ofi_num_contexts_per_module 4").
# shellcheck disable=SC2054 # commas inside MCA values, not array separators
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
. "$(dirname "$0")/faults/lib.sh"

SECONDS_WANTED=${1:-600}
case $SECONDS_WANTED in
'' | *[!0-9]*)
    echo "usage: $0 [SECONDS]" >&2
    exit 2
    ;;
esac
PROVIDER=${SOAK_PROVIDER:-shm}
THREADS=${SOAK_THREADS:-4}
NP=${SOAK_NP:-4}
MIX=${SOAK_MIX:-both}
CHURN=${SOAK_CHURN:-1}
SERIAL=${SOAK_SERIAL:-1}
serial_arg=()
[ "$SERIAL" = 0 ] || serial_arg=(-S)
TOL_PCT=${SOAK_TOLERANCE_PCT:-10}
TOL_MIN_KB=${SOAK_TOLERANCE_MIN_KB:-16384}
read -r -a EXTRA <<<"${SOAK_EXTRA:-}"

if ! faults_env; then
    faults_report SKIP soak all "Open MPI not set up (run contrib/setup)"
    exit 0
fi
mkdir -p "$FAULTS_LOGS/soak"
if ! faults_build >"$FAULTS_LOGS/build.log" 2>&1; then
    MPI_LOG=$FAULTS_LOGS/build.log
    faults_report FAIL soak build "building the test programs failed"
    exit 1
fi
leftover=$(faults_reap)
[ "$leftover" = 0 ] || echo "# killed $leftover test processes left from an earlier run" >&2

piddir=$(mktemp -d)
trap 'rm -rf "$piddir"' EXIT
interval=$((SECONDS_WANTED / 60))
[ "$interval" -ge 2 ] || interval=2

# soak_job LOG SAMPLES SECONDS ENV-ARGS... -- MPIRUN-ARGS...
# Runs the soak program in the background (contrib/mpirun, with
# contrib/env's flavour chosen by ENV-ARGS: nothing or --stock) and samples
# the RSS of its ranks every $interval s into SAMPLES ("seconds,rank,rss_kb").
soak_job() {
    local log=$1 samples=$2 secs=$3
    shift 3
    local flavour=()
    while [ "$1" != -- ]; do
        flavour+=("$1")
        shift
    done
    shift
    rm -f "$piddir"/rank.*
    MPI_LOG=$log
    MPI_LIMIT=$((secs + 300))
    {
        printf 'command: contrib/mpirun'
        printf ' %q' "${flavour[@]}" "$@"
        printf '\n'
    } >"$MPI_LOG"
    local start job now f rank pid rss
    start=$(date +%s.%N)
    timeout -k 15 "$MPI_LIMIT" "$FAULTS_ROOT/contrib/mpirun" "${flavour[@]}" "$@" >>"$MPI_LOG" 2>&1 </dev/null &
    job=$!
    echo "seconds,rank,rss_kb" >"$samples"
    while kill -0 "$job" 2>/dev/null; do
        now=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
        for f in "$piddir"/rank.*; do
            [ -f "$f" ] || continue
            rank=${f##*.}
            pid=$(cat "$f" 2>/dev/null || true)
            [ -n "$pid" ] || continue
            rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true)
            [ -n "$rss" ] && echo "$now,$rank,$rss" >>"$samples"
        done
        sleep "$interval"
    done
    set +e
    wait "$job"
    MPI_RC=$?
    set -e
    MPI_SECS=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    echo "exit: $MPI_RC after ${MPI_SECS}s" >>"$MPI_LOG"
}

# Heap growth per cycle of rank R's thread 0 after WARM seconds, from the
# HEAP lines of LOG (KiB per cycle; empty when there are too few).
heap_rate() {
    local log=$1 rank=$2 warm=$3
    { grep -a "^HEAP rank=$rank " "$log" || true; } |
        sed -n 's/.* seconds=\([0-9.]*\) cycles=\([0-9]*\) inuse_kb=\([0-9]*\).*/\1 \2 \3/p' |
        awk -v warm="$warm" '$1 >= warm { if (!n++) { c0 = $2; k0 = $3 } c1 = $2; k1 = $3 }
            END { if (n >= 2 && c1 > c0) printf "%.1f", (k1 - k0) / (c1 - c0) }'
}

heap_at() {
    local log=$1 rank=$2 which=$3 warm=${4:-0}
    { grep -a "^HEAP rank=$rank " "$log" || true; } |
        sed -n 's/.* seconds=\([0-9.]*\) cycles=\([0-9]*\) inuse_kb=\([0-9]*\).*/\1 \3/p' |
        awk -v which="$which" -v warm="$warm" '
            NR == 1 { first = $2 } $1 >= warm && !w { w = $2 } { last = $2 }
            END { v = (which == "first") ? first : (which == "warm") ? w : last; printf "%.1f", v / 1024 }'
}

warmup=$(awk -v s="$SECONDS_WANTED" 'BEGIN { w = s * 0.2; if (w < 10) w = 10; printf "%.1f", w }')
name="np$NP-x$THREADS-threads/$MIX/$(echo "$PROVIDER" | tr ';' '+')/${SECONDS_WANTED}s"

# ---- baseline: upstream's component, same window churn
base_secs=$((SECONDS_WANTED / 5))
[ "$base_secs" -ge 20 ] || base_secs=20
base_rate=
if [ -f "$(dirname "$(dirname "$(command -v mpicc)")")/lib/openmpi/mca_btl_ofi.so" ]; then
    soak_job "$FAULTS_LOGS/soak/baseline.log" "$FAULTS_LOGS/soak/baseline-rss.csv" "$base_secs" \
        --stock -- -np "$NP" --oversubscribe --bind-to none --mca btl ofi,sm,self --mca osc rdma \
        --mca pml ob1 --mca opal_common_ofi_provider_include shm \
        "$FAULTS_OUT/soak" -s "$base_secs" -t "$THREADS" -p "$piddir" -m rma -c "$CHURN" "${serial_arg[@]}"
    base_warm=$(awk -v s="$base_secs" 'BEGIN { printf "%.1f", s * 0.25 }')
    base_rate=$(heap_rate "$MPI_LOG" 0 "$base_warm")
    if [ "$MPI_RC" = 0 ] && [ -n "$base_rate" ]; then
        faults_report PASS soak "baseline/stock-btl-ofi/rma/shm/${base_secs}s" \
            "upstream btl/ofi + osc/rdma keep ${base_rate} KiB of heap per cycle of rank 0's thread 0 ($CHURN of $THREADS threads churning windows)"
    else
        faults_report SKIP soak "baseline/stock-btl-ofi/rma/shm/${base_secs}s" \
            "no baseline (rc=$MPI_RC): the memory check allows no per-window growth"
        base_rate=
    fi
fi
[ -n "$base_rate" ] || base_rate=0

# ---- our run
samples=$FAULTS_LOGS/soak/rss.csv
soak_job "$FAULTS_LOGS/soak/run.log" "$samples" "$SECONDS_WANTED" -- \
    -np "$NP" --oversubscribe --bind-to none --mca btl ofi,self --mca osc rdma --mca pml ob1 \
    --mca btl_ofi_provider_include "$PROVIDER" "${EXTRA[@]}" \
    "$FAULTS_OUT/soak" -s "$SECONDS_WANTED" -t "$THREADS" -p "$piddir" -m "$MIX" -c "$CHURN" "${serial_arg[@]}"
left=$(faults_reap)

# ---- run
cycles=$(faults_sum "$MPI_LOG" SOAK cycles)
windows=$(faults_sum "$MPI_LOG" SOAK windows)
ops=$(faults_sum "$MPI_LOG" RESULT ops)
retries=$(faults_sum "$MPI_LOG" PVARS retry)
crash=$(faults_crash_sign "$MPI_LOG")
details="cycles=$cycles windows=$windows (created and freed; both over all threads and ranks) ops=$ops eagain_retries=$retries time=${MPI_SECS}s"
if faults_timed_out; then
    faults_report FAIL soak "run/$name" "hang: still running after ${MPI_SECS}s; $details"
elif [ -n "$crash" ]; then
    faults_report FAIL soak "run/$name" "crash: $crash; $details"
elif grep -a -q '^SKIP rank=' "$MPI_LOG"; then
    faults_report SKIP soak "run/$name" "MPI_THREAD_MULTIPLE not provided"
    exit 0
elif ! faults_exact "$MPI_LOG" "$NP"; then
    faults_report FAIL soak "run/$name" "not exact (rc=$MPI_RC): $(grep -a -m1 -E '^(MISMATCH|MPI_ERROR)' "$MPI_LOG" || echo 'missing RESULT lines'); $details"
elif [ "$left" != 0 ]; then
    faults_report FAIL soak "run/$name" "$left processes left behind; $details"
else
    faults_report PASS soak "run/$name" "$details"
fi

# ---- memory
# cycles of rank 0's thread 0 after warm-up, times the baseline's heap per
# cycle: what upstream keeps anyway
cycles_after=$({ grep -a '^HEAP rank=0 ' "$MPI_LOG" || true; } |
    sed -n 's/.* seconds=\([0-9.]*\) cycles=\([0-9]*\).*/\1 \2/p' |
    awk -v warm="$warmup" '$1 >= warm && !n++ { c0 = $2 } { c1 = $2 } END { printf "%d", c1 - c0 }')
allow_kb=$(awk -v r="$base_rate" -v c="$cycles_after" 'BEGIN { printf "%d", r * c }')
memory=$(awk -F, -v warm="$warmup" -v pct="$TOL_PCT" -v minkb="$TOL_MIN_KB" -v allow="$allow_kb" '
    NR == 1 { next }
    {
        t = $1; r = $2; kb = $3
        if (!(r in first)) { first[r] = kb; ranks[++n] = r }
        if (t >= warm && !(r in warmed)) { warmed[r] = kb; warm_t[r] = t }
        last[r] = kb; last_t[r] = t
        if (kb > peak[r]) peak[r] = kb
        count[r]++
    }
    END {
        bad = 0
        for (i = 1; i <= n; ++i) {
            r = ranks[i]
            if (!(r in warmed)) { out = out sprintf(" rank%s: no sample after warm-up;", r); bad = 2; continue }
            growth = last[r] - warmed[r]
            tol = warmed[r] * pct / 100; if (tol < minkb) tol = minkb
            tol += allow
            if (growth > tol) bad = 1
            out = out sprintf(" rank%s %.1f/%.1f/%.1f MiB (peak %.1f, +%.1f MiB after warm-up, limit %.1f)%s;",
                              r, first[r] / 1024, warmed[r] / 1024, last[r] / 1024, peak[r] / 1024,
                              growth / 1024, tol / 1024, growth > tol ? " GREW" : "")
        }
        if (n == 0) { out = " no samples"; bad = 2 }
        printf "%d%s", bad, out
    }' "$samples")
verdict=${memory%%[!0-9]*}
memory=${memory#"$verdict"}
our_rate=$(heap_rate "$MPI_LOG" 0 "$warmup")
heap="heap in use rank0 $(heap_at "$MPI_LOG" 0 first)/$(heap_at "$MPI_LOG" 0 warm "$warmup")/$(heap_at "$MPI_LOG" 0 last) MiB, ${our_rate:-?} KiB per cycle (baseline ${base_rate}) over $cycles_after cycles after warm-up, allowance $((allow_kb / 1024)) MiB"
mem_details="RSS start/after-warm-up(${warmup}s)/end:$memory $heap; samples every ${interval}s in $samples"
case $verdict in
0) faults_report PASS soak "memory/$name" "$mem_details" ;;
1) faults_report FAIL soak "memory/$name" "$mem_details" ;;
*) faults_report SKIP soak "memory/$name" "run too short to sample: $mem_details" ;;
esac
faults_summary soak
