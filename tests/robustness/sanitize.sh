#!/bin/bash
# Memory hygiene of btl/ofi (contrib/check --sanitize):
#
#   asan       our component built with AddressSanitizer + UBSan into
#              build-asan/ (contrib/setup --component-only --asan), loaded
#              into the ordinary Open MPI with libasan preloaded in the
#              ranks; a 2-rank subset of tests/mpi plus our own programs
#              (some under the fault shim) must run clean: any ASan, LSan
#              or UBSan report that blames btl/ofi fails the case
#   valgrind   memcheck of one small 2-rank RMA run (sockets) with Open
#              MPI's suppression file; errors or definite leaks that blame
#              btl/ofi fail it
#
#   tests/robustness/sanitize.sh [asan] [valgrind]      (default: both)
#
# Blame (tests/robustness/scan_sanitizer.py): the first frame of a stack that
# is not an allocator or interceptor is in mca_btl_ofi.so / btl_ofi_*.c,
# for the error itself or for the memory it is about.  Reports of Open
# MPI's, PMIx's or libfabric's own are counted and shown in the details.
# shellcheck disable=SC2054 # commas inside MCA values, not array separators
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
. "$(dirname "$0")/lib.sh"

LANES=("$@")
[ ${#LANES[@]} -gt 0 ] || LANES=(asan valgrind)

ASAN_BUILD=$FAULTS_ROOT/build-asan
BASE=(--mca btl ofi,self --mca osc rdma --mca pml ob1)
SCAN=$FAULTS_SRC/scan_sanitizer.py
MPI_TESTS=$FAULTS_BUILD/mpi

# ------------------------------------------------------------------------
# asan

ASAN_LIB=
ASAN_DIR=

# asan_case NAME EXPECT PROVIDER PROGRAM ARGS...
#   EXPECT ok: the program must also succeed; any: its own verdict is only
#   reported (tests/mpi programs: their functional failures belong to the
#   default lanes, this lane judges memory errors)
# Extra mpirun arguments in ASAN_EXTRA (array), extra preloads in
# ASAN_PRELOAD_MORE.
ASAN_EXTRA=()
ASAN_PRELOAD_MORE=
asan_case() {
    local name=$1 expect=$2 prov=$3 prog=$4
    shift 4
    if [ ! -x "$prog" ]; then
        faults_report SKIP asan "$name" "$prog not built"
        return
    fi
    local dir
    dir=$ASAN_DIR/$(echo "$name" | tr '/;: ' '____')
    rm -rf "$dir"
    mkdir -p "$dir"
    local preload=$ASAN_LIB
    [ -z "$ASAN_PRELOAD_MORE" ] || preload="$preload:$ASAN_PRELOAD_MORE"
    faults_mpirun asan "$name" 600 -np 2 \
        -x LD_PRELOAD="$preload" \
        -x ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0:malloc_context_size=30:detect_odr_violation=0:log_path=$dir/asan" \
        -x LSAN_OPTIONS="exitcode=0" \
        -x UBSAN_OPTIONS="print_stacktrace=1:log_path=$dir/ubsan" \
        "${BASE[@]}" --mca btl_ofi_provider_include "$prov" "${ASAN_EXTRA[@]}" "$prog" "$@"
    local scan scan_rc=0 loaded
    scan=$(python3 "$SCAN" asan "$dir"/* 2>&1) || scan_rc=$?
    printf '%s\n' "$scan" >>"$MPI_LOG"
    loaded=$({ grep -a -m1 '^COMPONENT rank=' "$MPI_LOG" || true; } | sed 's/.*path=//')
    local summary
    summary=$(printf '%s\n' "$scan" | head -n1)
    if [ -n "$loaded" ] && [[ $loaded != "$ASAN_BUILD"/* ]]; then
        faults_report FAIL asan "$name" "the ASan component was not the one loaded: $loaded"
    elif [ $scan_rc != 0 ]; then
        faults_report FAIL asan "$name" "$summary; first: $(printf '%s\n' "$scan" | sed -n '3p' | cut -c1-120), $(printf '%s\n' "$scan" | sed -n '2s/.*blamed on: \(.*\) ----/blamed on \1/p')"
    elif faults_timed_out; then
        faults_report FAIL asan "$name" "timed out after ${MPI_SECS}s; $summary"
    elif [ "$expect" = ok ] && [ "$MPI_RC" != 0 ]; then
        faults_report FAIL asan "$name" "program failed (rc=$MPI_RC) under ASan: $(grep -a -m1 -E 'symbol lookup error|MISMATCH|MPI_ERROR|ERROR: AddressSanitizer' "$MPI_LOG" | cut -c1-200 || echo 'see log'); $summary"
    elif [ "$MPI_RC" != 0 ]; then
        faults_report PASS asan "$name" "$summary, time=${MPI_SECS}s; note: the program itself failed (rc=$MPI_RC, not a memory error)"
    else
        faults_report PASS asan "$name" "$summary, time=${MPI_SECS}s"
    fi
}

lane_asan() {
    local log=$FAULTS_LOGS/asan-build.log
    mkdir -p "$FAULTS_LOGS"
    # an absolute path: contrib/env puts BTL_OFI_BUILD on the component
    # path as it is given
    if ! BTL_OFI_BUILD=$ASAN_BUILD "$FAULTS_ROOT/contrib/setup" --component-only --asan \
        >"$log" 2>&1; then
        MPI_LOG=$log
        faults_report FAIL asan build "contrib/setup --component-only --asan failed"
        return
    fi
    ASAN_LIB=$(ldd "$ASAN_BUILD/mca_btl_ofi.so" 2>/dev/null | awk '/libasan/ { print $3 }')
    if [ -z "$ASAN_LIB" ]; then
        MPI_LOG=$log
        faults_report FAIL asan build "$ASAN_BUILD/mca_btl_ofi.so is not linked with libasan"
        return
    fi
    # contrib/env must now point at build-asan
    local selected
    selected=$(BTL_OFI_BUILD=$ASAN_BUILD "$FAULTS_ROOT/contrib/env" |
        sed -n 's/^export OMPI_MCA_mca_base_component_path="\(.*\)"$/\1/p')
    [[ $selected == "$ASAN_BUILD":* ]] || {
        faults_report FAIL asan env "contrib/env does not select $ASAN_BUILD (component path: $selected)"
        return
    }
    export BTL_OFI_BUILD=$ASAN_BUILD
    faults_report PASS asan build "$ASAN_BUILD/mca_btl_ofi.so with $(basename "$ASAN_LIB") and UBSan, selected by contrib/env"
    # 16-byte compare-and-swap (opal_lifo under threads) needs -mcx16,
    # otherwise a libatomic call nobody provides
    local missing
    missing=$(nm -D "$ASAN_BUILD/mca_btl_ofi.so" 2>/dev/null | awk '$1 == "U" && /__sync_|__atomic_/ { print $2 }' | tr '\n' ' ')
    if [ -n "$missing" ]; then
        faults_report FAIL asan build-symbols "undefined atomic helpers: $missing(SANITIZE=1 drops -mcx16 from OPT in standalone/Makefile); the ASan component cannot run threaded"
    else
        faults_report PASS asan build-symbols "no undefined atomic helpers"
    fi

    ASAN_DIR=$FAULTS_LOGS/asan-reports
    mkdir -p "$ASAN_DIR"
    local t
    for t in rma_put_get rma_atomics rma_accumulate rma_sync rma_win_churn; do
        asan_case "tests-mpi/$t" any sockets "$MPI_TESTS/$t"
    done
    for t in p2p_smoke p2p_matching p2p_datatypes; do
        asan_case "tests-mpi/$t" any sockets "$MPI_TESTS/$t"
    done
    ASAN_EXTRA=(-x P2P_SIZES_MAX=1048576)
    asan_case tests-mpi/p2p_sizes any sockets "$MPI_TESTS/p2p_sizes"
    ASAN_EXTRA=()
    asan_case rma_flood/tcp+ofi_rxm ok "tcp;ofi_rxm" "$FAULTS_OUT/rma_flood" -r 4 -p 128 -q
    asan_case p2p_flood/shm ok shm "$FAULTS_OUT/p2p_flood" -r 2 -m 64 -q
    asan_case win_realloc ok sockets "$FAULTS_OUT/win_realloc" -n 4
    # the progress thread started, driving a computing target and a spinning
    # lock home, stopped and joined; lock assertions are compiled in here
    asan_case tests-mpi/rma_busy_target ok shm "$MPI_TESTS/rma_busy_target" -s 1 -r 50
    asan_case tests-mpi/rma_spin_lock ok sockets "$MPI_TESTS/rma_spin_lock" -t 2 -n 20
    # the shm module for same-host atomics (forced on one node): its open,
    # the registrations' copies on its domain, its posts and its close
    ASAN_EXTRA=(--mca btl_ofi_local_copy 1 --mca btl_ofi_local_atomics 1)
    asan_case tests-mpi/rma_local_copy/shm-module ok "tcp;ofi_rxm" "$MPI_TESTS/rma_local_copy" -c 1 -a 1
    ASAN_EXTRA=()
    # MPI_THREAD_MULTIPLE: windows and messages from 2 threads per rank
    asan_case soak-threads ok shm "$FAULTS_OUT/soak" -s 15 -t 2
    ASAN_EXTRA=(-x MALLOC_MMAP_THRESHOLD_=65536)
    asan_case win_realloc/unmapped ok sockets "$FAULTS_OUT/win_realloc" -n 4
    # error paths: refused posts, pending sends, error completions
    ASAN_PRELOAD_MORE=$FAULTS_OUT/libfi_fault.so
    ASAN_EXTRA=(-x BTL_OFI_FAULT='send:30-300:eagain,write:50-200:eagain')
    asan_case fault/eagain-bursts ok sockets "$FAULTS_OUT/p2p_flood" -r 2 -m 64 -q
    ASAN_EXTRA=(-x BTL_OFI_FAULT='cq_read:200:cqerr_rma,write:300:eio' -x BTL_OFI_FAULT_RANK=0)
    asan_case fault/rma-errors any sockets "$FAULTS_OUT/rma_flood" -r 4 -p 128 -q
    ASAN_EXTRA=(-x BTL_OFI_FAULT='cq_read:60:cqerr_send' -x BTL_OFI_FAULT_RANK=0 -x FAULTS_ABORT_ON_ERROR=1)
    asan_case fault/send-error any sockets "$FAULTS_OUT/p2p_flood" -r 2 -m 32 -q
    ASAN_PRELOAD_MORE=
    ASAN_EXTRA=()
    unset BTL_OFI_BUILD
}

# ------------------------------------------------------------------------
# valgrind

lane_valgrind() {
    if ! command -v valgrind >/dev/null 2>&1; then
        faults_report SKIP valgrind memcheck "valgrind not installed"
        return
    fi
    local supp dir
    supp=$(dirname "$(dirname "$(command -v mpicc)")")/share/openmpi/openmpi-valgrind.supp
    if [ ! -f "$supp" ]; then
        faults_report SKIP valgrind memcheck "no $supp"
        return
    fi
    dir=$FAULTS_LOGS/valgrind-reports
    rm -rf "$dir"
    mkdir -p "$dir"
    faults_mpirun valgrind rma_flood/sockets 900 -np 2 "${BASE[@]}" \
        --mca btl_ofi_provider_include sockets \
        valgrind -q --suppressions="$supp" --error-exitcode=42 --leak-check=full \
        --show-leak-kinds=definite --errors-for-leak-kinds=definite --track-origins=yes \
        --num-callers=30 --log-file="$dir/vg.%p" \
        "$FAULTS_OUT/rma_flood" -r 2 -p 16 -q
    local scan scan_rc=0 summary exact=no
    scan=$(python3 "$SCAN" valgrind "$dir"/* 2>&1) || scan_rc=$?
    printf '%s\n' "$scan" >>"$MPI_LOG"
    summary=$(printf '%s\n' "$scan" | head -n1)
    [ "$(faults_count "$MPI_LOG" '^RESULT rank=.* mpi_errors=0 mismatches=0')" = 2 ] && exact=yes
    # 42: valgrind saw errors, maybe only Open MPI's or libfabric's
    local vg="valgrind exit $MPI_RC"
    if faults_timed_out; then
        faults_report FAIL valgrind rma_flood/sockets "timed out after ${MPI_SECS}s; $summary"
    elif [ $scan_rc != 0 ]; then
        faults_report FAIL valgrind rma_flood/sockets "$summary; first: $(printf '%s\n' "$scan" | sed -n '3p' | cut -c1-120), $(printf '%s\n' "$scan" | sed -n '2s/.*blamed on: \(.*\) ----/blamed on \1/p') (reports in $dir)"
    elif [ $exact != yes ]; then
        faults_report FAIL valgrind rma_flood/sockets "program did not finish exactly ($vg); $summary"
    else
        faults_report PASS valgrind rma_flood/sockets "$summary, $vg, time=${MPI_SECS}s"
    fi
}

# ------------------------------------------------------------------------

if ! command -v python3 >/dev/null 2>&1; then
    faults_report SKIP sanitize all "python3 missing (needed to read the reports)"
    exit 0
fi
if ! faults_env; then
    faults_report SKIP sanitize all "Open MPI not set up (run contrib/setup)"
    exit 0
fi
mkdir -p "$FAULTS_LOGS"
if ! faults_build >"$FAULTS_LOGS/build.log" 2>&1; then
    MPI_LOG=$FAULTS_LOGS/build.log
    faults_report FAIL sanitize build "building the test programs failed"
    exit 1
fi
# the tests/mpi programs that did not build are reported by asan_case
faults_make -k mpitests >>"$FAULTS_LOGS/build.log" 2>&1 || true
leftover=$(faults_reap)
[ "$leftover" = 0 ] || echo "# killed $leftover test processes left from an earlier run" >&2

for lane in "${LANES[@]}"; do
    case $lane in
    asan) lane_asan ;;
    valgrind) lane_valgrind ;;
    *)
        echo "unknown lane $lane (asan, valgrind)" >&2
        exit 2
        ;;
    esac
done
faults_summary sanitize
