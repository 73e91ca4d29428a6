#!/bin/bash
# Soak test of btl/ofi (contrib/check --soak):
#
#   tests/robustness/soak.sh [SECONDS]            default 600; 30 for a quick check
#
# np 4, 4 threads per rank under MPI_THREAD_MULTIPLE (tests/robustness/soak.c):
# every cycle, every thread creates a window over fresh malloc'd memory,
# does verified puts, gets and fetch_and_op in it, frees it, then runs a
# verified isend/irecv exchange with every rank.  Meanwhile the resident
# memory (VmRSS of /proc/PID/status) of every rank is sampled.
#
# Until 2026-11-24 this soak failed now and then with any BTL, btl/sm
# alone included (hangs, messages matched on another thread's
# communicator, crashes in window creation).  The cause was the test
# programs' MPI_T_init_thread(MPI_THREAD_SINGLE): Open MPI 5.0.7 takes that
# as the library's thread level, so ob1's single-thread shortcut (one
# cached request for blocking receives) was on while four threads ran.
# The programs' one MPI_T reader (tests/common/btl_ofi_pvars.c) now asks
# MPI_T for the level MPI was started with.
# SOAK_SERIAL=1 (soak -S: thread 0 alone creates a window per cycle while
# the others wait) and SOAK_CHURN=N (N threads creating windows) remain.
#
# Cases:
#   baseline  for comparison only: the same windows (-m rma) with upstream's
#             btl/ofi (contrib/env --stock, btl ofi,sm,self) for a fifth of
#             the time, and how much heap it keeps per window.  Upstream's
#             own crashes are reported as SKIP.
#   reference for comparison only: the same program and arguments with
#             btl sm,self (no btl/ofi) for a fifth of the time, reported as
#             SKIP whatever happens: whether Open MPI alone survived it
#   run       every operation of every thread exact, no MPI error, no hang
#   memory    per rank: RSS at start, after warm-up (the first 20% of the
#             run, at least 10 s) and at the end; fails when a rank's RSS
#             grew after warm-up by more than osc/rdma's fragments explain
#             plus a tolerance of 10% of its after-warm-up RSS, at least
#             16 MiB (SOAK_TOLERANCE_PCT, SOAK_TOLERANCE_MIN_KB).  osc/rdma
#             in Open MPI 5.0.x never returns the osc_rdma_buffer_size
#             (32 KiB) fragment a window takes for its first fetching
#             atomic: the windows a rank created after warm-up times that
#             is allowed.  Heap in use (mallinfo2) is reported beside it.
#   registrations  the provider registrations btl/ofi holds (MPI_T
#             counters mr_count - mr_release_count) never exceed
#             btl_ofi_mr_cache_max (SOAK_MR_CACHE_MAX, 256 here, so that
#             the limit is reached) plus 64 in use.  Those fragments are
#             registered once and then released by osc/rdma but never
#             freed, so without the limit the cache kept one per window.
#
# Environment: SOAK_PROVIDER (default shm, the fastest here, so the most
# cycles), SOAK_THREADS (4), SOAK_NP (4), SOAK_MIX (both, rma or p2p: to
# tell which traffic a growth comes with), SOAK_SERIAL (0), SOAK_CHURN (all
# threads create windows; used with SOAK_SERIAL=0), SOAK_EXTRA (more
# mpirun args, e.g. "--mca btl_ofi_num_contexts_per_module 4").
# shellcheck disable=SC2054 # commas inside MCA values, not array separators
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
. "$(dirname "$0")/lib.sh"

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
CHURN=${SOAK_CHURN:-$THREADS}
SERIAL=${SOAK_SERIAL:-0}
serial_arg=()
[ "$SERIAL" = 0 ] || serial_arg=(-S)
TOL_PCT=${SOAK_TOLERANCE_PCT:-10}
TOL_MIN_KB=${SOAK_TOLERANCE_MIN_KB:-16384}
MR_CACHE_MAX=${SOAK_MR_CACHE_MAX:-256}
MR_IN_USE=64
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
    MPI_LIMIT=$((secs + ${JOB_GRACE:-300}))
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

# Heap growth per window of rank R after WARM seconds (KiB per window
# created and freed by the rank; empty when there are too few samples).
heap_rate() {
    local log=$1 rank=$2 warm=$3
    heap_lines "$log" |
        awk -v r="$rank" -v warm="$warm" '$1 == r && $2 >= warm { if (!n++) { w0 = $3; k0 = $4 } w1 = $3; k1 = $4 }
            END { if (n >= 2 && w1 > w0) printf "%.1f", (k1 - k0) / (w1 - w0) }'
}

# Rank R's heap in use (MiB) at its first sample, first after WARM, last.
heap_at() {
    local log=$1 rank=$2 warm=$3
    heap_lines "$log" |
        awk -v r="$rank" -v warm="$warm" '$1 != r { next }
            !n++ { first = $4 } $2 >= warm && !got { w = $4; got = 1 } { last = $4 }
            END { printf "%.1f/%.1f/%.1f", first / 1024, w / 1024, last / 1024 }'
}

# osc/rdma (Open MPI 5.0.x) takes a buffer of osc_rdma_buffer_size bytes
# from its component-wide free list for a window's first fetching atomic
# and never gives it back when the window is freed: measured with
# valgrind's massif, that fragment (plus its ~100-byte list item) is all a
# window cycle leaves behind on the heap.  KiB per window:
osc_fragment_kb() {
    local size
    size=$(ompi_info --param osc rdma --level 9 --parsable 2>/dev/null |
        sed -n 's/^mca:osc:rdma:param:osc_rdma_buffer_size:value://p')
    awk -v s="${size:-32768}" 'BEGIN { printf "%.2f", (s + 128) / 1024 }'
}

# A case judged by an awk program that printed 0 (pass), 1 (fail) or
# anything else (could not tell: skip).
report_verdict() {
    case $1 in
    0) faults_report PASS soak "$2" "$3" ;;
    1) faults_report FAIL soak "$2" "$3" ;;
    *) faults_report SKIP soak "$2" "$3" ;;
    esac
}

warmup=$(awk -v s="$SECONDS_WANTED" 'BEGIN { w = s * 0.2; if (w < 10) w = 10; printf "%.1f", w }')
name="np$NP-x$THREADS-threads/$MIX/$(echo "$PROVIDER" | tr ';' '+')/${SECONDS_WANTED}s"

# ---- baseline, for comparison: upstream's component, the same windows
base_secs=$((SECONDS_WANTED / 5))
[ "$base_secs" -ge 20 ] || base_secs=20
base_rate=
if [ -f "$(dirname "$(dirname "$(command -v mpicc)")")/lib/openmpi/mca_btl_ofi.so" ]; then
    JOB_GRACE=60 soak_job "$FAULTS_LOGS/soak/baseline.log" "$FAULTS_LOGS/soak/baseline-rss.csv" "$base_secs" \
        --stock -- -np "$NP" --oversubscribe --bind-to none --mca btl ofi,sm,self --mca osc rdma \
        --mca pml ob1 --mca opal_common_ofi_provider_include shm \
        "$FAULTS_OUT/soak" -s "$base_secs" -t "$THREADS" -p "$piddir" -m rma -c "$CHURN" "${serial_arg[@]}"
    base_warm=$(awk -v s="$base_secs" 'BEGIN { printf "%.1f", s * 0.25 }')
    base_rate=$(heap_rate "$MPI_LOG" 0 "$base_warm")
    base_case="baseline/stock-btl-ofi/rma/shm/${base_secs}s"
    base_what="upstream btl/ofi + osc/rdma: rank 0's heap grew ${base_rate:-?} KiB per window after warm-up ($CHURN of $THREADS threads churning windows)"
    if [ "$MPI_RC" = 0 ] && [ -n "$base_rate" ]; then
        faults_report PASS soak "$base_case" "$base_what"
    else
        # upstream's own failures (see above) are reported, not held
        # against us: the memory case does not depend on this one
        base_how=$(faults_crash_sign "$MPI_LOG")
        faults_timed_out && base_how="hung"
        faults_report SKIP soak "$base_case" \
            "upstream's run failed (rc=$MPI_RC after ${MPI_SECS}s: ${base_how:-exit status}); $base_what"
    fi
    leftover=$(faults_reap)
    [ "$leftover" = 0 ] || echo "# killed $leftover processes left by the baseline" >&2
fi

# ---- reference: the same program without btl/ofi (btl sm,self), for a
# fifth of the time: what Open MPI alone does with this load
ref_secs=$base_secs
JOB_GRACE=30 soak_job "$FAULTS_LOGS/soak/reference-sm.log" "$FAULTS_LOGS/soak/reference-sm-rss.csv" "$ref_secs" -- \
    -np "$NP" --oversubscribe --bind-to none --mca btl sm,self --mca osc rdma --mca pml ob1 \
    "$FAULTS_OUT/soak" -s "$ref_secs" -t "$THREADS" -p "$piddir" -m "$MIX" -c "$CHURN" "${serial_arg[@]}"
leftover=$(faults_reap)
ref_case="reference/btl-sm-without-btl-ofi/$MIX/${ref_secs}s"
if faults_timed_out; then
    ref_what="Open MPI alone hung: still running after ${MPI_SECS}s; its last progress report: $(grep -a '^HEAP rank=0' "$MPI_LOG" | tail -1)"
elif ! faults_exact "$MPI_LOG" "$NP"; then
    ref_what="Open MPI alone failed (rc=$MPI_RC): $(grep -a -m1 -E '^(MISMATCH|MPI_ERROR)' "$MPI_LOG" || faults_crash_sign "$MPI_LOG" || echo 'missing RESULT lines')"
else
    ref_what="Open MPI alone passed this time: cycles=$(faults_sum "$MPI_LOG" SOAK cycles)"
fi
faults_report SKIP soak "$ref_case" "for comparison, not held against us: $ref_what"

# ---- our run
samples=$FAULTS_LOGS/soak/rss.csv
soak_job "$FAULTS_LOGS/soak/run.log" "$samples" "$SECONDS_WANTED" -- \
    -np "$NP" --oversubscribe --bind-to none --mca btl ofi,self --mca osc rdma --mca pml ob1 \
    --mca btl_ofi_provider_include "$PROVIDER" --mca btl_ofi_mr_cache_max "$MR_CACHE_MAX" "${EXTRA[@]}" \
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
# per rank "rank windows_after_warm_up": what osc/rdma's fragments explain
frag_kb=$(osc_fragment_kb)
after=$FAULTS_LOGS/soak/windows-after-warm-up.txt
heap_lines "$MPI_LOG" | awk -v warm="$warmup" '
    $2 >= warm && !($1 in w0) { w0[$1] = $3 } { w1[$1] = $3 }
    END { for (r in w1) print r, (r in w0) ? w1[r] - w0[r] : 0 }' >"$after"
memory=$(awk -F, -v warm="$warmup" -v pct="$TOL_PCT" -v minkb="$TOL_MIN_KB" -v frag="$frag_kb" -v after="$after" '
    BEGIN { while ((getline line < after) > 0) { split(line, f, " "); wins[f[1]] = f[2] } }
    NR == 1 { next }
    {
        t = $1; r = $2; kb = $3
        if (!(r in first)) { first[r] = kb; ranks[++n] = r }
        if (t >= warm && !(r in warmed)) { warmed[r] = kb; warm_t[r] = t }
        last[r] = kb; last_t[r] = t
        if (kb > peak[r]) peak[r] = kb
    }
    END {
        bad = 0
        for (i = 1; i <= n; ++i) {
            r = ranks[i]
            if (!(r in warmed)) { out = out sprintf(" rank%s: no sample after warm-up;", r); bad = 2; continue }
            growth = last[r] - warmed[r]
            osc = wins[r] * frag
            tol = warmed[r] * pct / 100; if (tol < minkb) tol = minkb
            if (growth - osc > tol) bad = 1
            out = out sprintf(" rank%s %.1f/%.1f/%.1f MiB (peak %.1f; %+.1f MiB after warm-up, %.1f of them osc/rdma fragments of %d windows, rest %+.1f, limit %.1f)%s;",
                              r, first[r] / 1024, warmed[r] / 1024, last[r] / 1024, peak[r] / 1024,
                              growth / 1024, osc / 1024, wins[r], (growth - osc) / 1024, tol / 1024,
                              growth - osc > tol ? " GREW" : "")
        }
        if (n == 0) { out = " no samples"; bad = 2 }
        printf "%d%s", bad, out
    }' "$samples")
verdict=${memory%%[!0-9]*}
memory=${memory#"$verdict"}
our_rate=$(heap_rate "$MPI_LOG" 0 "$warmup")
heap="heap in use rank0 $(heap_at "$MPI_LOG" 0 "$warmup") MiB (start/after warm-up/end), ${our_rate:-?} KiB per window after warm-up (osc/rdma's fragment: $frag_kb; upstream's baseline: ${base_rate:-none})"
mem_details="RSS start/after-warm-up(${warmup}s)/end:$memory $heap; samples every ${interval}s in $samples"
[ "$verdict" -le 1 ] || mem_details="run too short to sample: $mem_details"
report_verdict "$verdict" "memory/$name" "$mem_details"

# ---- registrations: btl/ofi's cache stays within btl_ofi_mr_cache_max
# (plus what is in use: each thread's window and our own buffers)
regs=$(heap_lines "$MPI_LOG" | awk -v max="$MR_CACHE_MAX" -v slack="$MR_IN_USE" '
    $5 < 0 { missing = 1; next }
    { if ($5 > peak[$1]) peak[$1] = $5; last[$1] = $5; wins[$1] = $3; if (!($1 in seen)) { seen[$1] = 1; ranks[++n] = $1 } }
    END {
        if (missing || n == 0) { print "2 no mr_held in the HEAP lines"; exit }
        bad = 0
        for (i = 1; i <= n; ++i) {
            r = ranks[i]
            if (peak[r] > max + slack) bad = 1
            out = out sprintf(" rank%s peak %d end %d after %d windows;", r, peak[r], last[r], wins[r])
        }
        printf "%d%s", bad, out
    }')
verdict=${regs%%[!0-9]*}
regs="registrations held (btl_ofi_mr_count - btl_ofi_mr_release_count), limit $MR_CACHE_MAX + $MR_IN_USE in use:${regs#"$verdict"}"
report_verdict "$verdict" "registrations/$name" "$regs"
faults_summary soak
