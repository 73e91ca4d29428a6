#!/bin/bash
# Two jobs that did not start each other meet, as coupled codes do: one
# PRRTE runtime (prte) runs both; the first (dpm -m serve) opens a port and
# writes it into a file, the second (dpm -m reach) reads it and connects.
# Over the merged communicator they talk two-sided and through created,
# dynamic and allocated windows, every byte checked, with btl ofi,self
# only: our component carries whatever crosses between the jobs.
#
#   tests/mpi/dvm_connect.sh PROVIDER NP [--mca NAME VALUE]...
#
# BTL_OFI_BUILD names the build (default build/); exit 0 when both jobs
# pass.  Separate mpiruns cannot meet under Open MPI 5: each has its own
# runtime, and a connect needs one that knows both jobs.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
provider=${1:?usage: dvm_connect.sh PROVIDER NP [--mca NAME VALUE]...}
np=${2:?usage: dvm_connect.sh PROVIDER NP [--mca NAME VALUE]...}
shift 2
eval "$("$root/contrib/env")"
dpm=${BTL_OFI_BUILD:-$root/build}/mpi/dpm
[ -x "$dpm" ] || { echo "dvm_connect: $dpm is not built" >&2; exit 2; }

work=$(mktemp -d)
export TMPDIR=$work # the runtime's session files: this run's alone
root_args=()
if [ "$(id -u)" = 0 ]; then
    root_args=(--allow-run-as-root)
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
server_pid=""
finish() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
    if [ -s "$work/uri" ]; then
        pterm --dvm-uri "$(head -1 "$work/uri")" ${root_args[@]+"${root_args[@]}"} \
            >/dev/null 2>&1 || true
    fi
    [ -s "$work/pid" ] && kill "$(cat "$work/pid")" 2>/dev/null
    rm -rf "$work"
}
trap finish EXIT
trap 'exit 143' TERM INT

prte --daemonize ${root_args[@]+"${root_args[@]}"} --report-uri "$work/uri" \
    --report-pid "$work/pid" >"$work/prte.log" 2>&1 || true
[ -s "$work/uri" ] || { echo "dvm_connect: prte did not start" >&2; cat "$work/prte.log" >&2; exit 1; }

# prun's own --mca does not reach an Open MPI job: the settings go as
# OMPI_MCA_ variables, named with -x (a job inherits prte's environment)
forward=(-x BTL_OFI_FLAVOUR)
set_mca() {
    export "OMPI_MCA_$1=$2"
    forward+=(-x "OMPI_MCA_$1")
}
set_mca pml ob1
set_mca btl ofi,self
set_mca osc rdma
set_mca mpi_yield_when_idle 1
set_mca btl_ofi_provider_include "$provider"
while [ $# -gt 0 ]; do
    [ "$1" = --mca ] && [ $# -ge 3 ] || { echo "dvm_connect: only --mca K V may follow" >&2; exit 2; }
    set_mca "$2" "$3"
    shift 3
done
job=(prun --dvm-uri "$(head -1 "$work/uri")" ${root_args[@]+"${root_args[@]}"}
    --map-by :OVERSUBSCRIBE --bind-to none -np "$np" "${forward[@]}")
echo "serving job: ${job[*]} $dpm -m serve -p $work/port"
"${job[@]}" "$dpm" -m serve -p "$work/port" 2>&1 | sed 's/^/[serve] /' &
server_pid=$!
rc=0
"${job[@]}" "$dpm" -m reach -p "$work/port" 2>&1 | sed 's/^/[reach] /' || rc=$?
wait "$server_pid" || rc=$?
server_pid=""
echo "dvm_connect: serving and reaching jobs ended, status $rc"
exit $rc
