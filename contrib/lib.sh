# Shared shell helpers for the contrib/ scripts.  Sourced, never run.
# shellcheck shell=bash

BTL_OFI_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BTL_OFI_CACHE=${BTL_OFI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/btl-ofi}
BTL_OFI_OMPI_VERSION=5.0.7
BTL_OFI_OMPI_DEBVER=5.0.7-1
BTL_OFI_PREFIX=$BTL_OFI_CACHE/ompi-$BTL_OFI_OMPI_VERSION
BTL_OFI_SRC=$BTL_OFI_CACHE/src/openmpi-$BTL_OFI_OMPI_VERSION
BTL_OFI_BUILD_SET=${BTL_OFI_BUILD:+1}
BTL_OFI_BUILD=${BTL_OFI_BUILD:-$BTL_OFI_ROOT/build}
BTL_OFI_LOGS=$BTL_OFI_CACHE/logs
# The libfabric 2.x that contrib/setup --libfabric 2.1 builds into the cache
# (from Debian trixie's libfabric source package); the system's 1.17 is the
# default everywhere.
BTL_OFI_LF2_VERSION=2.1.0
BTL_OFI_LF2_DEBVER=2.1.0-1.1
BTL_OFI_LF2_PREFIX=$BTL_OFI_CACHE/libfabric-$BTL_OFI_LF2_VERSION
BTL_OFI_LF2_SRC=$BTL_OFI_CACHE/src/libfabric-$BTL_OFI_LF2_VERSION
BTL_OFI_T0=${BTL_OFI_T0:-$(date +%s)}

phase() {
    printf '[%4ds] == %s\n' $(($(date +%s) - BTL_OFI_T0)) "$*"
}

die() {
    echo "error: $*" >&2
    exit 1
}

# Run a long command with its output in a log file; print a heartbeat with
# the elapsed time, and on failure the last lines of the log.
run_logged() {
    local name=$1
    shift
    mkdir -p "$BTL_OFI_LOGS"
    local log=$BTL_OFI_LOGS/$name.log
    local start
    start=$(date +%s)
    phase "$name (log: $log)"
    "$@" >"$log" 2>&1 &
    local pid=$!
    local ticks=0
    while kill -0 $pid 2>/dev/null; do
        sleep 1
        ticks=$((ticks + 1))
        if [ $((ticks % 30)) = 0 ] && kill -0 $pid 2>/dev/null; then
            printf '         ... %s running, %ds\n' "$name" $(($(date +%s) - start))
        fi
    done
    if ! wait $pid; then
        echo "---- last lines of $log ----" >&2
        tail -n 40 "$log" >&2
        die "$name failed after $(($(date +%s) - start))s"
    fi
    printf '         %s done in %ds\n' "$name" $(($(date +%s) - start))
}

# The stock component directory of the cached Open MPI.
stock_component_dir() {
    echo "$BTL_OFI_PREFIX/lib/openmpi"
}

# select_libfabric VERSION: "1.17" (the system's: nothing changes) or "2.1"
# (the cached build: BTL_OFI_LIBFABRIC is its prefix, and the component's
# build directory is build-lf2/ unless BTL_OFI_BUILD was set).  Exported as
# BTL_OFI_LIBFABRIC_VERSION, so that the scripts a script runs (contrib/env,
# contrib/mpirun, the params tests) use the same library.  Dies on any other
# version.
BTL_OFI_LIBFABRIC=""
select_libfabric() {
    case $1 in
    "" | 1.17) BTL_OFI_LIBFABRIC="" ;;
    2.1)
        BTL_OFI_LIBFABRIC=$BTL_OFI_LF2_PREFIX
        [ -n "$BTL_OFI_BUILD_SET" ] || BTL_OFI_BUILD=$BTL_OFI_ROOT/build-lf2
        ;;
    *) die "unknown libfabric version '$1' (1.17 or 2.1)" ;;
    esac
    export BTL_OFI_LIBFABRIC_VERSION=$1
}
select_libfabric "${BTL_OFI_LIBFABRIC_VERSION:-}"

# The fi_info of the selected libfabric.
fi_info_cmd() {
    if [ -n "$BTL_OFI_LIBFABRIC" ]; then
        LD_LIBRARY_PATH="$BTL_OFI_LIBFABRIC/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
            "$BTL_OFI_LIBFABRIC/bin/fi_info" "$@"
    else
        fi_info "$@"
    fi
}
