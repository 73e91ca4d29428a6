#!/bin/bash
# btl_ofi_rd_num outside 1..8192 is clamped with the "[bad parameter]"
# message, and the job still runs over btl/ofi: with a single posted
# receive buffer, and with 8192 of them.  Providers queue fewer receives
# than that (shm 1024, tcp;ofi_rxm 2048 in libfabric 1.17), so the large
# value runs on every provider of the test set that is here: the component
# must cope with what the provider takes, not drop out.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

expect_clamped_runs rd_num 1 8192 "0 1"

providers=("$PARAMS_PROVIDER")
for p in sockets "tcp;ofi_rxm" shm; do
    if [ "$p" != "$PARAMS_PROVIDER" ] && fi_info -p "$p" -t FI_EP_RDM >/dev/null 2>&1; then
        providers+=("$p")
    fi
done
for p in "${providers[@]}"; do
    run_job "rd_num=99999,$p" ofi --mca btl ofi,self \
        --mca btl_ofi_provider_include "$p" --mca btl_ofi_rd_num 99999
    expect_bad_parameter btl_ofi_rd_num 99999 1 8192 8192
    expect_help_found
    expect_no_text "The OFI BTL found no usable libfabric provider" \
        "btl/ofi dropped out over a clamped rd_num instead of posting what $p takes"
    expect_pass
done
finish
