#!/bin/bash
# The "stress" lane: every line of tests/mpi/stress.list, launched
# BTL_OFI_STRESS_REPS times (default 20) for each np and provider, on one
# node or (--hosts 2) across simulated hosts.
#
#   bash tests/mpi/stress.sh [--hosts N] [--provider P]... [--reps R] [--only NAME]...
#
# One line per (program, np, provider):
#   PASS|FAIL|SKIP  stress  NAME np=N PROVIDER [ARGS]  (R/R passed, median Xs, slowest Ys)
# A run passes when it exits 0 within BTL_OFI_STRESS_TIMEOUT seconds (60);
# the logs of failed runs are kept in ${BTL_OFI_LOGDIR:-build/check-logs}/stress.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=contrib/lib.sh
. "$ROOT/contrib/lib.sh"

REPS=${BTL_OFI_STRESS_REPS:-20}
TIMEOUT=${BTL_OFI_STRESS_TIMEOUT:-60}
LOGDIR=${BTL_OFI_LOGDIR:-$BTL_OFI_BUILD/check-logs}/stress
ALL_PROVIDERS=(sockets "tcp;ofi_rxm" shm net "net;ofi_rxm")
HOSTS_PROVIDERS=("tcp;ofi_rxm" sockets)
hosts=""
providers=()
only=()
while [ $# -gt 0 ]; do
    case $1 in
    --hosts) hosts=${2:?--hosts needs a count}; shift ;;
    --provider) providers+=("${2:?--provider needs a name}"); shift ;;
    --reps) REPS=${2:?--reps needs a count}; shift ;;
    --only) only+=("${2:?--only needs a program name}"); shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "stress.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
if [ ${#providers[@]} -eq 0 ]; then
    if [ -n "$hosts" ]; then
        providers=("${HOSTS_PROVIDERS[@]}")
    else
        providers=("${ALL_PROVIDERS[@]}")
    fi
fi
mkdir -p "$LOGDIR"

# median and maximum of the numbers on stdin, one per line
summarize() {
    sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "median %.1fs, slowest %.1fs", v[int((NR + 1) / 2)], v[NR] }'
}

# stress_case NAME NP PROVIDER [MPIRUN ARGS...] [-- PROGRAM ARGS...]
stress_case() {
    local name=$1 np=$2 p=$3
    shift 3
    local label="stress  $name  np=$np  $p"
    [ $# -gt 0 ] && label+="  $*"
    [ -n "$hosts" ] && label+="  hosts=$hosts"
    if ! fi_info -p "$p" -t FI_EP_RDM >/dev/null 2>&1; then
        echo "SKIP  $label  (libfabric offers no FI_EP_RDM provider '$p' here)"
        return
    fi
    local launcher=("$ROOT/contrib/mpirun")
    [ -n "$hosts" ] && launcher+=(--hosts "$hosts")
    mpi_test_command "$BTL_OFI_BUILD/mpi/$name" "$np" "$p" "$@"
    local tag
    tag=$(echo "$name-np$np-$p-$*" | tr -c 'A-Za-z0-9_.=-' '_')
    local passed=0 rep times=() log=$LOGDIR/$tag.log
    for ((rep = 1; rep <= REPS; rep++)); do
        local t0 rc
        t0=$(date +%s%N)
        timeout -k 10 "$TIMEOUT" "${launcher[@]}" "${MPI_TEST_CMD[@]}" </dev/null >"$log.run" 2>&1
        rc=$?
        times+=("$(echo "scale=2; ($(date +%s%N) - $t0) / 1000000000" | bc)")
        if [ $rc = 0 ]; then
            passed=$((passed + 1))
        elif [ $passed = 0 ] && grep -q 'found no usable libfabric provider' "$log.run"; then
            echo "SKIP  $label  (btl/ofi rejected provider '$p', see $log)"
            mv "$log.run" "$log"
            return
        else
            { echo "==== repetition $rep: exit $rc$([ $rc = 124 ] && echo ", timed out after ${TIMEOUT}s")"; cat "$log.run"; } >>"$log"
        fi
    done
    rm -f "$log.run"
    local status=PASS
    [ $passed = "$REPS" ] || status=FAIL
    echo "$status  $label  ($passed/$REPS passed, $(printf '%s\n' "${times[@]}" | summarize))"
    if [ $status = FAIL ]; then
        grep -a -m 5 -E 'FAIL|ERR|timed out' "$log" | sed 's/^/    /'
    fi
}

while IFS=$'\t' read -r _ line; do
    read -r -a fields <<<"$line"
    [ ${#fields[@]} -ge 3 ] || continue
    [ ${#only[@]} -eq 0 ] || [[ " ${only[*]} " == *" ${fields[0]} "* ]] || continue
    IFS=, read -r -a nps <<<"${fields[1]}"
    case_providers=("${providers[@]}")
    [ "${fields[2]}" = all ] || IFS=, read -r -a case_providers <<<"${fields[2]}"
    for np in "${nps[@]}"; do
        for p in "${case_providers[@]}"; do
            stress_case "${fields[0]}" "$np" "$p" "${fields[@]:3}"
        done
    done
done < <(manifest_lines "$ROOT/tests/mpi/stress.list")
