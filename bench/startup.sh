#!/bin/bash
# Time a 2-rank MPI job from launch to exit: with our btl/ofi carrying all
# traffic (--mca btl ofi,self) against one that does not load it
# (--mca btl ^ofi), and upstream's for reference.  Prints medians.
#
#   bench/startup.sh [RUNS] [PROVIDER]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/contrib/lib.sh"
runs=${1:-7}
prov=${2:-}

eval "$("$here/contrib/env")"
hello=$BTL_OFI_BUILD/bench/startup_hello
make -s -C "$here/standalone" BUILD="$BTL_OFI_BUILD" "$hello"

median() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

time_one() {
    local start end
    start=$(date +%s.%N)
    timeout 120 "$here/contrib/mpirun" "$@" -np 2 "$hello" >/dev/null 2>&1 || echo "run failed: $*" >&2
    end=$(date +%s.%N)
    echo "$end - $start" | bc -l
}

include=()
[ -n "$prov" ] && include=(--mca btl_ofi_provider_include "$prov")
declare -A samples
labels=("ours: --mca btl ofi,self" "without ofi: --mca btl ^ofi" "upstream: --stock --mca btl ofi,self,sm")
for ((r = 0; r < runs; r++)); do
    samples[0]+="$(time_one --mca btl ofi,self "${include[@]}") "
    samples[1]+="$(time_one --mca btl ^ofi) "
    samples[2]+="$(time_one --stock --mca btl ofi,self,sm) "
done
printf '# startup+teardown of a 2-rank job, median of %d runs (s)\n' "$runs"
for i in 0 1 2; do
    printf '%-45s %.3f\n' "${labels[$i]}" "$(echo "${samples[$i]}" | tr ' ' '\n' | grep . | median)"
done
