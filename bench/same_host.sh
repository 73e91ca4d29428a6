#!/bin/bash
# A same-host pair inside a job across hosts against a one-node job:
# osc_bench's 8-byte put, get, fetch-and-op, compare-and-swap and
# accumulate latencies over MPI_Win_create windows (MPI_Win_allocate
# reaches same-host peers through shared memory without a BTL), in four
# configurations launched in turn, round after round:
#   hosts          2 simulated hosts x 2 ranks (--map-by node: ranks 0 and
#                  2 on the first host), tcp;ofi_rxm, the defaults (puts
#                  and gets copied, atomics through the shm module); only
#                  the pair 0-2 times (osc_bench -p 1) while the other
#                  host's ranks wait asleep, as they would on cores of their
#                  own: the simulated hosts share this machine's two
#   hosts-noshm    the same with btl_ofi_local_atomics 0 (atomics through
#                  tcp;ofi_rxm's loopback)
#   node-tcp-shm   one node, 2 ranks, tcp;ofi_rxm with copies and the shm
#                  module forced (btl_ofi_local_copy 1, btl_ofi_local_atomics
#                  1): the hosts pair's paths without the second host, which
#                  tells what those paths cost apart from the hosts
#   node-np2       one node, shm, 2 ranks: the issue's reference
# Every configuration has two busy ranks on the two cores, so idle ranks
# spin (mpi_yield_when_idle 0) as they do on one node.
# Prints a Markdown table: the median of the rounds [lowest-highest], µs.
#
#   bash bench/same_host.sh [--rounds N] [--out DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/contrib/lib.sh"
rounds=3
out=""
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) rounds=${2:?--rounds needs a count} ; shift 2 ;;
    --out) out=${2:?--out needs a directory} ; shift 2 ;;
    *) die "unknown argument $1 (bash bench/same_host.sh [--rounds N] [--out DIR])" ;;
    esac
done
[ -n "$out" ] || out=$(mktemp -d "${TMPDIR:-/tmp}/btl-ofi-same-host.XXXXXX")
mkdir -p "$out"
bench=$BTL_OFI_BUILD/osc_bench
[ -x "$bench" ] || die "$bench is not built (make -C standalone bench)"
tests=(-t put_lat,get_lat,fop_lat,cas_lat,acc_lat -m 8 -f create)
common=(--mca pml ob1 --mca btl ofi,self --mca osc rdma)

exec 8>/run/lock/btlofi-hosts-lane.lock
flock -w 900 8 || die "another lane holds the simulated hosts"

# launch NAME ROUND MPIRUN-ARGS... [-- OSC_BENCH-ARGS...]
launch() {
    local name=$1 round=$2 mpirun_args=() bench_args=()
    shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        mpirun_args+=("$1")
        shift
    done
    [ $# -gt 0 ] && shift
    bench_args=("$@")
    echo "round $round: $name" >&2
    timeout 300 "$ROOT/contrib/mpirun" "${mpirun_args[@]}" "${common[@]}" "$bench" "${tests[@]}" \
        "${bench_args[@]}" >"$out/$name-$round.txt" 2>&1 </dev/null ||
        echo "  (exit $?, see $out/$name-$round.txt)" >&2
}

hosts=(--hosts 2 -np 4 --map-by node --mca mpi_yield_when_idle 0
    --mca btl_ofi_provider_include 'tcp;ofi_rxm')
for ((r = 1; r <= rounds; ++r)); do
    launch hosts $r "${hosts[@]}" -- -p 1
    launch hosts-noshm $r "${hosts[@]}" --mca btl_ofi_local_atomics 0 -- -p 1
    launch node-tcp-shm $r -np 2 --mca btl_ofi_provider_include 'tcp;ofi_rxm' \
        --mca btl_ofi_local_atomics 1 --mca btl_ofi_local_copy 1
    launch node-np2 $r -np 2 --mca btl_ofi_provider_include shm
done

python3 - "$out" <<'PY'
import glob, os, re, statistics, sys

out = sys.argv[1]
tests = ["put_lat", "get_lat", "fop_lat", "cas_lat", "acc_lat"]
order = ["hosts", "hosts-noshm", "node-tcp-shm", "node-np2"]
values = {}
for path in glob.glob(os.path.join(out, "*.txt")):
    config = re.sub(r"-\d+\.txt$", "", os.path.basename(path))
    test = None
    for line in open(path, errors="replace"):
        m = re.match(r"# osc_bench (\w+):", line)
        if m:
            test = m.group(1)
            continue
        m = re.match(r"^8\s+([\d.]+)", line)
        if m and test:
            values.setdefault(config, {}).setdefault(test, []).append(float(m.group(1)))
print("| configuration | " + " | ".join(tests) + " |")
print("|--|" + "--:|" * len(tests))
for config in order:
    cells = []
    for test in tests:
        v = values.get(config, {}).get(test, [])
        cells.append("%.2f [%.2f-%.2f]" % (statistics.median(v), min(v), max(v)) if v else "-")
    print("| %s | %s |" % (config, " | ".join(cells)))
print("\nraw outputs: %s" % out)
PY
