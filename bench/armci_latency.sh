#!/bin/bash
# ARMCI-MPI's own latency benchmarks (tests/ARMCI_PutS_latency,
# tests/ARMCI_AccS_latency and the get column of benchmarks/strided-bench,
# built by contrib/setup --clients) across 2 simulated hosts with 2 ranks
# each, the layout of a cluster job: rank 0 times strided operations to
# rank 1, on its own host (--pair same, the default) or on the other
# (--pair cross: ranks on alternate hosts).  Prints one Markdown table per
# benchmark and pair: rows x doubles per row, microseconds, one column per
# implementation and the ratio of ours to the best of the others (not
# ours-*, which are ours tuned), value by value.  Put and accumulate: local
# / remote completion; get: a blocking ARMCI_GetS, for which ARMCI's tests/
# have no latency program of their own, only for the rows of one double
# (strided-bench sweeps every row count up to 1024 before it widens the
# rows, minutes later across the hosts).
#
#   bash bench/armci_latency.sh [--impls L] [--pair same|cross|both]
#                               [--rows 1X1,2X1,...] [--limit S] [--osc]
#                               [--rounds N] [--out DIR]
#
#   --impls   comma-separated (default ours,ours-direct,tcp,stock, and mpich
#             when built):
#             ours      our btl/ofi, its choice of provider (tcp;ofi_rxm)
#             ours-emu  ours with btl_ofi_emulate_atomics 1 (the target's
#                       CPU applies every atomic)
#             ours-direct  ours with ARMCI_STRIDED_METHOD=DIRECT: one MPI
#                       operation with a derived datatype per strided
#                       transfer, ARMCI-MPI's default on MPICH, instead of
#                       one per contiguous piece (its default on Open MPI)
#             tcp       Open MPI's btl/tcp (--mca btl tcp,self)
#             stock     upstream's btl/ofi (contrib/mpirun --stock), sockets,
#                       two-sided mode; at most 30 s a launch: at 10-30 ms
#                       an operation it reaches the first rows only
#             mpich     MPICH 4.0.2's ch4:ofi (contrib/setup --peers) with
#                       ARMCI-MPI built by its mpicc (--clients), launched
#                       by contrib/mpiexec, FI_PROVIDER=tcp;ofi_rxm and
#                       MPICH's defaults otherwise: its shared memory for
#                       the same-host pair; a log that does not name that
#                       provider reads "provider?"
#   --rows    the rows to print (default 1X1,1X8,2X1,8X8,16X1,64X1,64X64,128X1)
#   --limit   seconds a launch may run (default 90); the benchmarks sweep
#             1..1024 x 1..1024 and are stopped once the rows asked for came
#             (or at the limit: later rows then read "-")
#   --osc     also our own 8-byte rows for a same-host pair inside a 2-host
#             job: build/osc_bench -t put_lat,get_lat,fop_lat -m 8:8, np 4
#             with --map-by node (pairs 0-2 and 1-3, each on one host),
#             windows -f allocate and -f create, against the same rows of a
#             one-node np 2 job on shm (the target: within 1.5x) and of a
#             one-node np 4 job on shm (2 pairs on the 2 cores, as in the
#             2-host job); --rounds (default 3) interleaved launches, medians
#   --out DIR the tables also to DIR/summary.md, the logs to DIR/logs/
#             (default: stdout only, logs in build/bench-armci/)
#
# The simulated hosts are brought up and removed under the hosts lane's
# lock, as tests/clients/armci.sh does.  contrib/bench --armci runs it with
# --pair both --osc --out bench-out/armci-<timestamp>.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=contrib/lib.sh
. "$ROOT/contrib/lib.sh"

ARMCI=$(armci_build_dir ompi)
ARMCI_MPICH=$(armci_build_dir mpich)
impls=ours,ours-direct,tcp,stock pairs=same limit=90 osc=0 rounds=3 out=""
if mpich_built && [ -x "$ARMCI_MPICH/tests/ARMCI_PutS_latency" ]; then
    impls+=,mpich
fi
rows=1X1,1X8,2X1,8X8,16X1,64X1,64X64,128X1
cmdline="bench/armci_latency.sh${*:+ $*}"
while [ $# -gt 0 ]; do
    case $1 in
    --impls) impls=${2:?}; shift ;;
    --pair) pairs=${2:?}; shift ;;
    --rows) rows=${2:?}; shift ;;
    --limit) limit=${2:?}; shift ;;
    --osc) osc=1 ;;
    --rounds) rounds=${2:?}; shift ;;
    --out) out=${2:?}; shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown option $1" ;;
    esac
    shift
done
case $pairs in same | cross) ;; both) pairs="same cross" ;; *) die "--pair same, cross or both" ;; esac
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds needs a count"
[ -x "$ARMCI/tests/ARMCI_PutS_latency" ] || die "ARMCI-MPI is not built: run contrib/setup --clients"
if [[ ,$impls, == *,mpich,* ]]; then
    mpich_built || die "mpich: MPICH is not built (contrib/setup --peers)"
    [ -x "$ARMCI_MPICH/tests/ARMCI_PutS_latency" ] ||
        die "mpich: no ARMCI-MPI built with MPICH's mpicc (contrib/setup --clients, after --peers)"
fi
[ $osc = 0 ] || [ -x "$BTL_OFI_BUILD/osc_bench" ] || die "no $BTL_OFI_BUILD/osc_bench (make -C standalone bench)"
LOGDIR=$BTL_OFI_BUILD/bench-armci
if [ -n "$out" ]; then
    mkdir -p "$out"
    out=$(cd "$out" && pwd)
    LOGDIR=$out/logs
fi
mkdir -p "$LOGDIR"
IFS=, read -r -a IMPLS <<<"$impls"
IFS=, read -r -a ROWS <<<"$rows"
MPICH_PROVIDER="tcp;ofi_rxm"

# The benchmarks: program, title, values per row.
BENCHES=(ARMCI_PutS_latency ARMCI_AccS_latency strided-bench)
declare -A PROG=([ARMCI_PutS_latency]=tests/ARMCI_PutS_latency
    [ARMCI_AccS_latency]=tests/ARMCI_AccS_latency [strided-bench]=benchmarks/strided-bench)
declare -A TITLE=([ARMCI_PutS_latency]="strided put" [ARMCI_AccS_latency]="strided accumulate"
    [strided-bench]="strided get")

say() {
    printf '[%s] %s\n' "$(date +%T)" "$*" >&2
}

# rows_of BENCH LOG: the log's rows as "RXD value [value]", rows x doubles.
# The latency tests print just that (rows outermost); strided-bench prints
# "target doubles rows get put acc ...", doubles outermost, for targets
# 1..3 in turn: rank 1's get column.
rows_of() {
    case $1 in
    strided-bench) awk '$1 == 1 && NF >= 4 && $4 ~ /^[0-9.]+$/ { print $3 "X" $2, $4 }' "$2" ;;
    *) awk '$1 ~ /^[0-9]+X[0-9]+$/ && NF >= 3 { print $1, $2, $3 }' "$2" ;;
    esac
}

# rows_for BENCH: the rows of ROWS its table has (strided-bench: of one
# double).
rows_for() {
    local row
    for row in "${ROWS[@]}"; do
        [ "$1" != strided-bench ] || [ "${row#*X}" = 1 ] || continue
        echo "$row"
    done
}

# last_row BENCH: the row of its table the benchmark prints last.
last_row() {
    local row r d key best=-1 last=""
    for row in $(rows_for "$1"); do
        r=${row%X*} d=${row#*X}
        case $1 in
        strided-bench) key=$((d * 4096 + r)) ;;
        *) key=$((r * 4096 + d)) ;;
        esac
        if [ $key -gt $best ]; then
            best=$key last=$row
        fi
    done
    echo "$last"
}

# launch_of IMPL PAIR: the command (LAUNCH) that runs a program through IMPL.
# shellcheck disable=SC2054 # (ofi,self is one word of mpirun's)
launch_of() {
    local base=(--hosts 2 -np 4 --mca pml ob1 --mca osc rdma)
    [ "$2" = same ] || base+=(--map-by node)
    case $1 in
    ours) LAUNCH=("$ROOT/contrib/mpirun" "${base[@]}" --mca btl ofi,self) ;;
    ours-emu) LAUNCH=("$ROOT/contrib/mpirun" "${base[@]}" --mca btl ofi,self
        --mca btl_ofi_emulate_atomics 1) ;;
    ours-direct) LAUNCH=("$ROOT/contrib/mpirun" "${base[@]}" --mca btl ofi,self
        -x ARMCI_STRIDED_METHOD=DIRECT) ;;
    tcp) LAUNCH=("$ROOT/contrib/mpirun" "${base[@]}" --mca btl tcp,self) ;;
    stock) LAUNCH=("$ROOT/contrib/mpirun" --stock "${base[@]}" --mca btl ofi,self
        --mca btl_ofi_mode 2 --mca btl_ofi_provider_include sockets) ;;
    mpich)
        # 2 ranks a host, filled in order (0 and 1 together) or, one
        # process a host in turn (-ppn 1), alternating
        LAUNCH=("$ROOT/contrib/mpiexec" --hosts 2 -n 4)
        [ "$2" = same ] || LAUNCH+=(-ppn 1)
        LAUNCH+=(-genv FI_PROVIDER "$MPICH_PROVIDER" -genv MPIR_CVAR_DEBUG_SUMMARY 1) ;;
    *) die "unknown implementation $1" ;;
    esac
}

# run BENCH IMPL PAIR: the benchmark's output in $LOGDIR/BENCH-IMPL-PAIR.log,
# stopped once the last row asked for is printed (line-buffered through
# stdbuf: strided-bench does not flush its own).
run() {
    local bench=$1 impl=$2 pair=$3 dir=$ARMCI
    local log=$LOGDIR/$bench-$impl-$pair.log last start=$SECONDS seconds=$limit
    last=$(last_row "$bench")
    [ "$impl" != stock ] || [ "$seconds" -le 30 ] || seconds=30
    [ "$impl" != mpich ] || dir=$ARMCI_MPICH
    launch_of "$impl" "$pair"
    : >"$log"
    timeout -k 5 "$seconds" "${LAUNCH[@]}" stdbuf -oL "$dir/${PROG[$bench]}" \
        </dev/null >"$log" 2>&1 &
    local pid=$!
    while kill -0 $pid 2>/dev/null; do
        if rows_of "$bench" "$log" | grep -q "^$last "; then
            kill -TERM $pid 2>/dev/null || true
            break
        fi
        sleep 0.5
    done
    wait $pid 2>/dev/null || true
    say "$bench $impl $pair: $((SECONDS - start)) s"
}

# cell BENCH IMPL PAIR ROW: "local / remote", "value", "-" (not reached)
# or "provider?" (MPICH did not say it opened MPICH_PROVIDER).
cell() {
    local log=$LOGDIR/$1-$2-$3.log
    if [ "$2" = mpich ] && ! grep -q "^libfabric provider: $MPICH_PROVIDER - " "$log"; then
        echo "provider?"
        return
    fi
    rows_of "$1" "$log" | awk -v row="$4" '$1 == row { print (NF >= 3 ? $2 " / " $3 : $2); found = 1; exit }
        END { if (!found) print "-" }'
}

# ratio OURS OTHERS...: ours over the best of the others, value
# by value ("0.5 / 1.2"); "-" without numbers on both sides.
ratio() {
    printf '%s\n' "$@" | awk -F' / ' '
        NR == 1 { n = NF; for (i = 1; i <= NF; ++i) ours[i] = $i; next }
        { for (i = 1; i <= NF; ++i) if ($i ~ /^[0-9.]+$/ && (!(i in best) || $i + 0 < best[i])) best[i] = $i + 0 }
        END {
            s = ""
            for (i = 1; i <= n; ++i) {
                v = (ours[i] ~ /^[0-9.]+$/ && (i in best) && best[i] > 0) ? sprintf("%.2f", ours[i] / best[i]) : "-"
                s = s (i > 1 ? " / " : "") v
            }
            print s
        }'
}

# ------------------------------------------------------------------
# Our own 8-byte rows (--osc)

OSC_TESTS=(put_lat get_lat fop_lat)
OSC_CONFIGS=(hosts-allocate shm-allocate shm4-allocate hosts-create hostsnc-create shm-create
    shm4-create)

# osc_run CONFIG ROUND: one osc_bench launch, its log.
# shellcheck disable=SC2054
osc_run() {
    local config=$1 log=$LOGDIR/osc-$1-$2.log launch
    case $config in
    hosts-*) launch=(--hosts 2 -np 4 --map-by node --mca btl ofi,self) ;;
    hostsnc-*) launch=(--hosts 2 -np 4 --map-by node --mca btl ofi,self --mca btl_ofi_local_copy 0) ;;
    shm-*) launch=(-np 2 --mca btl ofi,self --mca btl_ofi_provider_include shm) ;;
    shm4-*) launch=(-np 4 --oversubscribe --mca btl ofi,self --mca btl_ofi_provider_include shm) ;;
    esac
    timeout -k 5 120 "$ROOT/contrib/mpirun" "${launch[@]}" --mca pml ob1 --mca osc rdma \
        "$BTL_OFI_BUILD/osc_bench" -t "$(IFS=,; echo "${OSC_TESTS[*]}")" -m 8:8 -f "${config#*-}" \
        </dev/null >"$log" 2>&1 || true
}

# osc_value CONFIG TEST: the median over the rounds of TEST's 8-byte row,
# and how many rounds gave one ("0.31 3"); "- 0" without any.
osc_value() {
    local r
    for ((r = 1; r <= rounds; ++r)); do
        awk -v t="$2" '$1 == "#" && $2 == "osc_bench" { cur = $3; sub(/:$/, "", cur) }
            cur == t && $1 == 8 && NF == 2 { print $2 }' "$LOGDIR/osc-$1-$r.log"
    done | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)], NR; else print "-", 0 }'
}

# osc_counters CONFIG [COUNTER]: what our counters say the first round's
# put_lat did through the BTL (put_count by default; 0: osc/rdma's
# shared-memory path).
osc_counters() {
    awk -v c="${2:-put_count}" '$2 == "osc_bench" { cur = $3 } cur == "put_lat:" && /btl_ofi pvars/ {
        for (i = 1; i <= NF; ++i) if (index($i, c "=") == 1) { sub(/^[^=]*=/, "", $i); print $i; exit } }' \
        "$LOGDIR/osc-$1-1.log"
}

# quotient A B: A / B to one decimal, "-" without two numbers.
quotient() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0)
        printf "%.1f", a / b; else print "-" }'
}

osc_report() {
    echo
    echo "Our own 8-byte rows (build/osc_bench -m 8:8), a same-host pair inside a 2-host job"
    echo "(np 4, --map-by node: pairs 0-2 and 1-3, each on one host, our choice of provider)"
    echo "against one-node jobs on shm, np 2 (the target: within 1.5x) and np 4 (2 pairs);"
    echo "median of $rounds interleaved launches, us"
    echo
    echo "| window | test | 2 hosts × 2 ranks, same-host pairs | the same, btl_ofi_local_copy 0 | one node, shm, np 2 | ratio | one node, shm, np 4 | ratio |"
    echo "|--|--|--:|--:|--:|--:|--:|--:|"
    local flavour test h nc s s4
    for flavour in allocate create; do
        for test in "${OSC_TESTS[@]}"; do
            read -r h _ <<<"$(osc_value "hosts-$flavour" "$test")"
            nc=-
            [ "$flavour" != create ] || read -r nc _ <<<"$(osc_value "hostsnc-$flavour" "$test")"
            read -r s _ <<<"$(osc_value "shm-$flavour" "$test")"
            read -r s4 _ <<<"$(osc_value "shm4-$flavour" "$test")"
            printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$flavour" "$test" "$h" "$nc" \
                "$s" "$(quotient "$h" "$s")" "$s4" "$(quotient "$h" "$s4")"
        done
    done
    echo
    echo "BTL puts in put_lat's first 2-host launch: allocate $(osc_counters hosts-allocate)," \
        "create $(osc_counters hosts-create) (0: osc/rdma's loads and stores on the shared segment);" \
        "of the create ones, copies to the same-host peer $(osc_counters hosts-create local_copy_count)"
}

# ------------------------------------------------------------------

report() {
    local pair bench row impl value cells with_ratio=0
    # the ratio column when ours is first and has company
    [ "${IMPLS[0]}" != ours ] || [ ${#IMPLS[@]} -lt 2 ] || with_ratio=1
    echo "# ARMCI-MPI latency, $(date '+%Y-%m-%d %H:%M')"
    echo
    echo "\`$cmdline\` at $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?');" \
        "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); logs in $LOGDIR"
    for pair in $pairs; do
        for bench in "${BENCHES[@]}"; do
            echo
            if [ "$bench" = strided-bench ]; then
                echo "${PROG[$bench]} (get column, rows of one double), 2 hosts x 2 ranks, rank 0 -> rank 1 ($pair host), blocking ARMCI_GetS, us"
            else
                echo "$bench, 2 hosts x 2 ranks, rank 0 -> rank 1 ($pair host), local / remote completion, us"
            fi
            echo
            printf '| %s (rows × doubles) |' "${TITLE[$bench]}"
            printf ' %s |' "${IMPLS[@]}"
            [ $with_ratio = 0 ] || printf ' ours ÷ best other |'
            printf '\n|--|'
            printf -- '--:|%.0s' "${IMPLS[@]}"
            [ $with_ratio = 0 ] || printf -- '--:|'
            printf '\n'
            for row in $(rows_for "$bench"); do
                printf '| %s |' "${row/X/ × }"
                cells=()
                for impl in "${IMPLS[@]}"; do
                    value=$(cell "$bench" "$impl" "$pair" "$row")
                    printf ' %s |' "$value"
                    [ "$impl" = ours ] && cells=("$value" ${cells[@]+"${cells[@]}"})
                    [[ $impl == ours* ]] || cells+=("$value")
                done
                [ $with_ratio = 0 ] || printf ' %s |' "$(ratio "${cells[@]}")"
                printf '\n'
            done
        done
    done
    [ $osc = 0 ] || osc_report
}

exec 8>/run/lock/btlofi-hosts-lane.lock
flock -w 900 8 || die "another lane holds the simulated hosts"
trap '"$ROOT/contrib/hosts" down >/dev/null 2>&1 || true' EXIT
"$ROOT/contrib/hosts" down >/dev/null 2>&1 || true
"$ROOT/contrib/hosts" up 2 >"$LOGDIR/hosts-up.log" 2>&1

for pair in $pairs; do
    for bench in "${BENCHES[@]}"; do
        for impl in "${IMPLS[@]}"; do
            run "$bench" "$impl" "$pair"
        done
    done
done
if [ $osc = 1 ]; then
    for ((round = 1; round <= rounds; ++round)); do
        for config in "${OSC_CONFIGS[@]}"; do
            osc_run "$config" "$round"
        done
        say "osc_bench round $round done"
    done
fi
if [ -n "$out" ]; then
    report | tee "$out/summary.md"
else
    report
fi
