"""Where the benchmark scripts find the programs and launchers.

contrib/bench sets BTL_OFI_BUILD, and BTL_OFI_MPICH_BUILD when the peer
(MPICH, contrib/setup --peers) is built, or BTL_OFI_MPICH_SKIP to why not.
"""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BTL_OFI_BUILD", os.path.join(ROOT, "build"))
MPIRUN = os.path.join(ROOT, "contrib", "mpirun")
MPIEXEC = os.path.join(ROOT, "contrib", "mpiexec")
MPICH_BUILD = os.environ.get("BTL_OFI_MPICH_BUILD", "")
MPICH_SKIP = os.environ.get("BTL_OFI_MPICH_SKIP", "") or \
    ("" if MPICH_BUILD else "not built (contrib/setup --peers)")
