# Shared by robustness.sh, sanitize.sh and soak.sh (all in tests/robustness/).
# Sourced, never run.
# shellcheck shell=bash
#
# Every case prints one line on stdout:
#   PASS|FAIL|SKIP  <lane>  <case>  <details>
# and leaves its whole output in $FAULTS_LOGS/<lane>/<case>.log; a failing
# case also prints the end of that log on stderr.

FAULTS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
FAULTS_SRC=$FAULTS_ROOT/tests/robustness
# what standalone/Makefile builds (tests/build.mk: $FAULTS_BUILD/<lane>/)
FAULTS_BUILD=${BTL_OFI_BUILD:-$FAULTS_ROOT/build}
FAULTS_OUT=$FAULTS_BUILD/robustness
FAULTS_LOGS=$FAULTS_OUT/logs
FAULTS_FAILED=0
FAULTS_PASSED=0
FAULTS_SKIPPED=0
FAULTS_T0=$(date +%s)

# Put in front of contrib/mpirun by faults_mpirun when set (a command and
# its arguments, e.g. a network namespace of the case's own).
FAULTS_WRAP=()

# Output of the last faults_mpirun: rc, seconds, log path.
MPI_RC=0
MPI_SECS=0
MPI_LIMIT=0
MPI_LOG=

faults_report() {
    local status=$1 lane=$2 name=$3
    shift 3
    printf '%s  %s  %s  %s\n' "$status" "$lane" "$name" "$*"
    case $status in
    PASS) FAULTS_PASSED=$((FAULTS_PASSED + 1)) ;;
    SKIP) FAULTS_SKIPPED=$((FAULTS_SKIPPED + 1)) ;;
    *)
        FAULTS_FAILED=$((FAULTS_FAILED + 1))
        if [ -n "${MPI_LOG:-}" ] && [ -f "$MPI_LOG" ]; then
            {
                echo "---- last lines of $MPI_LOG ----"
                tail -n 25 "$MPI_LOG" | cut -c1-300
                echo "----"
            } >&2
        fi
        ;;
    esac
}

faults_summary() {
    local lane=$1
    printf '# %s: %d passed, %d failed, %d skipped in %ds (logs: %s)\n' "$lane" \
        "$FAULTS_PASSED" "$FAULTS_FAILED" "$FAULTS_SKIPPED" $(($(date +%s) - FAULTS_T0)) \
        "$FAULTS_LOGS"
    [ "$FAULTS_FAILED" = 0 ]
}

# Put the cached Open MPI and our component on the path; false when the
# tree is not set up (then every case is a SKIP, said once).
faults_env() {
    if [ ! -x "$FAULTS_ROOT/contrib/env" ]; then
        return 1
    fi
    eval "$("$FAULTS_ROOT/contrib/env")"
    command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1
}

# The component directory contrib/env points at (first entry).
faults_component_dir() {
    local path=${OMPI_MCA_mca_base_component_path:-}
    echo "${path%%:*}"
}

# faults_make TARGET...: make -C standalone TARGET... into $FAULTS_BUILD
# (the targets of tests/build.mk: robustness, mpitests, ...), with the
# cached Open MPI's mpicc.
faults_make() {
    make -s -C "$FAULTS_ROOT/standalone" BUILD="$FAULTS_BUILD" "$@"
}

# Build the shim and the test programs of this directory into $FAULTS_OUT
# (make: only what is missing or older than its sources).
faults_build() {
    mkdir -p "$FAULTS_OUT" "$FAULTS_LOGS"
    faults_make robustness
}

# Kill (by pid) test programs of ours that outlived their job; prints how
# many there were.
faults_reap() {
    local pids pid n=0
    pids=$(pgrep -f "^$FAULTS_OUT/" 2>/dev/null || true)
    for pid in $pids; do
        kill -9 "$pid" 2>/dev/null || true
        n=$((n + 1))
    done
    echo $n
}

# faults_mpirun LANE CASE TIMEOUT MPIRUN-ARGS...
# Runs mpirun (contrib/mpirun: cached Open MPI, our component) with a
# timeout; sets MPI_RC, MPI_SECS and MPI_LOG.  rc 124/137 = timed out.
faults_mpirun() {
    local lane=$1 name=$2 limit=$3
    shift 3
    local dir=$FAULTS_LOGS/$lane
    MPI_LIMIT=$limit
    mkdir -p "$dir"
    MPI_LOG=$dir/$(echo "$name" | tr '/;: ' '____').log
    {
        printf 'command:'
        printf ' %q' "${FAULTS_WRAP[@]}" contrib/mpirun "$@"
        printf '\n'
    } >"$MPI_LOG"
    local start end
    start=$(date +%s.%N)
    set +e
    timeout -k 15 "$limit" "${FAULTS_WRAP[@]}" "$FAULTS_ROOT/contrib/mpirun" "$@" >>"$MPI_LOG" 2>&1 </dev/null
    MPI_RC=$?
    set -e
    end=$(date +%s.%N)
    MPI_SECS=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
    echo "exit: $MPI_RC after ${MPI_SECS}s" >>"$MPI_LOG"
}

# 124: timeout stopped it; 137 is also what mpirun returns for a rank
# killed by SIGKILL, so it counts only when the limit was reached.
faults_timed_out() {
    [ "$MPI_RC" = 124 ] ||
        { [ "$MPI_RC" = 137 ] && awk -v s="$MPI_SECS" -v l="$MPI_LIMIT" 'BEGIN { exit !(s >= l) }'; }
}

# Signs of a crash or of our component giving up the process; prints the
# first one found.  Signal 9 is left to the callers that expect it.
faults_crash_sign() {
    local log=$1
    # prterun wraps "exited on / signal N (Name)." over two lines
    grep -a -m1 -oE 'BTL OFI will now abort|terminated with signal [0-9]+|exited on signal (11|6|7|8|4)[^0-9]|^signal (11|6|7|8|4) \([A-Za-z ]+\)|Segmentation fault|free\(\): [a-z ]+|double free|corrupted [a-z ]+|stack smashing detected|Assertion .* failed' \
        "$log" 2>/dev/null || true
}

# The HEAP lines (tests/robustness/soak.c) of LOG as
# "rank seconds windows inuse_kb mr_held".
heap_lines() {
    { grep -a '^HEAP rank=' "$1" || true; } |
        sed -n 's/^HEAP rank=\([0-9]*\) seconds=\([0-9.]*\) .* windows=\([0-9]*\) inuse_kb=\([0-9]*\) mr_held=\(-\{0,1\}[0-9]*\).*/\1 \2 \3 \4 \5/p'
}

# Sum of FIELD=N over the lines of LOG that start with KEY (as the test
# programs print them: "PVARS rank=R put=.. retry=..").
faults_sum() {
    local log=$1 key=$2 field=$3
    { grep -a "^$key " "$log" 2>/dev/null || true; } |
        sed -n "s/.* $field=\\(-\\{0,1\\}[0-9]*\\).*/\\1/p" |
        awk '{ s += $1 } END { printf "%d", s }'
}

faults_count() {
    local log=$1 pattern=$2
    grep -a -c -E "$pattern" "$log" 2>/dev/null || true
}

# Value of FIELD in KEY's line of one rank.
faults_rank_field() {
    local log=$1 key=$2 rank=$3 field=$4
    { grep -a "^$key rank=$rank " "$log" 2>/dev/null || true; } | head -n1 |
        sed -n "s/.* $field=\\(-\\{0,1\\}[0-9]*\\).*/\\1/p"
}

# Injections the shim made, from its summary lines ("write=3/400 ...");
# a process that ended in MPI_Abort prints no summary: then its
# "inject ... (injection K)" lines are counted.
faults_injected() {
    local log=$1
    if ! grep -a -q 'fi_fault\[.*summary injected/calls:' "$log" 2>/dev/null; then
        faults_count "$log" 'fi_fault\[.*: inject '
        return
    fi
    { grep -a 'fi_fault\[.*summary injected/calls:' "$log" 2>/dev/null || true; } |
        { grep -a -oE ' [a-z_]+=[0-9]+/[0-9]+' || true; } | cut -d= -f2 | cut -d/ -f1 |
        awk '{ s += $1 } END { printf "%d", s }'
}

# Clean result: every one of NP ranks printed RESULT with no MPI error
# and no mismatch, and mpirun exited 0.
faults_exact() {
    local log=$1 np=$2
    [ "$MPI_RC" = 0 ] || return 1
    [ "$(faults_count "$log" '^RESULT rank=')" = "$np" ] || return 1
    [ "$(faults_count "$log" '^RESULT rank=.* mpi_errors=0 mismatches=0')" = "$np" ]
}
