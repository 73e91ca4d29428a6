#!/bin/bash
# ob1's eager limit follows the provider unless the user set it:
# btl_ofi_max_send_size (64 KiB) on sockets, 16 KiB on shm and tcp;ofi_rxm;
# a value the user gave is kept; the rendezvous eager limit stays 16 KiB.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

# eager_job PROVIDER TEXT [MPIRUN ARGS...]: the job on PROVIDER says TEXT at
# verbose level 10 and passes
eager_job() {
    local prov=$1 text=$2
    shift 2
    if ! fi_info -p "$prov" >/dev/null 2>&1; then
        echo "  (provider $prov not offered here: skipped)"
        return
    fi
    run_job "eager $prov $*" ofi --mca btl ofi,self --mca btl_ofi_provider_include "$prov" \
        --mca btl_ofi_verbose 10 "$@"
    expect_text "$text"
    expect_pass
}

eager_job shm "eager limit 16384, rendezvous eager limit 16384"
eager_job sockets "eager limit 65536, rendezvous eager limit 16384"
eager_job "tcp;ofi_rxm" "eager limit 16384, rendezvous eager limit 16384"
eager_job sockets "eager limit 4096, rendezvous eager limit 4096" --mca btl_ofi_eager_limit 4096
eager_job sockets "eager limit 65536, rendezvous eager limit 8192" --mca btl_ofi_rndv_eager_limit 8192
finish
