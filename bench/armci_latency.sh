#!/bin/bash
# ARMCI-MPI's own latency benchmarks (tests/ARMCI_PutS_latency and
# tests/ARMCI_AccS_latency, built by contrib/setup --clients) across 2
# simulated hosts with 2 ranks each, the layout of a cluster job: rank 0
# times strided operations to rank 1, on its own host (--pair same, the
# default) or on the other (--pair cross: --map-by node).  Prints one
# Markdown table per benchmark: rows x doubles per row, local / remote
# completion in microseconds, one column per implementation.
#
#   bash bench/armci_latency.sh [--impls L] [--pair same|cross]
#                               [--rows 1X1,2X1,...] [--limit S]
#
#   --impls   comma-separated (default ours,tcp,stock):
#             ours      our btl/ofi, its choice of provider (tcp;ofi_rxm)
#             ours-emu  ours with btl_ofi_emulate_atomics 1 (the target's
#                       CPU applies every atomic)
#             tcp       Open MPI's btl/tcp (--mca btl tcp,self)
#             stock     upstream's btl/ofi (contrib/mpirun --stock), sockets,
#                       two-sided mode
#   --rows    the rows to print (default 1X1,1X8,2X1,8X8,16X1,64X1,64X64,128X1)
#   --limit   seconds a launch may run (default 120); the benchmark sweeps
#             1..1024 x 1..1024 and is stopped once the rows asked for came
#             (or at the limit: later rows then read "-")
#
# The simulated hosts are brought up and removed under the hosts lane's
# lock, as tests/clients/armci.sh does.  Logs: build/bench-armci/.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=contrib/lib.sh
. "$ROOT/contrib/lib.sh"

impls=ours,tcp,stock pair=same limit=120
rows=1X1,1X8,2X1,8X8,16X1,64X1,64X64,128X1
while [ $# -gt 0 ]; do
    case $1 in
    --impls) impls=${2:?}; shift ;;
    --pair) pair=${2:?}; shift ;;
    --rows) rows=${2:?}; shift ;;
    --limit) limit=${2:?}; shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown option $1" ;;
    esac
    shift
done
case $pair in same | cross) ;; *) die "--pair same or cross" ;; esac
ARMCI=$(armci_build_dir ompi)
[ -x "$ARMCI/tests/ARMCI_PutS_latency" ] || die "ARMCI-MPI is not built: run contrib/setup --clients"
LOGDIR=$BTL_OFI_BUILD/bench-armci
mkdir -p "$LOGDIR"
IFS=, read -r -a IMPLS <<<"$impls"
IFS=, read -r -a ROWS <<<"$rows"
last_row=${ROWS[-1]}

impl_args() {
    local base=(--hosts 2 -np 4 --mca pml ob1 --mca osc rdma)
    [ "$pair" = same ] || base+=(--map-by node)
    case $1 in
    ours) ARGS=("${base[@]}" --mca btl ofi,self) ;;
    ours-emu) ARGS=("${base[@]}" --mca btl ofi,self --mca btl_ofi_emulate_atomics 1) ;;
    tcp) ARGS=("${base[@]}" --mca btl tcp,self) ;;
    stock) ARGS=(--stock "${base[@]}" --mca btl ofi,self --mca btl_ofi_mode 2
        --mca btl_ofi_provider_include sockets) ;;
    *) die "unknown implementation $1" ;;
    esac
}

exec 8>/run/lock/btlofi-hosts-lane.lock
flock -w 900 8 || die "another lane holds the simulated hosts"
trap '"$ROOT/contrib/hosts" down >/dev/null 2>&1 || true' EXIT
"$ROOT/contrib/hosts" down >/dev/null 2>&1 || true
"$ROOT/contrib/hosts" up 2 >"$LOGDIR/hosts-up.log" 2>&1

# run BENCH IMPL: the benchmark's output in $LOGDIR/BENCH-IMPL-PAIR.log,
# stopped once the last row asked for is printed.
run() {
    local bench=$1 impl=$2
    local log=$LOGDIR/$bench-$impl-$pair.log
    impl_args "$impl"
    : >"$log"
    timeout -k 5 "$limit" "$ROOT/contrib/mpirun" "${ARGS[@]}" "$ARMCI/tests/$bench" \
        </dev/null >"$log" 2>&1 &
    local pid=$!
    while kill -0 $pid 2>/dev/null; do
        if grep -q "^$last_row " "$log"; then
            kill -TERM $pid 2>/dev/null || true
            break
        fi
        sleep 0.5
    done
    wait $pid 2>/dev/null || true
}

for bench in ARMCI_PutS_latency ARMCI_AccS_latency; do
    for impl in "${IMPLS[@]}"; do
        run "$bench" "$impl"
    done
    echo
    echo "$bench, 2 hosts x 2 ranks, rank 0 -> rank 1 ($pair host), local / remote completion (us)"
    echo
    printf '| rows x doubles |'
    printf ' %s |' "${IMPLS[@]}"
    printf '\n|--|'
    printf -- '--:|%.0s' "${IMPLS[@]}"
    printf '\n'
    for row in "${ROWS[@]}"; do
        printf '| %s |' "${row/X/ × }"
        for impl in "${IMPLS[@]}"; do
            awk -v row="$row" '$1 == row && NF >= 3 { printf " %s / %s |", $2, $3; found = 1; exit }
                END { if (!found) printf " - |" }' "$LOGDIR/$bench-$impl-$pair.log"
        done
        printf '\n'
    done
done
