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
# The peer contrib/bench measures against (contrib/setup --peers): MPICH
# with its ch4:ofi device on the system's libfabric, from Debian bookworm's
# source package, installed beside Open MPI.  BTL_OFI_MPICH_PREFIX names
# another install (or, pointed at nothing, makes the peer "not built");
# BTL_OFI_MPICH_BUILD receives the benchmarks compiled with its mpicc.
BTL_OFI_MPICH_VERSION=4.0.2
BTL_OFI_MPICH_DEBVER=4.0.2-3
BTL_OFI_MPICH_PREFIX=${BTL_OFI_MPICH_PREFIX:-$BTL_OFI_CACHE/mpich-$BTL_OFI_MPICH_VERSION}
BTL_OFI_MPICH_SRC=$BTL_OFI_CACHE/src/mpich-$BTL_OFI_MPICH_VERSION
BTL_OFI_MPICH_BUILD=${BTL_OFI_MPICH_BUILD:-$BTL_OFI_ROOT/build-mpich}

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

# ARMCI-MPI, the one-sided library Global Arrays and NWChem run on
# (contrib/setup --clients, the clients lane): the upstream tarball of
# Debian trixie's armci-mpi source package, autogen'd once in the cache and
# built out of tree for each Open MPI ("ompi": ours, 5.0.7; "distro": the
# distribution's) with its mpicc.
BTL_OFI_ARMCI_VERSION=0.4
BTL_OFI_ARMCI_DEBVER=0.4-6
BTL_OFI_ARMCI_SRC=$BTL_OFI_CACHE/src/armci-mpi-$BTL_OFI_ARMCI_VERSION

# armci_build_dir FLAVOUR: where ARMCI-MPI is built for FLAVOUR (ompi, distro, mpich).
armci_build_dir() {
    echo "$BTL_OFI_CACHE/armci-mpi-$BTL_OFI_ARMCI_VERSION-$1"
}

# ------------------------------------------------------------------
# The distribution's Open MPI (contrib/setup --distro): Debian's packages,
# their source package configured for its headers only, and our component
# built for it into build-distro/.

BTL_OFI_DISTRO_PACKAGES=(openmpi-bin libopenmpi-dev)
BTL_OFI_DISTRO_CACHE=$BTL_OFI_CACHE/distro
BTL_OFI_DISTRO_BUILD=${BTL_OFI_DISTRO_BUILD:-$BTL_OFI_ROOT/build-distro}

# The distribution's ompi_info, untouched by an environment that selects
# another Open MPI (contrib/env) or another component path.
distro_ompi_info() {
    env -u OMPI_MCA_mca_base_component_path -u OMPI_MCA_mca_base_component_show_load_errors \
        /usr/bin/ompi_info "$@"
}

# distro_probe: set DISTRO_VERSION (upstream version, 4.1.4), DISTRO_DEBVER
# (its source package's version, 4.1.4-3), DISTRO_LIBDIR (libopen-pal),
# DISTRO_PKGLIBDIR (the components, mca_btl_ofi.so among them),
# DISTRO_MPIRUN, DISTRO_MPICC and DISTRO_SRC (the configured source tree),
# or die saying what to run.
distro_probe() {
    local pkg=libopenmpi-dev
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' ||
        [ ! -x /usr/bin/ompi_info ]; then
        die "the distribution's Open MPI (${BTL_OFI_DISTRO_PACKAGES[*]}) is not installed: run contrib/setup --distro"
    fi
    DISTRO_DEBVER=$(dpkg-query -W -f='${source:Version}' "$pkg")
    DISTRO_VERSION=${DISTRO_DEBVER%%-*}
    DISTRO_VERSION=${DISTRO_VERSION#*:}
    local paths
    paths=$(distro_ompi_info --parsable --path libdir --path pkglibdir) ||
        die "/usr/bin/ompi_info failed"
    DISTRO_LIBDIR=$(sed -n 's/^path:libdir://p' <<<"$paths")
    DISTRO_PKGLIBDIR=$(sed -n 's/^path:pkglibdir://p' <<<"$paths")
    [ -d "$DISTRO_PKGLIBDIR" ] || die "ompi_info names no component directory ('$DISTRO_PKGLIBDIR')"
    # Debian names Open MPI's programs *.openmpi; mpirun and mpicc are
    # alternatives that may point at another MPI
    DISTRO_MPIRUN=/usr/bin/mpirun.openmpi
    DISTRO_MPICC=/usr/bin/mpicc.openmpi
    [ -x "$DISTRO_MPIRUN" ] || DISTRO_MPIRUN=/usr/bin/mpirun
    [ -x "$DISTRO_MPICC" ] || DISTRO_MPICC=/usr/bin/mpicc
    DISTRO_SRC=$BTL_OFI_DISTRO_CACHE/openmpi-$DISTRO_VERSION
}

# The make arguments that build for the distribution's Open MPI (after
# distro_probe): the configured source tree for the headers, its external
# PMIx's headers, and the installed libraries.
distro_make_args() {
    local pmix
    pmix=$(sed -n "s/^.*'--with-pmix=\([^']*\)'.*$/\1/p" "$DISTRO_SRC/config.log" 2>/dev/null | head -n1)
    echo "OMPI_SRC=$DISTRO_SRC OMPI_PREFIX=/usr OMPI_LIBDIR=$DISTRO_LIBDIR MPICC=$DISTRO_MPICC" \
        "BUILD=$BTL_OFI_DISTRO_BUILD${pmix:+ PMIX_INCLUDE=$pmix/include}"
}

# ------------------------------------------------------------------
# The MPI test manifests (tests/mpi/*.tests, tests/mpi/stress.list):
#   NAME  NPS  PROVIDERS  [EXTRA MPIRUN ARGS...] [-- PROGRAM ARGS...]
# with '#' starting a comment.  contrib/check's mpi lane and
# tests/mpi/stress.sh read them and launch their lines the same way.

# manifest_lines FILE: "LINENO<tab>LINE" for every line that is not empty
# once its comment is cut off.
manifest_lines() {
    awk '{ sub(/#.*/, "") } NF { printf "%d\t%s\n", NR, $0 }' "$1"
}

# manifest_programs: NAME NPS PROVIDERS of every manifest line without
# extra arguments, one line per program (the distro and slurm lanes run
# each program once).
manifest_programs() {
    local manifest line
    for manifest in "$BTL_OFI_ROOT"/tests/mpi/*.tests; do
        [ -f "$manifest" ] || continue
        local lineno
        while IFS=$'\t' read -r lineno line; do
            local -a fields=()
            read -r -a fields <<<"$line"
            [ ${#fields[@]} -eq 3 ] && echo "${fields[*]}"
        done < <(manifest_lines "$manifest")
    done | awk '!seen[$1]++'
}

# mpi_test_command PROGRAM NP PROVIDER [MPIRUN ARGS...] [-- PROGRAM ARGS...]:
# sets MPI_TEST_CMD to the launch of one manifest line's case (after
# contrib/mpirun and its own options): our btl/ofi and osc/rdma on
# PROVIDER, with the line's extra mpirun and program arguments.
mpi_test_command() {
    local prog=$1 np=$2 p=$3
    shift 3
    local mpirun_args=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        mpirun_args+=("$1")
        shift
    done
    [ $# -gt 0 ] && shift
    MPI_TEST_CMD=(-np "$np" --oversubscribe --mca pml ob1 --mca btl ofi,self --mca osc rdma
        --mca btl_ofi_provider_include "$p" ${mpirun_args[@]+"${mpirun_args[@]}"} "$prog" "$@")
}

# ------------------------------------------------------------------
# The peer, MPICH (contrib/setup --peers)

# True when contrib/setup --peers finished an install at
# BTL_OFI_MPICH_PREFIX (its stamp is written last).
mpich_built() {
    [ -f "$BTL_OFI_MPICH_PREFIX/.btl-ofi-complete" ] &&
        [ -x "$BTL_OFI_MPICH_PREFIX/bin/mpicc" ] &&
        [ -x "$BTL_OFI_MPICH_PREFIX/bin/mpiexec.hydra" ]
}
