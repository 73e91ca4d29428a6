#!/bin/bash
# btl_ofi_progress_wait: an unknown value gives "[bad progress wait]" and
# timer, the default; at verbose level 1 the component says what wakes its progress
# thread and why: on a provider whose wait object costs nothing (net on
# libfabric 1.17, tcp;ofi_rxm on 2.x) the CQ wait object (auto and fd), the
# timer alone when asked (timer); on tcp;ofi_rxm of libfabric 1.17 the
# timer (auto); on shm, whose CQ has no wait object, the timer with that
# reason (fd).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

# run_wait_job PROVIDER VALUE TEXT: the job runs on PROVIDER with
# btl_ofi_progress_wait VALUE and says TEXT at verbose level 1
run_wait_job() {
    run_job "progress_wait=$2 on $1" ofi --mca btl ofi,self \
        --mca btl_ofi_provider_include "$1" --mca btl_ofi_progress_wait "$2" \
        --mca btl_ofi_verbose 1
    expect_text "$3"
    expect_pass
}

# the libfabric the jobs load (contrib/mpirun follows BTL_OFI_LIBFABRIC_VERSION)
if [ "${BTL_OFI_LIBFABRIC_VERSION:-1.17}" = 1.17 ]; then
    WAITS=net OLD_TCP=yes
else
    WAITS="tcp;ofi_rxm" OLD_TCP=no
fi

run_wait_job "$WAITS" bogus "the progress thread wakes by timer only: btl_ofi_progress_wait is timer"
expect_text "The OFI BTL was given an unknown value for what wakes its progress"
expect_line "btl_ofi_progress_wait: +bogus\$" "btl_ofi_progress_wait: bogus"
expect_help_found

run_wait_job "$WAITS" auto "the progress thread wakes on the CQ wait object and by timer: the provider's CQ wait object wakes it"
run_wait_job "$WAITS" fd "the progress thread wakes on the CQ wait object and by timer: btl_ofi_progress_wait is fd"
run_wait_job "$WAITS" timer "the progress thread wakes by timer only: btl_ofi_progress_wait is timer"
run_job "progress_wait unset on $WAITS" ofi --mca btl ofi,self \
    --mca btl_ofi_provider_include "$WAITS" --mca btl_ofi_verbose 1
expect_text "the progress thread wakes by timer only: btl_ofi_progress_wait is timer"
expect_pass
if [ $OLD_TCP = yes ]; then
    run_wait_job "tcp;ofi_rxm" auto "the progress thread wakes by timer only: this provider's CQ wait object slows every operation"
fi
run_wait_job shm fd "the progress thread wakes by timer only: the CQ has no wait object to sleep on"
expect_no_text "unknown value for what wakes" "fd is valid"
finish
