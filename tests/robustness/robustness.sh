#!/bin/bash
# Robustness lanes of btl/ofi (default CI lanes, a few minutes on 2 cores):
#
#   exhaust      providers' queues shrunk to 4 entries: many outstanding
#                one-sided operations and sends complete, exact, no hang
#   fault        libfabric failures injected by tests/robustness/fi_fault.c
#                (EAGAIN, EIO, error completions, fi_av_insert, fi_mr_reg)
#   peer-death   a rank SIGKILLs itself mid-epoch / mid-exchange: the job
#                ends quickly, nothing is left behind; a new process whose
#                pid left a stale shm region behind still gets shm
#   access       window buffers freed and reallocated at the same address
#                get fresh registrations; access flags reported
#
#   tests/robustness/robustness.sh [LANE...]      (default: all four)
#
# One line per case: PASS|FAIL|SKIP  <lane>  <case>  <details>; logs under
# build/robustness/logs/.  Exit status 1 when any case failed.
# shellcheck disable=SC2054 # commas inside MCA values, not array separators
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/common/dpm_death.sh
. "$(dirname "$0")/../common/dpm_death.sh"

LANES=("$@")
[ ${#LANES[@]} -gt 0 ] || LANES=(exhaust fault peer-death access)

BASE=(--mca btl ofi,self --mca osc rdma --mca pml ob1)
SHIM=$FAULTS_OUT/libfi_fault.so


# ------------------------------------------------------------------------
# exhaust

# Environment that shrinks a provider's queues; sockets has no variable
# for its TX/RX queue sizes, only for its CQ.
queue_env() {
    case $1 in
    sockets) echo "FI_SOCKETS_DEF_CQ_SZ=4" ;;
    "tcp;ofi_rxm")
        echo "FI_OFI_RXM_TX_SIZE=4 FI_OFI_RXM_RX_SIZE=4 FI_OFI_RXM_MSG_TX_SIZE=4" \
            "FI_OFI_RXM_MSG_RX_SIZE=4 FI_TCP_TX_SIZE=4 FI_TCP_RX_SIZE=4"
        ;;
    shm) echo "FI_SHM_TX_SIZE=4 FI_SHM_RX_SIZE=4" ;;
    esac
}

env_args() {
    local var
    for var in "$@"; do
        printf -- '-x\n%s\n' "$var"
    done
}

exhaust_case() {
    local prov=$1 threshold=$2 kind=$3 name
    shift 3
    name="$kind/$(echo "$prov" | tr ';' '+')/threshold=$threshold"
    local -a xs vars
    read -r -a vars <<<"$(queue_env "$prov")"
    mapfile -t xs < <(env_args "${vars[@]}")
    # rd_num 4: the receive queue has 4 entries (see rx-below-rd_num)
    faults_mpirun exhaust "$name" 90 -np 2 "${xs[@]}" "${BASE[@]}" \
        --mca btl_ofi_provider_include "$prov" --mca btl_ofi_rd_num 4 \
        --mca btl_ofi_progress_threshold "$threshold" "$@"
    local ops retries crash details
    ops=$(faults_sum "$MPI_LOG" RESULT ops)
    retries=$(faults_sum "$MPI_LOG" PVARS retry)
    crash=$(faults_crash_sign "$MPI_LOG")
    details="ops=$ops eagain_retries=$retries time=${MPI_SECS}s"
    if faults_timed_out; then
        faults_report FAIL exhaust "$name" "hang: timed out after ${MPI_SECS}s ($details)"
    elif [ -n "$crash" ]; then
        faults_report FAIL exhaust "$name" "crash: $crash ($details)"
    elif ! faults_exact "$MPI_LOG" 2; then
        faults_report FAIL exhaust "$name" "not exact: rc=$MPI_RC, $(grep -a -m1 -E '^(MISMATCH|MPI_ERROR)' "$MPI_LOG" || echo 'no RESULT')"
    else
        faults_report PASS exhaust "$name" "$details"
    fi
}

# The component must come up when the provider's receive queue is smaller
# than btl_ofi_rd_num (it should post what fits).
rx_below_rd_num_case() {
    local prov=$1 var=$2 name
    name="rx-below-rd_num/$(echo "$prov" | tr ';' '+')"
    faults_mpirun exhaust "$name" 60 -np 2 -x "$var" "${BASE[@]}" \
        --mca btl_ofi_provider_include "$prov" --mca btl_ofi_verbose 1 \
        "$FAULTS_OUT/p2p_flood" -r 2 -m 16 -q
    if faults_exact "$MPI_LOG" 2 && [ "$(faults_sum "$MPI_LOG" PVARS send)" -gt 0 ]; then
        faults_report PASS exhaust "$name" "$var with default btl_ofi_rd_num (64): exact, time=${MPI_SECS}s"
    else
        local why
        why=$(grep -a -m1 -oE 'btl:ofi: fi_recv failed: [^"]*|MPI_INIT has failed[^.]*|Returned "[A-Za-z ]+"' "$MPI_LOG" || echo "rc=$MPI_RC")
        faults_report FAIL exhaust "$name" "$var with default btl_ofi_rd_num (64): component did not come up: $why"
    fi
}

# Runs one 2-rank job RUNS times on PROV (through FAULTS_WRAP when set) and
# stops at the first that hangs or is not exact, reporting it as a FAIL of
# NAME (WHERE says under what, may be empty); returns 1 then, 0 when every
# run was exact.
repeat_exact() {
    local name=$1 runs=$2 prov=$3 where=$4 i sent_recv
    shift 4
    for i in $(seq 1 "$runs"); do
        faults_mpirun exhaust "$name" 30 -np 2 "${BASE[@]}" --mca btl_ofi_provider_include "$prov" "$@"
        if faults_timed_out || ! faults_exact "$MPI_LOG" 2; then
            sent_recv=$({ grep -a '^PVARS' "$MPI_LOG" || true; } | sed 's/.*\(rank=[0-9]*\).*\(send=[0-9]*\).*\(recv=[0-9]*\).*/\1 \2 \3/' | tr '\n' ' ')
            faults_report FAIL exhaust "$name" "run $i of $runs${where:+ ($where)}: $(faults_timed_out && echo "hang (timed out after ${MPI_SECS}s)" || echo "rc=$MPI_RC") ${sent_recv:-no counters printed}; args: $*"
            return 1
        fi
    done
}

# The same small job many times: a hang that strikes one run in a few is
# caught before CI is green by luck.
repeat_case() {
    local prov=$1 runs=$2 name
    shift 2
    name="p2p-repeat/$(echo "$prov" | tr ';' '+')"
    if repeat_exact "$name" "$runs" "$prov" "" "$@"; then
        faults_report PASS exhaust "$name" "$runs runs exact; args: $*"
    fi
}

# sockets (libfabric 1.17) takes a message's 24-byte header only whole:
# when a burst stops inside one and the receive buffer is small, TCP's
# window closes for good (docs/providers.md: "`sockets` and TCP's zero window").  In a network
# namespace of its own whose tcp_rmem starts receive buffers at RMEM bytes,
# the stall comes often (16384: 8 of 103 launches before the component
# sized the buffers, 0 of 103 after); every launch must pass.  Needs root
# (unshare -n).
zero_window_case() {
    local runs=$1 rmem=$2 name=sockets-zero-window
    shift 2
    if ! unshare -n true 2>/dev/null; then
        faults_report SKIP exhaust "$name" "no network namespace of our own (unshare -n: not root?)"
        return
    fi
    # lo up, the small initial receive buffer, then the launcher ($0 and
    # "$@" are the inner shell's)
    # shellcheck disable=SC2016
    FAULTS_WRAP=(unshare -n sh -c 'ip link set lo up && sysctl -qw net.ipv4.tcp_rmem="4096 $0 33554432" && exec "$@"' "$rmem")
    if repeat_exact "$name" "$runs" sockets "tcp_rmem $rmem" "$@"; then
        faults_report PASS exhaust "$name" "$runs runs exact with receive buffers starting at $rmem bytes; args: $*"
    fi
    FAULTS_WRAP=()
}

lane_exhaust() {
    local prov threshold
    for prov in sockets "tcp;ofi_rxm" shm; do
        for threshold in 1 100000; do
            exhaust_case "$prov" "$threshold" rma "$FAULTS_OUT/rma_flood" -r 10 -p 256 -q
            exhaust_case "$prov" "$threshold" p2p "$FAULTS_OUT/p2p_flood" -r 4 -m 128 -q
        done
    done
    # eager sizes only (8 and 200 bytes go by fi_inject, 4000 and 16000 by
    # fi_send): on sockets one run in ~5 used to hang with messages lost
    repeat_case sockets 20 "$FAULTS_OUT/p2p_flood" -r 4 -m 128 -q -S 8,200,4000,16000
    zero_window_case 40 16384 "$FAULTS_OUT/p2p_flood" -r 4 -m 64 -q
    rx_below_rd_num_case "tcp;ofi_rxm" FI_OFI_RXM_RX_SIZE=4
    rx_below_rd_num_case shm FI_SHM_RX_SIZE=4
}

# ------------------------------------------------------------------------
# fault

# fault_case NAME EXPECT SPEC RANK PROVIDER NP PROGRAM ARGS...
#   EXPECT: exact   every operation completes exactly (EAGAIN)
#           error   the error must surface cleanly: an MPI error returned,
#                   a clean job end, or completion after an upper layer's
#                   retry; never a crash, a hang or an abort by us
# Extra mpirun arguments go in FAULT_EXTRA (an array) before the program;
# FAULT_VIA_SHM_MODULE=1: the shm module must have carried atomics.
FAULT_EXTRA=()
FAULT_VIA_SHM_MODULE=0
fault_case() {
    local name=$1 expect=$2 spec=$3 rank=$4 prov=$5 np=$6
    shift 6
    faults_mpirun fault "$name" 60 -np "$np" --oversubscribe \
        -x LD_PRELOAD="$SHIM" -x BTL_OFI_FAULT="$spec" -x BTL_OFI_FAULT_RANK="$rank" \
        -x FAULTS_ABORT_ON_ERROR=1 "${BASE[@]}" --mca btl_ofi_provider_include "$prov" \
        "${FAULT_EXTRA[@]}" "$@"
    local injected errors retries crash mpi_errors mismatches outcome details
    injected=$(faults_injected "$MPI_LOG")
    retries=$(faults_sum "$MPI_LOG" PVARS retry)
    errors=$(faults_sum "$MPI_LOG" PVARS error)
    mpi_errors=$(faults_sum "$MPI_LOG" RESULT mpi_errors)
    mismatches=$(faults_sum "$MPI_LOG" RESULT mismatches)
    crash=$(faults_crash_sign "$MPI_LOG")
    details="[$spec on rank $rank, $prov] injected=$injected eagain_retries=$retries error_count=$errors time=${MPI_SECS}s"

    if faults_timed_out; then
        faults_report FAIL fault "$name" "hang: timed out $details"
        return
    fi
    if [ -n "$crash" ]; then
        faults_report FAIL fault "$name" "crash: $crash $details"
        return
    fi
    if [ "$injected" = 0 ] && ! grep -a -q 'inject ' "$MPI_LOG"; then
        faults_report FAIL fault "$name" "nothing injected (call never made?) $details"
        return
    fi
    if [ "$FAULT_VIA_SHM_MODULE" = 1 ] && [ "$(faults_sum "$MPI_LOG" PVARS local_atomic)" -le 0 ]; then
        faults_report FAIL fault "$name" "no atomic went through the shm module (local_atomic 0) $details"
        return
    fi
    if faults_exact "$MPI_LOG" "$np"; then
        outcome=completed-exact
    elif grep -a -q '^RESULT .*aborting=1' "$MPI_LOG"; then
        local call what
        call=$({ grep -a -m1 -oE 'call=MPI_[A-Za-z_]+' "$MPI_LOG" || true; } | cut -d= -f2)
        what=$({ grep -a -m1 '^MPI_ERROR' "$MPI_LOG" || true; } | sed 's/.*: //')
        outcome="mpi-error-returned ($call: $what)"
    elif [ "$mismatches" -gt 0 ] && [ "$mpi_errors" = 0 ]; then
        outcome=silent-corruption
    elif [ "$MPI_RC" != 0 ] && [ "$(faults_count "$MPI_LOG" '^RESULT ')" -lt "$np" ]; then
        outcome="clean-job-end (rc=$MPI_RC: $(grep -a -m1 -oE 'MPI_INIT has failed[^.]*|FATAL|MPI_ERR_[A-Z_]+|[a-z_]+\.c:[0-9]+ FATAL|called "abort"|MPI_ABORT was invoked' "$MPI_LOG" || echo 'ended early'))"
    else
        outcome="other (rc=$MPI_RC)"
    fi
    case $expect in
    exact)
        if [ "$outcome" = completed-exact ] && [ "$retries" -gt 0 ]; then
            faults_report PASS fault "$name" "$outcome $details"
        elif [ "$outcome" = completed-exact ]; then
            faults_report FAIL fault "$name" "completed but eagain_retries=0: the refusals were not counted $details"
        else
            faults_report FAIL fault "$name" "$outcome $details"
        fi
        ;;
    error)
        case $outcome in
        silent-corruption)
            if [ "$errors" -gt 0 ]; then
                # our component reported the error; the layer above dropped it
                faults_report PASS fault "$name" "error delivered to the caller with an error status, which it ignored: lost update ($mismatches mismatches) $details"
            else
                faults_report FAIL fault "$name" "$outcome $details"
            fi
            ;;
        other*) faults_report FAIL fault "$name" "$outcome $details" ;;
        completed-exact)
            if [ "$errors" -gt 0 ]; then
                outcome="$outcome (the error reached the caller, which recovered or ignored it)"
            fi
            faults_report PASS fault "$name" "$outcome $details"
            ;;
        *) faults_report PASS fault "$name" "$outcome $details" ;;
        esac
        ;;
    esac
}

# The peer-unreachable message must be ours and must be readable.
unreachable_case() {
    local name=$1 btls=$2 expect=$3
    shift 3
    faults_mpirun fault "$name" 60 -np 2 -x LD_PRELOAD="$SHIM" -x BTL_OFI_FAULT=av_insert:1*:eio \
        -x BTL_OFI_FAULT_RANK=1 --mca btl "$btls" --mca pml ob1 \
        --mca btl_ofi_provider_include sockets "$@"
    local crash msg
    crash=$(faults_crash_sign "$MPI_LOG")
    if grep -a -q 'The OFI BTL cannot reach a peer process' "$MPI_LOG"; then
        msg="[peer unreachable] shown"
    elif grep -a -q 'You were supposed to get help about' "$MPI_LOG"; then
        msg="[peer unreachable] raised but its text was not found ($(grep -a -m1 -oE '/[^ ]*help-mpi-btl-ofi.txt: No such file or directory' "$MPI_LOG" || echo 'help file missing'))"
    else
        msg="no [peer unreachable] message"
    fi
    if faults_timed_out || [ -n "$crash" ]; then
        faults_report FAIL fault "$name" "${crash:-hang} ($msg)"
    elif [ "$msg" != "[peer unreachable] shown" ]; then
        faults_report FAIL fault "$name" "$msg; job rc=$MPI_RC"
    elif [ "$expect" = runs ] && faults_exact "$MPI_LOG" 2; then
        faults_report PASS fault "$name" "$msg; job completed exactly over the other BTLs, time=${MPI_SECS}s"
    elif [ "$expect" = fails ] && [ "$MPI_RC" != 0 ]; then
        faults_report PASS fault "$name" "$msg; job ended cleanly: $(grep -a -m1 -oE 'MPI_INIT has failed because at least one MPI process is unreachable|MPI_ERR_[A-Z]+' "$MPI_LOG" || echo "rc=$MPI_RC")"
    else
        faults_report FAIL fault "$name" "$msg; unexpected end rc=$MPI_RC"
    fi
}

lane_fault() {
    local rma=("$FAULTS_OUT/rma_flood" -r 6 -p 128 -q)
    local p2p=("$FAULTS_OUT/p2p_flood" -r 4 -m 64 -q)
    local big=("$FAULTS_OUT/p2p_flood" -r 4 -m 32 -S 4000,70000 -q)

    # EAGAIN: refused posts are retried, everything completes exactly
    fault_case eagain/put exact 'write:3+:eagain' all sockets 2 "${rma[@]}"
    fault_case eagain/get exact 'read:2+:eagain' all sockets 2 "${rma[@]}"
    fault_case eagain/atomics exact 'atomic:2+:eagain,fetch_atomic:2+:eagain,compare_atomic:2+:eagain' all sockets 2 "${rma[@]}"
    fault_case eagain/put-burst exact 'write:100-400:eagain' all sockets 2 "${rma[@]}"
    fault_case eagain/put-rxm exact 'write:3+:eagain,fetch_atomic:3+:eagain' all "tcp;ofi_rxm" 2 "${rma[@]}"
    # the same through the shm module for same-host atomics (forced on one
    # node): its refusals are retried on its own context
    FAULT_EXTRA=(--mca btl_ofi_local_atomics 1) FAULT_VIA_SHM_MODULE=1
    fault_case eagain/atomics-shm-module exact 'atomic:2+:eagain,fetch_atomic:2+:eagain,compare_atomic:2+:eagain' all "tcp;ofi_rxm" 2 "${rma[@]}"
    FAULT_EXTRA=() FAULT_VIA_SHM_MODULE=0
    fault_case eagain/send exact 'send:2+:eagain' all sockets 2 "${p2p[@]}"
    fault_case eagain/send-burst exact 'send:50-300:eagain' all sockets 2 "${p2p[@]}"
    fault_case eagain/rget-burst exact 'read:3-200:eagain' all sockets 2 "${big[@]}"
    fault_case eagain/cq-read exact 'cq_read:3+:eagain,write:5+:eagain,send:5+:eagain' all sockets 2 "${rma[@]}"
    fault_case eagain/np4 exact 'write:4+:eagain,send:4+:eagain,fetch_atomic:4+:eagain' all sockets 4 "${rma[@]}"

    # EIO at post time and as an error completion, on rank 0
    fault_case eio/put error 'write:200:eio' 0 sockets 2 "${rma[@]}"
    fault_case eio/get error 'read:20:eio' 0 sockets 2 "${rma[@]}"
    fault_case eio/fetch-atomic error 'fetch_atomic:3:eio' 0 sockets 2 "${rma[@]}"
    FAULT_EXTRA=(--mca btl_ofi_local_atomics 1) FAULT_VIA_SHM_MODULE=1
    fault_case eio/fetch-atomic-shm-module error 'fetch_atomic:3:eio' 0 "tcp;ofi_rxm" 2 "${rma[@]}"
    FAULT_EXTRA=() FAULT_VIA_SHM_MODULE=0
    fault_case eio/send error 'send:40:eio' 0 sockets 2 "${p2p[@]}"
    fault_case eio/rget error 'read:5:eio' 0 sockets 2 "${big[@]}"
    fault_case eio/put-rxm error 'write:200:eio' 0 "tcp;ofi_rxm" 2 "${rma[@]}"
    fault_case cqerr/rma error 'cq_read:300:cqerr_rma' 0 sockets 2 "${rma[@]}"
    fault_case cqerr/send error 'cq_read:100:cqerr_send' 0 sockets 2 "${p2p[@]}"
    # the same on each kind of send ob1 makes here, by its length (our 16-byte
    # header + ob1's): the match of a 4000-byte eager message, the RGET
    # header of a 70000-byte one (it carries our 24-byte registration
    # handle; its request completes on the peer's FIN,
    # so the error must reach ob1 before that FIN does), rank 0's FIN for
    # rank 1's RGET and an 8-byte match sent inline (both BTL-owned, no
    # callback: counted, the job completes)
    fault_case cqerr/send-eager error 'cq_read:1:cqerr_send@4030' 0 sockets 2 "${p2p[@]}"
    fault_case cqerr/send-rget error 'cq_read:1:cqerr_send@88' 0 sockets 2 "${p2p[@]}"
    fault_case cqerr/send-fin error 'cq_read:1:cqerr_send@40' 0 sockets 2 "${p2p[@]}"
    fault_case cqerr/send-inline error 'cq_read:1:cqerr_send@38' 0 sockets 2 "${p2p[@]}"

    # registration refused
    fault_case mr-reg/window error 'mr_reg:1*:eio' 0 sockets 2 "${rma[@]}"
    fault_case mr-reg/rget error 'mr_reg:1*:eio' all sockets 2 "${big[@]}"

    # address vector refused: the peer is unreachable through us
    unreachable_case av-insert/with-sm ofi,sm,self runs "$FAULTS_OUT/p2p_flood" -r 2 -m 16 -q
    unreachable_case av-insert/ofi-only ofi,self fails "$FAULTS_OUT/p2p_flood" -r 2 -m 16 -q
}

# ------------------------------------------------------------------------
# peer-death

peer_death_case() {
    local mode=$1 prov=$2 name
    name="$mode/$(echo "$prov" | tr ';' '+')"
    faults_mpirun peer-death "$name" 120 -np 3 --oversubscribe "${BASE[@]}" \
        --mca btl_ofi_provider_include "$prov" "$FAULTS_OUT/peer_death" "$mode" -v 1 -i 30 -t 90
    local end killed_at took left crash named
    end=$(date +%s.%N)
    killed_at=$({ grep -a -m1 '^KILL rank=' "$MPI_LOG" || true; } | sed -n 's/.* at=\([0-9.]*\).*/\1/p')
    sleep 2
    left=$(faults_reap)
    crash=$(faults_crash_sign "$MPI_LOG")
    named=$(grep -a -m1 -oE 'process rank 1 with PID [0-9]+ on node [^ ]+ exited on|Process name: \[[^]]*,1\]' "$MPI_LOG" || true)
    if [ -z "$killed_at" ]; then
        faults_report FAIL peer-death "$name" "the victim never reached its kill point (rc=$MPI_RC, ${MPI_SECS}s)"
        return
    fi
    took=$(awk -v a="$killed_at" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
    local details="job ended ${took}s after the kill, rc=$MPI_RC, left behind: $left"
    if faults_timed_out || grep -a -q '^SURVIVED' "$MPI_LOG"; then
        faults_report FAIL peer-death "$name" "survivors kept running: $details"
    elif [ -n "$crash" ]; then
        faults_report FAIL peer-death "$name" "crash among survivors: $crash; $details"
    elif [ "$left" != 0 ]; then
        faults_report FAIL peer-death "$name" "processes left behind; $details"
    elif [ -z "$named" ]; then
        faults_report FAIL peer-death "$name" "no message names the failed rank; $details"
    elif awk -v t="$took" 'BEGIN { exit !(t > 30) }'; then
        faults_report FAIL peer-death "$name" "too slow (limit 30 s): $details"
    else
        faults_report PASS peer-death "$name" "$details; \"$named\""
    fi
}

# A job killed with SIGKILL leaves its shm regions behind; when a new
# process gets the same pid, shm used to refuse its endpoint (fi_enable:
# EBUSY) and btl/ofi dropped the provider.  Our endpoints carry a name of
# their own, so both ranks must come up on shm and pass.
stale_shm_case() {
    local list
    if ! fi_info -p shm -t FI_EP_RDM >/dev/null 2>&1; then
        faults_report SKIP peer-death stale-shm-region "libfabric offers no shm provider here"
        return
    fi
    list=$(mktemp)
    faults_mpirun peer-death stale-shm-region 60 -np 2 -x STALE_SHM_LIST="$list" "${BASE[@]}" \
        --mca btl_ofi_provider_include shm --mca btl_ofi_verbose 20 \
        "$FAULTS_ROOT/tests/robustness/stale_shm_region.sh" "$FAULTS_OUT/rma_flood" -r 4 -p 64 -q
    local planted named
    planted=$(wc -l <"$list")
    named=$(grep -a -c 'shm: endpoint named' "$MPI_LOG" || true)
    xargs -r rm -f <"$list"
    rm -f "$list"
    local details="rc=$MPI_RC, ${MPI_SECS}s, $planted stale regions planted, $named endpoints renamed"
    if [ "$planted" != 2 ]; then
        faults_report FAIL peer-death stale-shm-region "the wrapper did not run on both ranks; $details"
    elif ! faults_exact "$MPI_LOG" 2; then
        local why
        why=$(faults_crash_sign "$MPI_LOG")
        [ -n "$why" ] || why=$(grep -a -m1 -oE 'Call: +fi_[a-z_]+' "$MPI_LOG" || echo 'not exact')
        faults_report FAIL peer-death stale-shm-region "$why; $details"
    else
        faults_report PASS peer-death stale-shm-region "$details"
    fi
}

# A spawned child SIGKILLs itself while its parents exchange with it
# (tests/common/dpm_death.sh says what must follow).
dpm_death_case() {
    local prov=$1 name
    name="dpm-child/$(echo "$prov" | tr ';' '+')"
    faults_mpirun peer-death "$name" 60 -np 2 --oversubscribe "${BASE[@]}" \
        --mca btl_ofi_provider_include "$prov" "$FAULTS_BUILD/mpi/dpm" -m die
    local left hung=0 verdict
    sleep 2
    left=$(faults_reap)
    ! faults_timed_out || hung=1
    verdict=$(dpm_death_verdict "$hung" "$left" "$MPI_LOG")
    faults_report "${verdict%% *}" peer-death "$name" \
        "${verdict#* }; rc=$MPI_RC, ${MPI_SECS}s, left behind: $left"
}

lane_peer_death() {
    stale_shm_case
    dpm_death_case sockets
    dpm_death_case "tcp;ofi_rxm"
    dpm_death_case shm
    peer_death_case rma sockets
    peer_death_case p2p sockets
    peer_death_case rma "tcp;ofi_rxm"
    peer_death_case p2p "tcp;ofi_rxm"
}

# ------------------------------------------------------------------------
# access

access_case() {
    local name=$1 expect=$2 threshold=$3
    shift 3
    faults_mpirun access "$name" 60 -np 2 -x LD_PRELOAD="$SHIM" -x BTL_OFI_FAULT_TRACE=mr \
        -x MALLOC_MMAP_THRESHOLD_="$threshold" "${BASE[@]}" --mca btl_ofi_provider_include sockets \
        "$FAULTS_OUT/win_realloc" "$@"
    local check rc=0
    check=$(python3 "$FAULTS_SRC/check_mr_trace.py" "$MPI_LOG" --expect "$expect") || rc=$?
    if ! faults_exact "$MPI_LOG" 2; then
        faults_report FAIL access "$name" "program failed (rc=$MPI_RC): $check"
    elif [ $rc != 0 ]; then
        faults_report FAIL access "$name" "$check"
    else
        faults_report PASS access "$name" "$check"
    fi
}

# Registrations held (mr_count - mr_release_count) over a run's HEAP and
# PVARS lines: "peak windows"
mr_held_peak() {
    {
        heap_lines "$MPI_LOG" | awk '{ print $5, $3 }'
        grep -a '^PVARS rank=' "$MPI_LOG" | sed -n 's/.* mr_held=\([0-9-]*\).*/\1 0/p'
        grep -a '^SOAK rank=' "$MPI_LOG" | sed -n 's/.* windows=\([0-9]*\) .*/-1 \1/p'
    } | awk '{ if ($1 > p) p = $1; if ($2 > w) w = $2 } END { printf "%d %d", p, w }' || true
}

# osc/rdma registers a buffer per window that it never frees: with
# btl_ofi_mr_cache_max 8 the registrations held stay at 8 plus those in
# use; with no practical limit the same run keeps one per window (the
# control: the case can fail)
cache_limit_case() {
    local limit=$1 expect=$2 peak wins
    faults_mpirun access "registration-cache/max=$limit" 120 -np 2 "${BASE[@]}" \
        --mca btl_ofi_provider_include sockets --mca btl_ofi_mr_cache_max "$limit" \
        "$FAULTS_OUT/soak" -s 8 -t 1 -m rma -S
    read -r peak wins <<<"$(mr_held_peak)"
    local details="peak $peak registrations held, $wins windows created and freed per rank"
    if ! faults_exact "$MPI_LOG" 2; then
        faults_report FAIL access "registration-cache/max=$limit" "program failed (rc=$MPI_RC); $details"
    elif [ "$wins" -lt 40 ]; then
        faults_report FAIL access "registration-cache/max=$limit" "too few windows to tell; $details"
    elif [ "$expect" = bounded ] && [ "$peak" -gt $((limit + 16)) ]; then
        faults_report FAIL access "registration-cache/max=$limit" "over $limit + 16 in use: $details"
    elif [ "$expect" = grows ] && [ "$peak" -le $((wins / 2)) ]; then
        faults_report FAIL access "registration-cache/max=$limit" "control did not grow: $details"
    else
        faults_report PASS access "registration-cache/max=$limit" "$details"
    fi
}

lane_access() {
    cache_limit_case 8 bounded
    cache_limit_case 1000000 grows
    if ! command -v python3 >/dev/null 2>&1; then
        faults_report SKIP access all "python3 missing (needed to read the MR trace)"
        return
    fi
    # 4 MiB buffers that malloc maps and unmaps: the hooks must invalidate
    access_case unmapped-buffer fresh 65536 -n 8
    # heap buffers never leave the process: the cached region may serve
    # again (reported, not required)
    access_case heap-buffer any 67108864 -n 8 -b 262144
}

# ------------------------------------------------------------------------

if ! faults_env; then
    faults_report SKIP robustness all "Open MPI not set up (run contrib/setup)"
    exit 0
fi
if [ ! -f "$(faults_component_dir)/mca_btl_ofi.so" ]; then
    faults_report FAIL robustness setup "$(faults_component_dir)/mca_btl_ofi.so missing (make -C standalone component)"
    exit 1
fi
mkdir -p "$FAULTS_LOGS"
if ! faults_build >"$FAULTS_LOGS/build.log" 2>&1; then
    MPI_LOG=$FAULTS_LOGS/build.log
    faults_report FAIL robustness build "building the test programs failed"
    exit 1
fi
leftover=$(faults_reap)
[ "$leftover" = 0 ] || echo "# killed $leftover test processes left from an earlier run" >&2

for lane in "${LANES[@]}"; do
    case $lane in
    exhaust) lane_exhaust ;;
    fault) lane_fault ;;
    peer-death) lane_peer_death ;;
    access) lane_access ;;
    *)
        echo "unknown lane $lane (exhaust, fault, peer-death, access)" >&2
        exit 2
        ;;
    esac
done
faults_summary robustness
