#!/bin/bash
# The threading level the component asks: FI_THREAD_COMPLETION from an
# ofi_rxm provider when only our progress thread shares it with the
# application (posts and AV changes take the context lock then);
# FI_THREAD_DOMAIN with no thread; FI_THREAD_SAFE from the other providers.
# p2p_smoke's two-sided traffic and the thread's looks run under each.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

# threading_job NAME PROVIDER LEVEL MCA-ARGS...: the job says LEVEL at
# verbose level 1, no other level, and passes
threading_job() {
    local name=$1 provider=$2 level=$3
    shift 3
    run_job "$name" ofi --mca btl ofi,self --mca btl_ofi_provider_include "$provider" \
        --mca btl_ofi_verbose 1 "$@"
    expect_line "provider $provider, [0-9]+ NIC\\(s\\), .*, $level\$" "$level for $provider"
    for other in FI_THREAD_COMPLETION FI_THREAD_DOMAIN FI_THREAD_SAFE; do
        if [ "$other" != "$level" ]; then
            expect_no_text ", $other" "$provider asks $level"
        fi
    done
    expect_pass
}

threading_job "tcp;ofi_rxm with the thread" "tcp;ofi_rxm" FI_THREAD_COMPLETION
threading_job "tcp;ofi_rxm without the thread" "tcp;ofi_rxm" FI_THREAD_DOMAIN \
    --mca btl_ofi_progress_thread off
threading_job "shm with the thread" shm FI_THREAD_SAFE
threading_job "sockets with the thread" sockets FI_THREAD_SAFE
finish
