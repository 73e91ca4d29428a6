"""An mpi4py.futures pool of spawned workers through our btl/ofi.

The parent (one rank) maps a function over MPIPoolExecutor(max_workers=N),
whose N workers MPI_Comm_spawn starts, and checks every result value.  Our
component must have carried the traffic on both sides, as btl/ofi's MPI_T
counters tell (upstream's btl/ofi has none): the parent's own send_count
and recv_count grow during the map, and each call returns, beside its
value, the send_count and recv_count of the worker it ran in, counted from
the pool's initializer on (every worker has sent and received by then in
the initializer's handshake, and the task itself came in since).  The
counters are read through tests/common/btl_ofi_pvars.c, built as
build-distro/mpi/libbtl_ofi_pvars.so.

Debian's python3-mpi4py (contrib/setup --distro) with the distribution's
Open MPI, as the distro lane runs it:

    contrib/mpirun --distro -np 1 --oversubscribe --mca pml ob1 \\
        --mca btl ofi,self --mca osc rdma --mca btl_ofi_provider_include P \\
        /usr/bin/python3 tests/mpi/pool.py [N [LIBRARY]]

Prints one PASS or FAIL line; exits 0 on PASS, 1 on FAIL.
"""

import atexit
import ctypes
import os
import sys

from mpi4py import MPI  # MPI_Init
from mpi4py.futures import MPIPoolExecutor

TASKS = 64
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_LIBRARY = os.path.join(ROOT, "build-distro", "mpi", "libbtl_ofi_pvars.so")

pvars = None  # this process's reader


def open_pvars(library):
    """Load the reader and open its MPI_T session (closed before MPI_Finalize)."""
    global pvars
    pvars = ctypes.CDLL(library)
    pvars.btl_ofi_pvars_get.argtypes = [ctypes.c_char_p]
    pvars.btl_ofi_pvars_get.restype = ctypes.c_long
    if pvars.btl_ofi_pvars_open() != 0:
        raise RuntimeError("MPI_T could not be started")
    atexit.register(pvars.btl_ofi_pvars_close)  # runs before mpi4py's MPI_Finalize


def counts():
    """(send_count, recv_count) of our btl/ofi; -1 where it has no counter."""
    return pvars.btl_ofi_pvars_get(b"send_count"), pvars.btl_ofi_pvars_get(b"recv_count")


def work(x):
    """The mapped function, run in a worker: its value and the worker's counters."""
    world = MPI.COMM_WORLD
    return x * x + 1, world.Get_rank(), world.Get_size(), counts()


def main():
    workers = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    library = sys.argv[2] if len(sys.argv) > 2 else DEFAULT_LIBRARY
    open_pvars(library)
    before = counts()
    with MPIPoolExecutor(max_workers=workers, initializer=open_pvars,
                         initargs=(library,)) as pool:
        results = list(pool.map(work, range(TASKS)))
    after = counts()

    errors = []
    for x, (value, rank, size, (sent, received)) in zip(range(TASKS), results):
        if value != x * x + 1:
            errors.append(f"work({x}) = {value}, not {x * x + 1}")
        if size != workers:
            errors.append(f"work({x}) ran in a pool of {size} workers, not {workers}")
        if sent <= 0 or received <= 0:
            errors.append(f"work({x}) on worker {rank}: btl_ofi send_count {sent}, "
                          f"recv_count {received} (-1: not our component)")
    if len(results) != TASKS:
        errors.append(f"{len(results)} results of {TASKS}")
    if min(before) < 0 or after[0] <= before[0] or after[1] <= before[1]:
        errors.append(f"parent: btl_ofi send_count {before[0]} -> {after[0]}, "
                      f"recv_count {before[1]} -> {after[1]} (-1: not our component)")

    ranks = sorted({r[1] for r in results})
    summary = (f"pool.py: {len(results)} of {TASKS} tasks on {workers} spawned workers "
               f"(ranks {ranks}); parent sent {after[0] - before[0]}, "
               f"received {after[1] - before[1]} through btl/ofi")
    for error in errors[:10]:
        print(f"error: {error}", flush=True)
    print(f"{'FAIL' if errors else 'PASS'}  {summary}", flush=True)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
