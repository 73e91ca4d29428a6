#!/bin/bash
# The "slurm" lane: our btl/ofi in jobs that Slurm starts, on the cluster
# of contrib/slurm (Slurm 22.05 on the simulated hosts of contrib/hosts).
#
#   bash tests/slurm/slurm.sh [--provider P] [--case NAME]... [--repeat N] [--help]
#
# One line per run:  PASS|FAIL|SKIP  slurm  CASE ... then a summary; exit 1
# if any run failed, else 0 (also when everything was skipped: not root,
# no network namespaces).
#
# What runs (provider tcp;ofi_rxm unless --provider):
#   srun      the programs of tests/mpi/*.tests once each (their line without
#             extra arguments, plus a dynamic-window list, the busy target
#             served by wake-ups and the threaded spin lock), started by srun
#             --mpi=pmix (contrib/srun) on 2 nodes x 1 rank; the flushed
#             notification on 3 x 1; busy target, spin lock, atomics and
#             matching on 2 x 2, atomics and collectives on 3 x 2 (np 2-6)
#   early     one rank's PMIx fence releases held 300 ms (LD_PRELOAD of
#             build/slurm/libfence_delay.so), np 2 and 4 on 2 nodes: its peers
#             leave MPI_Init (Slurm's fences without data do not wait for every
#             node) and send while it still waits in the fence of its modex,
#             before MPI_COMM_WORLD is the PML's; the job must pass, and the
#             shim's lines must show a peer past a fence the held rank was
#             still in
#   mpirun    mpirun inside an allocation (salloc): PRRTE takes the nodes from
#             Slurm and starts its daemons with srun; 2 x 2, 3 x 1, 3 x 2
#   sbatch    a batch script with mpirun and srun steps (sbatch --wait)
#   provider  no include list: the provider must not be shm, which it would
#             be if our component took the job for one node
#   provider  ... and on one node it must be shm: our component read the
#             job's locality from Slurm's PMIx both ways
#   nics      2 NICs per node and 2 ranks a node: every rank has a module on
#             each NIC
#   distro    the distribution's Open MPI 4.1.4 (external PMIx 4.2, as Slurm's
#             plugin) with our build-distro/ component, through srun
#   scancel   a job cancelled mid-run, and a rank killed (srun -K1, case
#             killrank): the job ends, no task, step daemon, PMIx directory
#             or shared-memory file is left, but for osc/rdma's window
#             segment of a rank killed in MPI_Win_create (Open MPI's, with
#             any BTL: docs/slurm.md), which is named in the PASS line and
#             removed
#   down      contrib/slurm down leaves no process, mount or namespace
# Every MPI program checks its data and that our MPI_T counters moved, so a
# pass means our component carried the traffic.
#
# --case NAME (srun, early, mpirun, sbatch, provider, scancel, killrank,
# distro, nics; repeatable) runs only those, between up and down; --repeat N
# runs them N times (nics once, at the end).  BTL_OFI_SLURM_BTL (default
# ofi,self) is every job's btl list: tcp,self gives a baseline of Open MPI's
# own for the scancel and killrank cases (the suite's programs then fail:
# our counters do not move).
# BTL_OFI_SLURM_TIMEOUT (default 180) limits each run, in seconds.  Logs:
# ${BTL_OFI_LOGDIR:-build/check-logs}/slurm.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=contrib/lib.sh
. "$ROOT/contrib/lib.sh"

SLURM=$ROOT/contrib/slurm
SRUN=$ROOT/contrib/srun
LOGDIR=${BTL_OFI_LOGDIR:-$BTL_OFI_BUILD/check-logs}/slurm
TIMEOUT=${BTL_OFI_SLURM_TIMEOUT:-180}
PROVIDER="tcp;ofi_rxm"
# the two-sided pipeline limits of p2p_sizes make 64 MiB slow on two cores
SUITE_ENV=(P2P_SIZES_MAX=4194304)
ALL_CASES="srun early mpirun sbatch provider scancel killrank distro nics"
CASES=()
REPEAT=1

while [ $# -gt 0 ]; do
    case $1 in
    --provider) PROVIDER=${2:?--provider needs a name}; shift ;;
    --provider=*) PROVIDER=${1#--provider=} ;;
    --case) CASES+=("${2:?--case needs a name}"); shift ;;
    --case=*) CASES+=("${1#--case=}") ;;
    --repeat) REPEAT=${2:?--repeat needs a count}; shift ;;
    --repeat=*) REPEAT=${1#--repeat=} ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown option $1" ;;
    esac
    shift
done
for c in ${CASES[@]+"${CASES[@]}"}; do
    [[ " $ALL_CASES " == *" $c "* ]] || die "unknown case $c ($ALL_CASES)"
done
[[ $REPEAT =~ ^[1-9][0-9]*$ ]] || die "--repeat needs a positive count, not $REPEAT"

# want CASE: no --case, or CASE among them
want() {
    [ ${#CASES[@]} = 0 ] || [[ " ${CASES[*]} " == *" $1 "* ]]
}

LANE=slurm
# shellcheck source=tests/common/lane.sh
. "$ROOT/tests/common/lane.sh"

# ------------------------------------------------------------------
# Can this machine do it at all?

lane_need_netns

mkdir -p "$LOGDIR"
# Slurm and munge (installed once), Open MPI and our component (cached)
if ! "$ROOT/contrib/setup" --slurm >"$LOGDIR/setup.log" 2>&1; then
    record FAIL "setup  contrib/setup --slurm  (see $LOGDIR/setup.log)"
    show_log_tail "$LOGDIR/setup.log"
    summary
    exit 1
fi
if ! make -s -k -C "$ROOT/standalone" BUILD="$BTL_OFI_BUILD" component mpitests robustness hosts slurm \
    >"$LOGDIR/build.log" 2>&1; then
    echo "slurm: building the component or the tests failed (see $LOGDIR/build.log);" \
        "what did build still runs" >&2
fi

# the distribution's Open MPI and our build-distro/ for it (before the
# hosts are taken: about 80 s the first time)
distro_ok=1
if want distro && ! "$ROOT/contrib/setup" --distro >"$LOGDIR/setup-distro.log" 2>&1; then
    distro_ok=0
fi

lane_take_hosts "$SLURM" down

eval "$("$ROOT/contrib/env")"
export OMPI_MCA_mpi_yield_when_idle=1
# our component and osc/rdma for every job, through the environment that
# srun and mpirun pass on to the ranks
# shellcheck disable=SC2054 # (ofi,self is one value)
BASE_ENV=(OMPI_MCA_pml=ob1 OMPI_MCA_btl="${BTL_OFI_SLURM_BTL:-ofi,self}" OMPI_MCA_osc=rdma)

safe_name() {
    echo "$1" | tr -c 'A-Za-z0-9_.=-' '_' | sed 's/_*$//' | cut -c1-120
}

# manifest_env EXTRA...: the words of a manifest line after PROVIDERS as
# JOB_ENV (--mca K V -> OMPI_MCA_K=V, -x K=V -> K=V) and JOB_ARGS (the
# program's, after --): srun has no --mca, and the environment reaches the
# ranks under srun and mpirun alike.
manifest_env() {
    JOB_ENV=() JOB_ARGS=()
    while [ $# -gt 0 ]; do
        case $1 in
        --mca) JOB_ENV+=("OMPI_MCA_$2=$3"); shift 3 ;;
        -x) JOB_ENV+=("$2"); shift 2 ;;
        --) shift; JOB_ARGS=("$@"); return 0 ;;
        *) die "manifest argument $1: not an --mca, -x or --" ;;
        esac
    done
}

# ------------------------------------------------------------------
# One job.  run_job LABEL CHECK LAUNCHER... : LAUNCHER is the whole command
# (env, contrib/srun or contrib/slurm run salloc ...); CHECK ("-" for none)
# names a function that gets the log and returns non-zero, after setting
# fail_reason, to fail a job that exited 0.

fail_reason=""

run_job() {
    local label=$1 check=$2
    shift 2
    local log
    log=$LOGDIR/$(safe_name "$label").log
    printf '# %s\n' "$(date -Is) $*" >"$log"
    local start rc=0 took
    start=$(date +%s.%N)
    timeout -k 10 "$TIMEOUT" "$@" </dev/null >>"$log" 2>&1 || rc=$?
    took=$(printf '%.1fs' "$(echo "$(date +%s.%N) - $start" | bc)")
    # (137 is also srun's own status when a task was killed: a timeout only
    # if the limit passed)
    if [ $rc = 124 ] || { [ $rc = 137 ] && [ "${took%%.*}" -ge "$TIMEOUT" ]; }; then
        # the job may outlive its srun: cancel whatever runs
        "$SLURM" run scancel --user=root >/dev/null 2>&1 || true
        record FAIL "$label  ($took, timed out after ${TIMEOUT}s, log $log)"
        show_log_tail "$log"
        return 0
    fi
    fail_reason=""
    if [ $rc != 0 ]; then
        fail_reason="exit $rc"
    elif grep -aq 'PMIX ERROR' "$log"; then
        fail_reason="PMIx errors in the output"
    elif [ "$check" != - ]; then
        "$check" "$log" || true
    fi
    if [ -n "$fail_reason" ]; then
        record FAIL "$label  ($took, $fail_reason, log $log)"
        show_log_tail "$log"
    else
        record PASS "$label  ($took)"
    fi
}

# layout NODES PER_NODE: Slurm's placement options
layout() {
    echo "-N $1 --ntasks-per-node=$2"
}

# suite_case srun|mpirun NODES PER_NODE NAME [MANIFEST EXTRA...]: a
# program of tests/mpi started by srun --mpi=pmix (contrib/srun), or by
# mpirun in an allocation of that shape, which takes its slots from Slurm
# (no -np, no --host) and starts prted through srun.
suite_case() {
    local how=$1 nodes=$2 per=$3 name=$4
    shift 4
    manifest_env "$@"
    local -a launch
    if [ "$how" = srun ]; then
        launch=("$SRUN")
    else
        launch=("$SLURM" run salloc --quiet)
    fi
    local -a shape
    read -r -a shape <<<"$(layout "$nodes" "$per")"
    launch+=("${shape[@]}")
    [ "$how" = srun ] || launch+=(mpirun --allow-run-as-root --bind-to none)
    run_job "$how  $name  np=$((nodes * per)) nodes=$nodes $PROVIDER${*:+  $*}" - \
        env "${BASE_ENV[@]}" OMPI_MCA_btl_ofi_provider_include="$PROVIDER" "${SUITE_ENV[@]}" \
        ${JOB_ENV[@]+"${JOB_ENV[@]}"} "${launch[@]}" "$BTL_OFI_BUILD/mpi/$name" \
        ${JOB_ARGS[@]+"${JOB_ARGS[@]}"}
}

# ------------------------------------------------------------------
# Checks on a log

# The provider lines of --mca btl_ofi_verbose 1: one per rank, never shm.
check_provider_not_shm() {
    local lines
    lines=$(tr -d '\000' <"$1" | grep 'btl:ofi: provider ' || true)
    if [ "$(grep -c . <<<"$lines")" -lt "$cur_np" ]; then
        fail_reason="$(grep -c . <<<"$lines") of $cur_np ranks printed their provider"
        return 1
    fi
    if grep -q 'btl:ofi: provider shm,' <<<"$lines"; then
        fail_reason="our component chose shm for a job across nodes"
        return 1
    fi
}

# Every rank ("[host:pid]" tag) has a module on each of 2 interfaces.
check_module_per_nic() {
    local text tag devs
    check_provider_not_shm "$1" || return 1
    text=$(tr -d '\000' <"$1" | sed -n 's/^.*\(\[btlofi-h[0-9]*:[0-9]*\]\) btl:ofi: module [0-9]* on \([^:]*\):.*$/\1 \2/p' | sort -u)
    if [ "$(awk '{print $1}' <<<"$text" | sort -u | grep -c .)" -lt "$cur_np" ]; then
        fail_reason="module lines from $(awk '{print $1}' <<<"$text" | sort -u | grep -c .) of $cur_np ranks"
        return 1
    fi
    for tag in $(awk '{print $1}' <<<"$text" | sort -u); do
        devs=$(awk -v t="$tag" '$1 == t {print $2}' <<<"$text" | sort -u | tr '\n' ' ')
        echo "# $tag modules on: $devs" >>"$1"
        if [ "$(wc -w <<<"$devs")" -lt 2 ]; then
            fail_reason="$tag has modules on '$devs', expected one on each of 2 NICs"
            return 1
        fi
    done
}

# One node: every rank printed its provider, and it is shm.
check_provider_shm() {
    local lines
    lines=$(tr -d '\000' <"$1" | grep 'btl:ofi: provider ' || true)
    if [ "$(grep -c 'btl:ofi: provider shm,' <<<"$lines")" -lt "$cur_np" ]; then
        fail_reason="not every rank chose shm on one node: $(sed 's/.*btl:ofi: provider \([^,]*\),.*/\1/' <<<"$lines" | sort | uniq -c | tr -s ' \n' ' ')"
        return 1
    fi
}

# The fence-delay cases: the shim ran on the held rank ($held_rank), and
# some peer's release of fence K+1 came before the held rank's release of
# fence K, so that messages reached it in a fence (the case the run is
# about happened).
check_fence_window() {
    local text early
    text=$(tr -d '\000' <"$1" | grep -a '^fence_delay: rank ' || true)
    if ! grep -q "^fence_delay: rank $held_rank fence [0-9]* released [0-9.]* held" <<<"$text"; then
        fail_reason="no fence of rank $held_rank was held (the shim did not run)"
        return 1
    fi
    early=$(awk -v h="$held_rank" '
        { t = $7 + 0; if ($3 == h) held[$5] = t; else if (!($5 in peer) || t < peer[$5]) peer[$5] = t }
        END { for (k in held) if ((k + 1) in peer && peer[k + 1] < held[k]) { print k; exit } }' <<<"$text")
    if [ -z "$early" ]; then
        fail_reason="no peer passed a fence while rank $held_rank was held in the one before: the early message did not happen"
        return 1
    fi
    echo "# a peer was released from fence $((early + 1)) before rank $held_rank from fence $early" >>"$1"
}

# ------------------------------------------------------------------
# Cancelled and killed jobs

# Processes in the hosts that are not the cluster's daemons.
strays() {
    local ns pid comm
    for ns in /run/netns/btlofi-h*; do
        [ -e "$ns" ] || continue
        for pid in $(ip netns pids "${ns##*/}" 2>/dev/null); do
            comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
            case $comm in munged | slurmctld | slurmscriptd | slurmd | "") ;; *) echo "$pid($comm)" ;; esac
        done
    done
}

# Files jobs left (called when no job runs): PMIx directories in the
# nodes' spools, anything in the nodes' temporary directories (the tasks'
# TMPDIR: Open MPI's session directories), shared-memory files in a node's
# /dev/shm (each slurmd has its own, contrib/netns-agent).
job_files() {
    local pid
    ls -d "$BTL_OFI_CACHE"/slurm/spool/*/pmix.* /run/btlofi-hosts/*/tmp/* 2>/dev/null || true
    for pid in $(pgrep -x slurmd); do
        nsenter -t "$pid" -m ls -A /dev/shm 2>/dev/null | sed "s|^|slurmd $pid /dev/shm/|" || true
    done
}

# osc/rdma's MPI_Win_create: the node's local rank 0 creates
# /dev/shm/osc_rdma.NODE.JOBID.CID.PID and unlinks it after a barrier of the
# node's ranks, so a rank killed before that barrier leaves it (Open MPI's
# code, with any BTL).
OSC_RDMA_LEFT="Open MPI osc/rdma's window segment left by a rank killed inside MPI_Win_create (not ours; see docs/slurm.md)"

# libfabric's shm removes its region (/dev/shm/PID:UID:INDEX:SUFFIX, the
# module that carries same-host atomics in a job across nodes) when the
# process ends or takes a signal it can catch; one killed with SIGKILL
# cannot.  Only the region of the rank the test killed is excused.
SHM_LEFT="libfabric shm's region of the rank killed with SIGKILL (see docs/slurm.md)"
killed_pid=""

# left_behind PIDDIR: job_files into left_other, except osc/rdma window
# segments whose PID is one of the job's ranks (PIDDIR/rank.R), which go
# into left_osc, and the shm region of $killed_pid, into left_shm; both
# are removed, so that the next cases start clean.
left_behind() {
    local pids line
    pids=" $(cat "$1"/rank.* 2>/dev/null | tr '\n' ' ' || true) "
    left_osc="" left_shm="" left_other=""
    while IFS= read -r line; do
        if [[ $line =~ ^slurmd\ ([0-9]+)\ (/dev/shm/osc_rdma\.[^/]*\.([0-9]+))$ ]] &&
            [[ $pids == *" ${BASH_REMATCH[3]} "* ]] &&
            nsenter -t "${BASH_REMATCH[1]}" -m rm -f "${BASH_REMATCH[2]}"; then
            left_osc+="${left_osc:+ }${BASH_REMATCH[2]}"
        elif [[ $line =~ ^slurmd\ ([0-9]+)\ (/dev/shm/([0-9]+):[0-9]+:[0-9]+:[0-9a-f]+)$ ]] &&
            [[ $pids == *" ${BASH_REMATCH[3]} "* ]] &&
            [ "${BASH_REMATCH[3]}" = "$killed_pid" ] &&
            nsenter -t "${BASH_REMATCH[1]}" -m rm -f "${BASH_REMATCH[2]}"; then
            left_shm+="${left_shm:+ }${BASH_REMATCH[2]}"
        else
            left_other+="${left_other:+ }$line"
        fi
    done < <(job_files)
}

# wait_for SECONDS CMD...: until CMD succeeds
wait_for() {
    local limit=$1 t
    shift
    for ((t = 0; t < limit * 5; ++t)); do
        "$@" && return 0
        sleep 0.2
    done
    return 1
}

pidfiles_count() {
    find "$1" -name 'rank.*' 2>/dev/null | wc -l
}

all_up() {
    [ "$(pidfiles_count "$1")" -ge "$2" ]
}

# No job in the queue, no task or step daemon in the hosts.
cluster_idle() {
    [ -z "$("$SLURM" run squeue -h 2>/dev/null)" ] && [ -z "$(strays)" ]
}

# scancel_case: a 2 x 2 soak job started by sbatch, cancelled once every
# rank runs.
scancel_case() {
    local label="scancel  soak  np=4 nodes=2 $PROVIDER  (a running job cancelled)"
    local dir=$LOGDIR/scancel log=$LOGDIR/scancel.log job state
    rm -rf "$dir"
    mkdir -p "$dir"
    cat >"$dir/job.sh" <<EOF
#!/bin/bash
srun --mpi=pmix $BTL_OFI_BUILD/robustness/soak -s 300 -t 1 -p $dir
EOF
    : >"$log"
    job=$(env "${BASE_ENV[@]}" OMPI_MCA_btl_ofi_provider_include="$PROVIDER" \
        "$SLURM" run sbatch --parsable -o "$dir/job.out" -N 2 --ntasks-per-node=2 "$dir/job.sh" 2>>"$log") ||
        { record FAIL "$label  (sbatch failed, log $log)"; return 0; }
    echo "job $job" >>"$log"
    if ! wait_for 60 all_up "$dir" 4; then
        record FAIL "$label  (only $(pidfiles_count "$dir") of 4 ranks started in 60 s, log $dir/job.out)"
        "$SLURM" run scancel "$job" || true
        return 0
    fi
    sleep 2 # mid-run: the ranks exchange data
    "$SLURM" run scancel "$job" >>"$log" 2>&1
    if ! wait_for 30 cluster_idle; then
        record FAIL "$label  (30 s after scancel: $(strays | tr '\n' ' ') still running, log $log)"
        return 0
    fi
    state=$("$SLURM" run scontrol show job "$job" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    left_behind "$dir"
    echo "state $state; files: $left_other; osc/rdma segments (removed): $left_osc" >>"$log"
    if [ "$state" != CANCELLED ]; then
        record FAIL "$label  (job state '$state', not CANCELLED, log $log)"
    elif [ -n "$left_other" ]; then
        record FAIL "$label  (left behind: $left_other${left_osc:+ $left_osc})"
    else
        record PASS "$label${left_osc:+  ($OSC_RDMA_LEFT: $left_osc)}"
    fi
}

# kill_rank_case: srun -K1 (kill on bad exit); rank 1 is killed with
# SIGKILL: srun must end with an error and take the other ranks with it.
kill_rank_case() {
    local label="scancel  soak  np=4 nodes=2 $PROVIDER  (one rank killed, srun -K1)"
    local dir=$LOGDIR/killrank log=$LOGDIR/killrank.log pid rc=0
    rm -rf "$dir"
    mkdir -p "$dir"
    env "${BASE_ENV[@]}" OMPI_MCA_btl_ofi_provider_include="$PROVIDER" \
        timeout -k 10 120 "$SRUN" -K1 -N 2 --ntasks-per-node=2 \
        "$BTL_OFI_BUILD/robustness/soak" -s 300 -t 1 -p "$dir" </dev/null >"$log" 2>&1 &
    local srun_pid=$!
    if ! wait_for 60 all_up "$dir" 4; then
        record FAIL "$label  (only $(pidfiles_count "$dir") of 4 ranks started in 60 s, log $log)"
        kill "$srun_pid" 2>/dev/null || true
        wait "$srun_pid" || true
        return 0
    fi
    sleep 2
    pid=$(cat "$dir/rank.1")
    killed_pid=$pid
    kill -KILL "$pid"
    wait "$srun_pid" || rc=$?
    # (srun's own status for a task killed by a signal is 128 + the signal)
    if [ $rc = 0 ] || [ $rc = 124 ]; then
        record FAIL "$label  (srun exit $rc$([ $rc = 124 ] && echo ": still running after 120 s"), log $log)"
    elif ! wait_for 30 cluster_idle; then
        record FAIL "$label  (still running: $(strays | tr '\n' ' '), log $log)"
    else
        left_behind "$dir"
        echo "files: $left_other; osc/rdma segments (removed): $left_osc; shm regions (removed): $left_shm" >>"$log"
        if [ -n "$left_other" ]; then
            record FAIL "$label  (left behind: $left_other${left_osc:+ $left_osc}${left_shm:+ $left_shm})"
        else
            record PASS "$label  (srun exit $rc${left_osc:+; $OSC_RDMA_LEFT: $left_osc}${left_shm:+; $SHM_LEFT: $left_shm})"
        fi
    fi
}

# ------------------------------------------------------------------
# The runs

up_case() {
    local args=("$@") log
    log=$LOGDIR/up-$(safe_name "$*").log
    if "$SLURM" up "${args[@]}" >"$log" 2>&1; then
        record PASS "up  contrib/slurm up ${args[*]}"
    else
        record FAIL "up  contrib/slurm up ${args[*]}  (log $log)"
        show_log_tail "$log"
        summary
        exit 1
    fi
}

# srun: every program once on 2 nodes x 1 rank, then the busy target and
# the spin lock (the programs that need a rank's progress while it
# computes or spins) and the atomics at 2 and 3 ranks a node.  (Two cores
# serve every simulated node: more ranks a program make the lane slow, not
# the test stronger.)
srun_cases() {
    local name
    while read -r name _; do
        suite_case srun 2 1 "$name"
    done < <(manifest_programs)
    suite_case srun 2 1 rma_dyn_list -- -n 250 -l shared
    suite_case srun 2 1 rma_busy_target --mca btl_ofi_progress_idle_us 100000 --mca btl_ofi_progress_wake_us 30
    suite_case srun 2 1 rma_spin_lock -- -t 2
    suite_case srun 3 1 rma_flush_notify -- -r 300
    for name in rma_atomics rma_busy_target rma_spin_lock p2p_matching; do
        suite_case srun 2 2 "$name"
    done
    for name in rma_atomics p2p_collectives; do
        suite_case srun 3 2 "$name"
    done
}

# a peer's messages reach a rank still in MPI_Init's modex fence: np 2
# (rank 0 sends to the held rank 1 first) and 2 x 2 (rank 1 on the first
# node sends to the held rank 2 on the second)
early_case() {
    local per=$1
    held_rank=$2
    run_job "early  p2p_smoke  np=$((2 * per)) nodes=2 $PROVIDER  (rank $held_rank's PMIx fences released 300 ms late)" \
        check_fence_window env "${BASE_ENV[@]}" OMPI_MCA_btl_ofi_provider_include="$PROVIDER" \
        "$SRUN" -N 2 --ntasks-per-node="$per" env LD_PRELOAD="$BTL_OFI_BUILD/slurm/libfence_delay.so" \
        BTL_OFI_FENCE_DELAY_RANK="$held_rank" BTL_OFI_FENCE_DELAY_MS=300 "$BTL_OFI_BUILD/mpi/p2p_smoke"
}

# mpirun inside an allocation
mpirun_cases() {
    local name
    for name in rma_atomics rma_busy_target rma_spin_lock p2p_mixed; do
        suite_case mpirun 2 2 "$name"
    done
    suite_case mpirun 3 1 rma_flush_notify -- -r 300
    suite_case mpirun 3 2 p2p_collectives
}

# a batch script with an mpirun step and an srun step
batch_case() {
    local dir=$LOGDIR/sbatch
    rm -rf "$dir"
    mkdir -p "$dir"
    cat >"$dir/job.sh" <<EOF
#!/bin/bash
#SBATCH -N 2
#SBATCH --ntasks-per-node=2
#SBATCH -o $dir/job.out
set -e
mpirun --allow-run-as-root --bind-to none $BTL_OFI_BUILD/mpi/rma_atomics
srun --mpi=pmix $BTL_OFI_BUILD/mpi/p2p_collectives
echo "batch script done"
EOF
    run_job "sbatch  rma_atomics (mpirun) p2p_collectives (srun)  np=4 nodes=2 $PROVIDER" check_batch \
        env "${BASE_ENV[@]}" OMPI_MCA_btl_ofi_provider_include="$PROVIDER" \
        "$SLURM" run sbatch --wait "$dir/job.sh"
}
check_batch() {
    cat "$LOGDIR/sbatch/job.out" >>"$1" 2>/dev/null || true
    grep -q '^batch script done' "$LOGDIR/sbatch/job.out" 2>/dev/null ||
        { fail_reason="the batch script did not finish"; return 1; }
}

# no include list: not shm across nodes; and on one node shm, which our
# component takes only for a job it knows to be on one node: both prove
# that it read Slurm's locality
provider_cases() {
    cur_np=4
    run_job "provider  p2p_smoke  np=4 nodes=2 (no include list, not shm)" check_provider_not_shm \
        env "${BASE_ENV[@]}" OMPI_MCA_btl_ofi_verbose=1 "$SRUN" -N 2 --ntasks-per-node=2 \
        "$BTL_OFI_BUILD/mpi/p2p_smoke"
    cur_np=2
    run_job "provider  p2p_smoke  np=2 nodes=1 (no include list, shm)" check_provider_shm \
        env "${BASE_ENV[@]}" OMPI_MCA_btl_ofi_verbose=1 "$SRUN" -N 1 --ntasks-per-node=2 \
        "$BTL_OFI_BUILD/mpi/p2p_smoke"
}

# the distribution's Open MPI through srun
distro_cases() {
    if [ $distro_ok = 0 ]; then
        record FAIL "distro  contrib/setup --distro  (see $LOGDIR/setup-distro.log)"
        show_log_tail "$LOGDIR/setup-distro.log"
        return 0
    fi
    local name
    for name in rma_atomics rma_busy_target p2p_collectives; do
        run_job "distro  $name  np=4 nodes=2 $PROVIDER" - env "${BASE_ENV[@]}" \
            OMPI_MCA_btl_ofi_provider_include="$PROVIDER" "${SUITE_ENV[@]}" \
            "$SRUN" --distro -N 2 --ntasks-per-node=2 "$BTL_OFI_DISTRO_BUILD/mpi/$name"
    done
}

"$SLURM" down >"$LOGDIR/down-at-start.log" 2>&1 || true
up_case 3

for ((rep = 0; rep < REPEAT; ++rep)); do
    if want srun; then srun_cases; fi
    if want early; then
        early_case 1 1
        early_case 2 2
    fi
    if want mpirun; then mpirun_cases; fi
    if want sbatch; then batch_case; fi
    if want provider; then provider_cases; fi
    if want scancel; then scancel_case; fi
    if want killrank; then kill_rank_case; fi
    if want distro; then distro_cases; fi
done

# 2 NICs a node: a module on each for every rank, traffic through both
if want nics; then
    "$SLURM" up 2 --nics 2 >"$LOGDIR/up-nics.log" 2>&1 || record FAIL "up  contrib/slurm up 2 --nics 2"
    cur_np=4
    run_job "nics  p2p_sizes  np=4 nodes=2 nics=2 $PROVIDER  (a module per NIC on every rank)" \
        check_module_per_nic env "${BASE_ENV[@]}" OMPI_MCA_btl_ofi_provider_include="$PROVIDER" \
        OMPI_MCA_btl_ofi_max_nics=2 OMPI_MCA_btl_ofi_verbose=1 "${SUITE_ENV[@]}" \
        "$SRUN" -N 2 --ntasks-per-node=2 "$BTL_OFI_BUILD/mpi/p2p_sizes"
fi

# down: nothing left
trap - EXIT
if "$SLURM" down >"$LOGDIR/down-final.log" 2>&1; then
    record PASS "down  contrib/slurm down  (no process, mount or namespace left)"
else
    record FAIL "down  contrib/slurm down  ($(tail -n 3 "$LOGDIR/down-final.log" | tr '\n' ' '))"
fi

summary
[ $n_fail = 0 ]
