# Shared helpers of the parameter tests in tests/params.  Sourced, never run.
# shellcheck shell=bash
# shellcheck disable=SC2034 # the PARAMS_* variables are for the sourcing tests
#
# Each test runs short 2-rank jobs of build/mpi/p2p_smoke with one bad MCA
# value, then checks the job's output and its end with the expect_*
# functions below.  Every check prints one "ok:" or "FAIL:" line; finish()
# turns the count of failures into the exit status (0 pass, 1 fail).  A
# test that cannot run here exits with skip() (status 77).
#
# Environment:
#   BTL_OFI_PARAMS_PROVIDER  libfabric provider for the jobs (default sockets)
#   BTL_OFI_PARAMS_TIMEOUT   seconds before a job counts as hung (default 120)
#   BTL_OFI_PARAMS_LOGS      where job logs go (default: $BTL_OFI_LOGDIR, which
#                            contrib/check sets, else a fresh temporary dir)

# Run rather than sourced (a runner taking every tests/params/*.sh for a
# test): not a test, say so and skip.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    echo "SKIP lib.sh: helpers of the tests in tests/params, not a test itself"
    exit 77
fi

PARAMS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PARAMS_PROVIDER=${BTL_OFI_PARAMS_PROVIDER:-sockets}
PARAMS_TIMEOUT=${BTL_OFI_PARAMS_TIMEOUT:-120}
PARAMS_LOGS=${BTL_OFI_PARAMS_LOGS:-${BTL_OFI_LOGDIR:-}}
PARAMS_SMOKE=${BTL_OFI_BUILD:-$PARAMS_ROOT/build}/mpi/p2p_smoke
PARAMS_TEST=$(basename "$0" .sh)

params_failures=0
JOB_NAME=
JOB_LOG=
JOB_RC=
JOB_SECONDS=

skip() {
    echo "SKIP $PARAMS_TEST: $*"
    exit 77
}

# The MPI program and the launcher must exist; no build happens here.
require_smoke() {
    [ -x "$PARAMS_ROOT/contrib/mpirun" ] || skip "contrib/mpirun is missing"
    [ -x "$PARAMS_SMOKE" ] || skip "$PARAMS_SMOKE is not built (make -C standalone mpitests)"
}

ok() {
    echo "  ok: $*"
}

fail() {
    echo "  FAIL: $*"
    params_failures=$((params_failures + 1))
}

# run_job NAME EXPECTATION MPIRUN-ARGS...
# A 2-rank job of p2p_smoke with EXPECTATION (ofi, none or any: see
# tests/mpi/p2p_smoke.c).  Two-sided traffic goes through ob1; the BTL list
# and provider are the caller's to give.  Sets JOB_RC (124 or 137: hung
# and killed), JOB_LOG and JOB_SECONDS.
run_job() {
    local name=$1 expectation=$2
    shift 2
    local start
    if [ -z "$PARAMS_LOGS" ]; then
        PARAMS_LOGS=$(mktemp -d "${TMPDIR:-/tmp}/btl-ofi-params.XXXXXX")
    fi
    mkdir -p "$PARAMS_LOGS"
    JOB_NAME=$name
    JOB_LOG=$PARAMS_LOGS/$PARAMS_TEST.$(tr -c 'A-Za-z0-9_.,=-' '_' <<<"$name" | sed 's/_*$//').log
    echo "job $name: mpirun -np 2 $* p2p_smoke $expectation"
    start=$(date +%s)
    set +e
    timeout -k 10 "$PARAMS_TIMEOUT" "$PARAMS_ROOT/contrib/mpirun" -np 2 --oversubscribe \
        --mca pml ob1 --mca osc rdma "$@" "$PARAMS_SMOKE" "$expectation" >"$JOB_LOG" 2>&1 </dev/null
    JOB_RC=$?
    set -e
    JOB_SECONDS=$(($(date +%s) - start))
    echo "  (exit status $JOB_RC after ${JOB_SECONDS}s, log $JOB_LOG)"
}

show_log_tail() {
    echo "  ---- last lines of $JOB_LOG ----"
    tail -n 25 "$JOB_LOG" | tr -d "\\000" | sed 's/^/  | /'
}

# The message text, as a fixed string anywhere in the job's output.
expect_text() {
    local text=$1
    if grep -aqF -- "$text" "$JOB_LOG"; then
        ok "$JOB_NAME printed \"$text\""
    else
        fail "$JOB_NAME did not print \"$text\""
        show_log_tail
    fi
}

# A line matching the extended regular expression, e.g. for aligned fields.
expect_line() {
    local regex=$1 what=$2
    if grep -aqE -- "$regex" "$JOB_LOG"; then
        ok "$JOB_NAME printed $what"
    else
        fail "$JOB_NAME did not print $what (no line matching /$regex/)"
        show_log_tail
    fi
}

expect_no_text() {
    local text=$1 why=$2
    if grep -aqF -- "$text" "$JOB_LOG"; then
        fail "$JOB_NAME printed \"$text\": $why"
        grep -aF -m 3 -- "$text" "$JOB_LOG" | sed 's/^/  | /'
    else
        ok "$JOB_NAME did not print \"$text\""
    fi
}

# "Sorry! You were supposed to get help about" means the help file or the
# topic was not found: the user gets no explanation at all.
expect_help_found() {
    if grep -aqF "You were supposed to get help about" "$JOB_LOG"; then
        fail "$JOB_NAME: Open MPI could not find a help message of ours"
        grep -a -A4 -F "You were supposed to get help about" "$JOB_LOG" | head -n 5 | sed 's/^/  | /'
    else
        ok "$JOB_NAME: every help message was found"
    fi
}

# Neither hung nor crashed, whatever its exit status.
expect_no_crash() {
    if [ "$JOB_RC" = 124 ] || [ "$JOB_RC" = 137 ]; then
        fail "$JOB_NAME hung: killed after ${PARAMS_TIMEOUT}s"
        show_log_tail
        return
    fi
    if grep -aqiE "segmentation fault|terminated with signal|signal 11|signal 6|core dumped|SIGSEGV|SIGABRT|SIGBUS" "$JOB_LOG"; then
        fail "$JOB_NAME crashed"
        grep -aiE -m 5 "segmentation fault|terminated with signal|signal 11|signal 6|core dumped|SIGSEGV|SIGABRT|SIGBUS" "$JOB_LOG" | sed 's/^/  | /'
        return
    fi
    ok "$JOB_NAME neither hung nor crashed (exit status $JOB_RC)"
}

# The job ran to the end and p2p_smoke passed its checks.
expect_completed() {
    if [ "$JOB_RC" = 0 ] && grep -aqF "p2p_smoke: PASS" "$JOB_LOG"; then
        ok "$JOB_NAME completed and its data checked out"
    else
        fail "$JOB_NAME did not complete correctly (exit status $JOB_RC)"
        show_log_tail
    fi
}

expect_pass() {
    expect_no_crash
    expect_completed
}

# The job gave up with a non-zero status and said why, without crashing.
expect_clean_error() {
    expect_no_crash
    if [ "$JOB_RC" != 0 ] && [ "$JOB_RC" != 124 ] && [ "$JOB_RC" != 137 ]; then
        ok "$JOB_NAME ended with an error status ($JOB_RC), as it should"
    elif [ "$JOB_RC" = 0 ]; then
        fail "$JOB_NAME succeeded although no BTL should reach the peer"
    fi
}

# The "[bad parameter]" message for PARAM with VALUE, RANGE "MIN .. MAX"
# and the value used instead.
expect_bad_parameter() {
    local param=$1 value=$2 min=$3 max=$4 used=$5
    expect_text "An MCA parameter of the OFI BTL has a value outside its valid range."
    expect_line "Parameter: +$param\$" "Parameter: $param"
    expect_line "Value: +$value\$" "Value: $value"
    expect_line "Range: +$min \.\. $max\$" "Range: $min .. $max"
    expect_line "Using: +$used\$" "Using: $used"
}

# For each "VALUE USED" pair: a job with btl_ofi_NAME=VALUE prints the
# "[bad parameter]" message (range MIN .. MAX, USED instead) and still runs
# over btl/ofi.
expect_clamped_runs() {
    local name=$1 min=$2 max=$3 pair value used
    shift 3
    for pair in "$@"; do
        read -r value used <<<"$pair"
        run_job "$name=$value" ofi --mca btl ofi,self \
            --mca btl_ofi_provider_include "$PARAMS_PROVIDER" --mca "btl_ofi_$name" "$value"
        expect_bad_parameter "btl_ofi_$name" "$value" "$min" "$max" "$used"
        expect_help_found
        expect_pass
    done
}

# expect_on_across_hosts NAME TEXT WHY: btl_ofi_NAME's -1 (the default)
# acts only in a job that spans hosts, 1 also on one node: a one-node job
# at verbose 1 does not print TEXT by default (WHY says why it must not)
# and prints it with the parameter at 1.
expect_on_across_hosts() {
    local name=$1 text=$2 why=$3
    run_job "$name default $PARAMS_PROVIDER" ofi --mca btl ofi,self \
        --mca btl_ofi_provider_include "$PARAMS_PROVIDER" --mca btl_ofi_verbose 1
    expect_no_text "$text" "$why"
    expect_pass

    run_job "$name=1 $PARAMS_PROVIDER" ofi --mca btl ofi,self \
        --mca btl_ofi_provider_include "$PARAMS_PROVIDER" --mca "btl_ofi_$name" 1 \
        --mca btl_ofi_verbose 1
    expect_text "$text"
    expect_pass
}

# job_threads TAG COMM CMD...: for 20 s, every 0.2 s, runs CMD... PID TASK
# for each thread named COMM (/proc/PID/task/TASK) of the job whose ranks
# carry BTL_OFI_JOB_TAG=TAG in their environment (rma_busy_target; other
# jobs on the machine do not count).
job_threads() {
    local tag=$1 comm=$2 end=$((SECONDS + 20)) pid task
    shift 2
    while [ $SECONDS -lt $end ]; do
        for pid in $(pgrep -x rma_busy_target); do
            { tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null |
                grep -x "BTL_OFI_JOB_TAG=$tag" >/dev/null || continue
            for task in /proc/"$pid"/task/[0-9]*; do
                [ "$(cat "$task/comm" 2>/dev/null)" = "$comm" ] || continue
                # a thread may end between the listing and the command's read
                "$@" "$pid" "$task" || true
            done
        done
        sleep 0.2
    done
}

# awk_on_sched AWK PID TASK: job_threads' command for look_threads_sched.
awk_on_sched() {
    awk "$1" "$3/sched" 2>/dev/null
}

# look_threads_sched TAG AWK: for 20 s, every 0.2 s, the output of AWK run
# on /proc/PID/task/TID/sched of each btl-ofi-look thread of the job
# tagged TAG (job_threads), one line per thread and sample.
look_threads_sched() {
    job_threads "$1" btl-ofi-look awk_on_sched "$2"
}

# busy_target_log LABEL: names the job (JOB_NAME) and its log (JOB_LOG), for
# the files of the watchers a caller starts before busy_target_job LABEL.
busy_target_log() {
    JOB_NAME=$1 JOB_LOG=$PARAMS_LOGS/$PARAMS_TEST.$1.log
}

# busy_target_job LABEL MPIRUN-ARGS...: rma_busy_target -s 3 ($BUSY) under
# contrib/mpirun -np 2 with MPIRUN-ARGS, its ranks tagged
# BTL_OFI_JOB_TAG=$$.LABEL, its output in JOB_LOG, after the commands in
# BUSY_WRAP (an array, empty unless set).  Then stops the background
# processes in BUSY_WATCHERS and checks that the job neither crashed nor
# failed.
busy_target_job() {
    local label=$1
    shift
    busy_target_log "$label"
    set +e
    timeout -k 10 "$PARAMS_TIMEOUT" ${BUSY_WRAP[@]+"${BUSY_WRAP[@]}"} \
        "$PARAMS_ROOT/contrib/mpirun" -np 2 --mca pml ob1 --mca osc rdma --mca btl ofi,self \
        -x BTL_OFI_JOB_TAG="$$.$label" --mca btl_ofi_provider_include "$PARAMS_PROVIDER" \
        "$@" "$BUSY" -s 3 >"$JOB_LOG" 2>&1 </dev/null
    JOB_RC=$?
    set -e
    if [ -n "${BUSY_WATCHERS[*]+x}" ]; then
        kill "${BUSY_WATCHERS[@]}" 2>/dev/null || true
        wait "${BUSY_WATCHERS[@]}" 2>/dev/null || true
    fi
    expect_no_crash
    if [ "$JOB_RC" != 0 ] || ! grep -aqF "rma_busy_target: PASS" "$JOB_LOG"; then
        fail "rma_busy_target did not pass (exit status $JOB_RC, log $JOB_LOG)"
    fi
}

finish() {
    if [ "$params_failures" -gt 0 ]; then
        echo "FAIL $PARAMS_TEST: $params_failures check(s) failed${PARAMS_LOGS:+ (logs in $PARAMS_LOGS)}"
        exit 1
    fi
    echo "PASS $PARAMS_TEST"
    exit 0
}
