#!/usr/bin/env python3
"""Driver behind contrib/bench: runs the one-sided (osc_bench), two-sided
(p2p_bench) and raw libfabric (fi_bench) benchmarks through our btl/ofi,
upstream's, the peer MPICH (ch4:ofi) and raw libfabric, interleaved round
by round, and reports medians as CSV, Markdown and PNG plots.

contrib/bench sets everything up and builds the programs first; run that,
not this file.  Every launch is guarded by an overall timeout and by a stall
timeout (no new output line for a while), so a hang costs seconds, and a
size that hung is not tried again in later rounds.
"""

import argparse
import csv
import datetime
import os
import re
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BTL_OFI_BUILD", os.path.join(ROOT, "build"))
MPIRUN = os.path.join(ROOT, "contrib", "mpirun")
# contrib/bench --distro: every job through the distribution's Open MPI
DISTRO = os.environ.get("BTL_OFI_BENCH_DISTRO") == "1"
# Open MPI's own shared-memory BTL: vader in 4.1
SM_BTL = "vader" if DISTRO else "sm"
MPIRUN_CMD = [MPIRUN] + (["--distro"] if DISTRO else [])
# what the nothread column sets btl_ofi_progress_thread to; "on" makes it
# ours again: an A/A run, to see what identical builds read as "within noise"
NOTHREAD_SETTING = os.environ.get("BTL_OFI_BENCH_NOTHREAD") or "off"
# The peer: MPICH with ch4:ofi (contrib/setup --peers), the same benchmark
# sources compiled with its mpicc into BTL_OFI_MPICH_BUILD.  contrib/bench
# sets that variable only when the peer is built, and otherwise
# BTL_OFI_MPICH_SKIP to the reason.
MPIEXEC = os.path.join(ROOT, "contrib", "mpiexec")
MPICH_BUILD = os.environ.get("BTL_OFI_MPICH_BUILD", "")
MPICH_PREFIX = os.environ.get("BTL_OFI_MPICH_PREFIX", "")
MPICH_SKIP = os.environ.get("BTL_OFI_MPICH_SKIP", "") or \
    ("" if MPICH_BUILD else "not built (contrib/setup --peers)")
# What MPICH prints (MPIR_CVAR_DEBUG_SUMMARY=1, rank 0, stdout) about the
# provider it opened.
MPICH_PROVIDER_RE = re.compile(r"^libfabric provider: (\S+) - ")

# ours; ours with its progress thread off; upstream's btl/ofi; Open MPI's
# btl/sm under osc/rdma (one node); raw libfabric; MPICH ch4:ofi on the
# same provider (last, so that the earlier columns keep their places).
IMPLS = ("ours", "nothread", "upstream", "sm", "raw", "mpich")
# (csv column, row key, other implementation, table heading)
RATIOS = (("ours_over_upstream", "r_up", "upstream", "ours/upstream"),
          ("ours_over_raw", "r_raw", "raw", "ours/raw"),
          ("ours_over_nothread", "r_nothread", "nothread", "ours/thread off"),
          ("ours_over_sm", "r_sm", "sm", "ours/btl sm"),
          ("ours_over_mpich", "r_mpich", "mpich", "ours/mpich"))

# Benchmarks in the order the programs run them (osc_bench and fi_bench
# walk their own tables, not the -t list).
OSC_TESTS = ["put_lat", "get_lat", "put_bw", "get_bw", "put_bibw", "put_rate",
             "acc_lat", "gacc_lat", "fop_lat", "cas_lat",
             "busy_put_lat", "busy_get_lat", "busy_fop_lat"]
P2P_TESTS = ["pingpong", "p2p_bw"]
RAW_TESTS = ["put_lat", "get_lat", "put_bw", "get_bw", "put_rate",
             "fop_lat", "cas_lat", "acc_lat"]
# The target computes outside MPI while the origin measures (p99, us).
BUSY_TESTS = {"busy_put_lat", "busy_get_lat", "busy_fop_lat"}
# Lock contention: tests/mpi/rma_dyn_list -b, a shared linked list in a
# dynamic window that LOCK_RANKS ranks append to at once, one launch per
# lock variant; us per list element (the slowest rank's time).
LOCK_TESTS = ["list_nocheck_lat", "list_shared_lat", "list_exclusive_lat", "list_lockall_lat"]
LOCK_RANKS = 4
LOCK_APPENDS_PER_RANK = 250
# Tests measured at 8 bytes only: the atomics, busy-target and lock rows.
ATOMICS = {"acc_lat", "gacc_lat", "fop_lat", "cas_lat"} | BUSY_TESTS | set(LOCK_TESTS)
# Of those, the ones that should reach our atomics: busy_put_lat and
# busy_get_lat are a put and a get
BTL_ATOMIC_TESTS = ATOMICS - {"busy_put_lat", "busy_get_lat"}
P2P_PROGRAM_NAME = {"pingpong": "pingpong", "p2p_bw": "bw"}
# --many-to-one (osc_bench/p2p_bench -M: ranks 1..N-1 all to rank 0) runs
# these; the others have no many-to-one form and read n/a.
MANY_TO_ONE_TESTS = {"put_lat", "get_lat", "put_bw", "get_bw", "put_rate",
                     "acc_lat", "gacc_lat", "fop_lat", "p2p_bw"}
# What osc/rdma prints at osc_base_verbose 40 (MCA_BASE_VERBOSE_INFO) for
# every window it creates: which BTL carries it.  At 20 it prints nothing
# about the choice.
OSC_WINDOW_RE = re.compile(r"creating osc/rdma window of flavor")
OSC_SELECTED_RE = re.compile(r"accelerated_query: selected btl: (\S+)")
OSC_FALLBACK_RE = re.compile(r"could not find an accelerated btl|no suitable btls found")

UNITS = {"lat": "us", "bw": "MB/s", "rate": "msg/s"}


def kind_of(bench):
    if bench.endswith("_lat") or bench == "pingpong":
        return "lat"
    if bench.endswith("_rate"):
        return "rate"
    return "bw"


def all_benchmarks():
    return OSC_TESTS + P2P_TESTS + LOCK_TESTS


# Sizes per mode.  Quick and smoke keep to a few sizes; default takes
# every third power of two; full takes them all.
def powers(lo, hi, step=1):
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s <<= step
    return out


MODES = {
    "smoke": dict(sizes=[8, 4096], rounds=1, iters=2, warmup=1,
                  stall=12, launch_cap=90),
    "quick": dict(sizes=[8, 4096, 1 << 20], rounds=3, iters=None, warmup=None,
                  stall=10, launch_cap=120),
    "default": dict(sizes=powers(1, 4 << 20, 3) + [4 << 20], rounds=3, iters=None,
                    warmup=None, stall=40, launch_cap=400),
    "full": dict(sizes=powers(1, 4 << 20), rounds=3, iters=None, warmup=None,
                 stall=60, launch_cap=600),
}


def fmt_size(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return "%dM" % (n >> 20)
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return "%dK" % (n >> 10)
    return str(n)


def shown_path(path):
    rel = os.path.relpath(path, os.getcwd())
    return path if rel.startswith("..") else rel


def say(msg):
    print(msg, flush=True)


# ------------------------------------------------------------------ launch


class Launch:
    """One program run: its command, what it printed, how it ended."""

    def __init__(self, impl, program, tests, sizes, cmd, log_base):
        self.impl, self.program = impl, program
        self.tests, self.sizes = tests, sizes
        self.cmd, self.log_base = cmd, log_base
        self.results = {}        # bench -> {"rows": {size: value}, "pvars": ..., "done": bool}
        self.order = []          # benches in the order their headers appeared
        self.rc = None
        self.ended = "ok"        # ok | failed | timeout | stall
        self.stderr = ""
        self.seconds = 0.0
        self.provider_seen = None  # MPICH: the provider it says it opened


HEADER_RES = [
    (re.compile(r"^# osc_bench (\S+):"), lambda m: m.group(1)),
    (re.compile(r"^# p2p_bench (\S+):"),
     lambda m: {"pingpong": "pingpong", "bw": "p2p_bw"}.get(m.group(1), m.group(1))),
    (re.compile(r"^# fi_bench (\S+) provider="), lambda m: m.group(1)),
    (re.compile(r"^# rma_dyn_list (\S+):"), lambda m: m.group(1)),
]
ROW_RE = re.compile(r"^\s*(\d+)\s+([-+0-9.eE]+|nan|inf)\s*$")
PVARS_RE = re.compile(r"^# btl_ofi pvars(?: \(sum over ranks\))?: (.*)$")
# osc_bench's busy_* size whose target stopped computing at its cap before
# the origin's flag came: no row, the cell says 'capped'
CAPPED_RE = re.compile(r"^# \S+ (\d+): target capped")


def parse_line(launch, line, on_test_start):
    m = MPICH_PROVIDER_RE.match(line)
    if m:
        launch.provider_seen = m.group(1)
        return
    for rx, name_of in HEADER_RES:
        m = rx.match(line)
        if m:
            bench = name_of(m)
            if launch.order and launch.program == "fi_bench":
                # fi_bench has no trailer: the next header closes a test.
                launch.results[launch.order[-1]]["done"] = True
            launch.order.append(bench)
            launch.results[bench] = {"rows": {}, "pvars": None, "done": False,
                                     "capped": set()}
            on_test_start(bench)
            return
    if not launch.order:
        return
    cur = launch.results[launch.order[-1]]
    m = ROW_RE.match(line)
    if m:
        try:
            cur["rows"][int(m.group(1))] = float(m.group(2))
        except ValueError:
            pass
        return
    m = CAPPED_RE.match(line)
    if m:
        cur.setdefault("capped", set()).add(int(m.group(1)))
        return
    m = PVARS_RE.match(line)
    if m:
        text = m.group(1).strip()
        if text == "absent":
            cur["pvars"] = "absent"
        else:
            cur["pvars"] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", text)}
        cur["done"] = True


def kill_group(proc):
    """Stops a launch we started, with everything it started (it runs in its
    own session, so its process group id is its pid)."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def run_launch(launch, stall, cap, on_test_start):
    os.makedirs(os.path.dirname(launch.log_base), exist_ok=True)
    out_path, err_path = launch.log_base + ".out", launch.log_base + ".err"
    t0 = time.monotonic()
    with open(out_path, "w") as out_f, open(err_path, "w+") as err_f:
        out_f.write("# command: %s\n" % " ".join(shquote(a) for a in launch.cmd))
        out_f.flush()
        proc = subprocess.Popen(launch.cmd, cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=err_f, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        fd = proc.stdout.fileno()
        pending, last = b"", time.monotonic()
        while True:
            now = time.monotonic()
            left = min(stall - (now - last), cap - (now - t0))
            if left <= 0:
                launch.ended = "stall" if stall - (now - last) <= 0 else "timeout"
                kill_group(proc)
                break
            if not sel.select(timeout=min(left, 1.0)):
                continue
            data = os.read(fd, 65536)
            if not data:
                break
            last = time.monotonic()
            pending += data
            while b"\n" in pending:
                raw, pending = pending.split(b"\n", 1)
                line = raw.decode(errors="replace")
                out_f.write(line + "\n")
                parse_line(launch, line, on_test_start)
            out_f.flush()
        sel.close()
        try:
            launch.rc = proc.wait(timeout=max(5.0, cap - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            launch.ended = "timeout"
            kill_group(proc)
            launch.rc = proc.wait()
        proc.stdout.close()
        if launch.ended == "ok" and launch.rc != 0:
            launch.ended = "failed"
        if launch.ended == "ok" and launch.program == "fi_bench" and launch.order:
            launch.results[launch.order[-1]]["done"] = True
        err_f.seek(0)
        launch.stderr = err_f.read()
    launch.seconds = time.monotonic() - t0
    return launch


def launch_stdout(launch):
    """What a finished launch printed on stdout (its log keeps it)."""
    try:
        with open(launch.log_base + ".out", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def shquote(s):
    if re.match(r"^[\w@%+=:,./-]+$", s):
        return s
    return "'" + s.replace("'", "'\\''") + "'"


# ------------------------------------------------------------------ plan


class Bench:
    def __init__(self, args):
        self.args = args
        self.mode = "smoke" if args.smoke else "full" if args.full else \
            "quick" if args.quick else "default"
        self.cfg = dict(MODES[self.mode])
        if args.rounds:
            self.cfg["rounds"] = args.rounds
        if args.sizes:
            self.cfg["sizes"] = args.sizes
        if args.iters:
            self.cfg["iters"] = args.iters
        self.rounds = self.cfg["rounds"]
        self.provider = args.provider
        self.out = None
        self.samples = []       # dicts: bench size impl round value status
        self.launches = []
        self.refused = {}       # (impl, group) -> reason
        self.wrong_provider = {}  # (impl, group) -> what MPICH ran on instead
        self.hang_at = {}       # (impl, bench) -> first size that hung
        self.checks = {}        # (impl, bench) -> list of pvars dicts / "absent"
        self.notes = []
        self.progress_total = 0
        self.progress_done = 0
        self.progress_seen = set()
        self.launch_count = 0
        self._raw_spin = None
        self.selected = self.select_benchmarks(args.tests)
        if args.many_to_one and not args.tests:
            # only what has a many-to-one form (and the lock rows), rather
            # than rows of n/a
            self.selected = [b for b in self.selected
                             if b in MANY_TO_ONE_TESTS or b in LOCK_TESTS]
        self.impls = [i for i in args.impls.split(",") if i]
        bad = [i for i in self.impls if i not in IMPLS]
        if bad or "ours" not in self.impls:
            sys.exit("contrib/bench: --impls takes ours and any of %s (got %s)"
                     % (" ".join(IMPLS), args.impls))
        self.mpich_skipped = None
        if "mpich" in self.impls and MPICH_SKIP:
            self.impls.remove("mpich")
            self.mpich_skipped = MPICH_SKIP
            say("mpich: %s; its column is left out" % MPICH_SKIP)

    @staticmethod
    def select_benchmarks(spec):
        if not spec:
            return all_benchmarks()
        wanted = spec.split(",")
        bad = [w for w in wanted if w not in all_benchmarks()]
        if bad:
            sys.exit("contrib/bench: unknown benchmark(s): %s (known: %s)"
                     % (",".join(bad), " ".join(all_benchmarks())))
        return [b for b in all_benchmarks() if b in wanted]

    # Sizes a benchmark is measured at in this mode.
    def sizes_for(self, bench):
        if bench in ATOMICS:
            return [8]
        sizes = list(self.cfg["sizes"])
        if bench == "pingpong" and self.mode in ("default", "full"):
            sizes = [0] + sizes
        return sizes

    def supported(self, impl, bench):
        if impl not in self.impls:
            return False
        if self.args.many_to_one and bench not in LOCK_TESTS and \
                bench not in MANY_TO_ONE_TESTS:
            return False
        if impl == "raw":
            # fi_bench is two processes, one to one
            return bench in RAW_TESTS and self.args.hosts == 1 and self.args.np == 2 and \
                not self.args.many_to_one and os.access(os.path.join(BUILD, "fi_bench"), os.X_OK)
        if impl == "sm":
            return (bench in OSC_TESTS or bench in LOCK_TESTS) and self.args.hosts == 1
        if impl == "nothread":
            # without the thread a busy target stalls every origin until it
            # stops computing: the number would be the benchmark's own cap
            return bench not in BUSY_TESTS
        if impl == "mpich" and bench in LOCK_TESTS:
            return os.access(os.path.join(MPICH_BUILD, "mpi", "rma_dyn_list"), os.X_OK)
        return True

    # Upstream's btl/ofi is one-sided only: ob1 needs another BTL to reach
    # the peer (without one, MPI_Win_create's collectives crash in ob1), sm
    # on one node and tcp across hosts.
    def upstream_osc_btls(self):
        # BTL_OFI_BENCH_UPSTREAM_BTLS replaces the list, to see the check of
        # upstream_refusal() fail (self,sm: osc/rdma cannot take btl/ofi)
        return os.environ.get("BTL_OFI_BENCH_UPSTREAM_BTLS") or \
            ("ofi,self," + SM_BTL if self.args.hosts == 1 else "ofi,self,tcp")

    def mpirun_prefix(self, impl, group, np=2):
        p = self.provider
        cmd = list(MPIRUN_CMD)
        if impl in ("upstream", "sm"):
            cmd.append("--stock")
        if self.args.hosts > 1 and not self.args.hostfile:
            # the simulated hosts of contrib/hosts: one rank on each of two
            cmd += ["--hosts", str(self.args.hosts)]
        cmd += ["-np", str(np)]
        if np > 2:
            cmd += ["--oversubscribe"]
        if self.args.hosts > 1 and self.args.hostfile:
            # the first half of the ranks on one node, the second on the
            # next: the benchmarks' pairs (i, i + np/2) cross nodes
            cmd += ["--hostfile", self.args.hostfile, "--map-by",
                    "ppr:%d:node" % max(1, (np + 1) // 2)]
        cmd += ["--mca", "pml", "ob1"]
        if impl in ("ours", "nothread"):
            cmd += ["--mca", "btl", "ofi,self", "--mca", "osc", "rdma",
                    "--mca", "btl_ofi_provider_include", p]
            if impl == "nothread":
                cmd += ["--mca", "btl_ofi_progress_thread", NOTHREAD_SETTING]
        elif impl == "sm":
            cmd += ["--mca", "btl", SM_BTL + ",self", "--mca", "osc", "rdma"]
        elif group == "osc":
            # osc/rdma names the BTL of every window at verbose 40 (see
            # upstream_refusal); a few lines per window and rank, printed
            # while the window is created, outside the timed loops.
            cmd += ["--mca", "btl", self.upstream_osc_btls(), "--mca", "osc", "rdma",
                    "--mca", "opal_common_ofi_provider_include", p,
                    "--mca", "osc_base_verbose", "40", "--mca", "btl_base_verbose", "10"]
            if DISTRO:
                # 4.1's osc/rdma takes the lowest-latency BTL that reaches
                # every peer (vader ties with btl/ofi) and names it only in
                # debug builds: this list makes it take btl/ofi
                cmd += ["--mca", "osc_rdma_btls", "ofi"]
        else:
            cmd += ["--mca", "btl", "ofi,self", "--mca", "btl_ofi_mode", "2",
                    "--mca", "osc", "rdma",
                    "--mca", "opal_common_ofi_provider_include", p,
                    "--mca", "btl_base_verbose", "10"]
        return cmd

    def ranks_words(self):
        np = self.args.np
        if self.args.many_to_one:
            return "%d ranks many-to-one" % np
        return "2 ranks" if np == 2 else "%d ranks in %d pairs" % (np, np // 2)

    def mpiexec_prefix(self, np=2):
        """MPICH's launch: Hydra through contrib/mpiexec, on the provider
        under test (FI_PROVIDER: libfabric offers MPICH nothing else), with
        MPIR_CVAR_NOLOCAL=1 so that ranks of one node use the netmod and not
        MPICH's shared memory, and the debug summary that names the
        provider it opened (absorb checks it)."""
        cmd = [MPIEXEC]
        if self.args.hosts > 1 and not self.args.hostfile:
            cmd += ["--hosts", str(self.args.hosts)]
        cmd += ["-n", str(np)]
        if self.args.hosts > 1 and self.args.hostfile:
            cmd += ["-f", self.args.hostfile, "-ppn", str(max(1, np // 2))]
        elif self.args.hosts == 1 and np <= (os.cpu_count() or 1):
            # as Open MPI's mpirun binds 2 ranks (Hydra binds nothing unless told)
            cmd += ["-bind-to", "core"]
        cmd += ["-genv", "FI_PROVIDER", self.provider, "-genv", "MPIR_CVAR_NOLOCAL", "1",
                "-genv", "MPIR_CVAR_DEBUG_SUMMARY", "1"]
        return cmd

    def count_args(self):
        a = []
        if self.cfg["iters"] is not None:
            a += ["-i", str(self.cfg["iters"])]
        if self.cfg["warmup"] is not None:
            a += ["-w", str(self.cfg["warmup"])]
        return a

    def launch_cap(self, tests, sizes):
        points = sum(1 if t in ATOMICS else len(sizes) for t in tests)
        return min(self.cfg["launch_cap"], 30 + 4 * points)

    def build_launches(self, impl, rnd):
        """The launches of one implementation in one round.  Tests that share
        a size list share a launch, to pay the job start-up once; atomics
        (always 8 bytes) ride along with the data tests."""
        plans = []
        groups = [("osc", [t for t in OSC_TESTS if t in self.selected]),
                  ("p2p", [t for t in P2P_TESTS if t in self.selected])]
        for group, tests in groups:
            tests = [t for t in tests if self.supported(impl, t)]
            if not tests or (impl, group) in self.refused or \
                    (impl, group) in self.wrong_provider:
                continue
            by_sizes, atomics = {}, []
            for t in tests:
                sizes = [s for s in self.sizes_for(t)
                         if (impl, t) not in self.hang_at or s < self.hang_at[(impl, t)]]
                if not sizes:
                    continue
                if t in ATOMICS:
                    atomics.append(t)
                else:
                    by_sizes.setdefault(tuple(sizes), []).append(t)
            items = [(list(k), ts) for k, ts in by_sizes.items()]
            if atomics:
                if items:
                    items[0] = (items[0][0], items[0][1] + atomics)
                else:
                    items.append(([8], atomics))
            order = OSC_TESTS if group == "osc" else P2P_TESTS
            for sizes, ts in items:
                plans.append((group, [t for t in order if t in ts], sizes))
        if (impl, "osc") not in self.refused and (impl, "osc") not in self.wrong_provider:
            plans += [("lock", [t], [8]) for t in LOCK_TESTS
                      if t in self.selected and self.supported(impl, t)]
        return plans

    def make_launch(self, impl, group, tests, sizes, rnd):
        self.launch_count += 1
        log = os.path.join(self.out, "logs", "r%d-%s-%s-%03d" % (rnd, impl, group,
                                                               self.launch_count))
        size_arg = ",".join(str(s) for s in sizes) if len(sizes) > 1 else \
            "%d:%d" % (sizes[0], sizes[0])
        watchdog = str(int(self.launch_cap(tests, sizes)) + 10)
        if impl == "raw":
            # fi_bench takes ranges only: one launch per size unless the
            # sizes are consecutive powers of two.
            return self.raw_launches(tests, sizes, rnd, log, watchdog)
        build = MPICH_BUILD if impl == "mpich" else BUILD
        if group == "lock":
            variant = tests[0][len("list_"):-len("_lat")]
            prefix = self.mpiexec_prefix(LOCK_RANKS) if impl == "mpich" else \
                self.mpirun_prefix(impl, "osc", LOCK_RANKS)
            cmd = prefix + [os.path.join(build, "mpi", "rma_dyn_list"), "-b",
                            "-n", str(LOCK_APPENDS_PER_RANK), "-l", variant]
            return [Launch(impl, "rma_dyn_list", tests, sizes, cmd, log)]
        prog = os.path.join(build, "osc_bench" if group == "osc" else "p2p_bench")
        names = tests if group == "osc" else [P2P_PROGRAM_NAME[t] for t in tests]
        prefix = self.mpiexec_prefix(self.args.np) if impl == "mpich" else \
            self.mpirun_prefix(impl, group, self.args.np)
        cmd = prefix + [prog, "-t", ",".join(names), "-m", size_arg, "-T", watchdog]
        cmd += self.count_args() + (["-M"] if self.args.many_to_one else [])
        return [Launch(impl, "osc_bench" if group == "osc" else "p2p_bench",
                       tests, sizes, cmd, log)]

    def raw_spin_flag(self):
        """fi_bench yields the CPU while polling unless told -S.  MPI ranks
        spin, but mpirun binds them to separate cores; fi_bench's two
        processes are not bound, and spinning on a shared core costs a
        scheduler time slice per message, so spinning is only asked for."""
        if not self.args.raw_spin:
            return []
        if self._raw_spin is None:
            try:
                h = subprocess.run([os.path.join(BUILD, "fi_bench"), "-h"],
                                   capture_output=True, text=True, timeout=20)
                self._raw_spin = ["-S"] if re.search(r"^\s*-S\s", h.stdout + h.stderr,
                                                     re.M) else []
            except (OSError, subprocess.TimeoutExpired):
                self._raw_spin = []
        return self._raw_spin

    def raw_launches(self, tests, sizes, rnd, log, watchdog):
        prog = os.path.join(BUILD, "fi_bench")
        base = [prog] + self.raw_spin_flag() + ["-p", self.provider, "-T", watchdog] + \
            self.count_args()
        data = [t for t in tests if t not in ATOMICS]
        atom = [t for t in tests if t in ATOMICS]
        consecutive = sizes == powers(sizes[0], sizes[-1]) if sizes else False
        out = []
        if data and consecutive:
            out.append((data + atom, sizes, "%d:%d" % (sizes[0], sizes[-1])))
        elif data:
            for i, s in enumerate(sizes):
                out.append((data + (atom if i == 0 else []), [s], "%d:%d" % (s, s)))
        else:
            out.append((atom, [8], "8:8"))
        launches = []
        for i, (ts, ss, marg) in enumerate(out):
            order = [t for t in RAW_TESTS if t in ts]
            cmd = base + ["-t", ",".join(order), "-m", marg]
            launches.append(Launch("raw", "fi_bench", order, ss, cmd,
                                   log + ("-%d" % i if len(out) > 1 else "")))
        return launches

    # -------------------------------------------------------------- running

    def on_test_start(self, impl, rnd):
        def cb(bench):
            # fi_bench may cover one benchmark in several launches.
            if bench not in self.selected or (impl, bench, rnd) in self.progress_seen:
                return
            self.progress_seen.add((impl, bench, rnd))
            self.progress_done += 1
            say("[%*d/%d] %-9s %-8s round %d/%d ..." % (
                len(str(self.progress_total)), self.progress_done, self.progress_total,
                bench, impl, rnd, self.rounds))
        return cb

    def record(self, impl, bench, size, rnd, value, status):
        self.samples.append(dict(bench=bench, size=size, impl=impl, round=rnd,
                                 value=value, status=status))

    def upstream_refusal(self, launch, group):
        err = launch.stderr
        if re.search(r"init of component ofi returned failure", err):
            return "upstream btl/ofi refused provider %s" % self.provider
        if group in ("osc", "lock"):
            why = osc_btl_refusal(err, launch.ended == "ok",
                                  any(r["rows"] for r in launch.results.values()))
            if why:
                return why
        if launch.ended == "failed" and "Unreachable" in err:
            return "upstream btl/ofi cannot reach the peer with %s" % self.provider
        return None

    def mpich_refusal(self, launch):
        """MPICH stops in MPI_Init when it cannot use the provider: its
        error stack's last line says why."""
        if launch.order or launch.ended != "failed":
            return None
        lines = [l.strip() for l in (launch.stderr + "\n" + launch_stdout(launch)).splitlines()]
        if not any(re.search(r"Fatal error in \S*Init", l) for l in lines):
            return None
        stack = [l for l in lines if re.match(r"^\w+\(\d*\)\.*:\s*\S", l)]
        why = re.sub(r"^\w+\(\d*\)\.*:\s*", "", stack[-1]) if stack else \
            next(l for l in lines if re.search(r"Fatal error in \S*Init", l))
        return "MPICH refused provider %s: %s" % (self.provider, why)

    def mpich_provider_problem(self, launch):
        """None when MPICH said it opened the provider under test."""
        seen = launch.provider_seen
        if seen == self.provider:
            return None
        if seen is None:
            if launch.ended != "ok" and not launch.order:
                return None  # died before it got that far: its own failure
            return "MPICH named no libfabric provider (no 'libfabric provider:' line)"
        return "MPICH ran on provider %s, not %s" % (seen, self.provider)

    def failure_status(self, launch):
        if launch.ended in ("stall", "timeout"):
            return "timeout"
        if re.search(r"wrong|fetched .* expected|counter is", launch.stderr):
            return "wrong"
        return "failed"

    def continuation(self, launch, rest):
        """The same launch for the tests that a failed launch never reached."""
        names = rest if launch.program != "p2p_bench" else [P2P_PROGRAM_NAME[t] for t in rest]
        cmd = list(launch.cmd)
        cmd[cmd.index("-t") + 1] = ",".join(names)
        self.launch_count += 1
        return Launch(launch.impl, launch.program, rest, launch.sizes, cmd,
                      "%s-cont%d" % (launch.log_base, self.launch_count))

    def run_plan_item(self, impl, group, tests, sizes, rnd):
        queue = self.make_launch(impl, group, tests, sizes, rnd)
        while queue:
            launch = queue.pop(0)
            cap = self.launch_cap(launch.tests, launch.sizes)
            # rma_dyn_list prints its one row when the whole list is built:
            # silence until then is no stall (MPICH's 4 ranks spin on 2
            # cores and take seconds where Open MPI's yield)
            stall = cap if group == "lock" else self.cfg["stall"]
            run_launch(launch, stall, cap, self.on_test_start(impl, rnd))
            self.launches.append(launch)
            progressed, rest = self.absorb(launch, group, rnd)
            gkey = "osc" if group == "lock" else group
            if (impl, gkey) in self.refused or (impl, gkey) in self.wrong_provider:
                return
            if not rest:
                continue
            if progressed:
                # Tests after the one that failed get a fresh launch.
                queue.insert(0, self.continuation(launch, rest))
            else:
                for t in rest:
                    for s in ([8] if t in ATOMICS else launch.sizes):
                        if not (t == "p2p_bw" and s == 0):
                            self.record(impl, t, s, rnd, None, self.failure_status(launch))

    def absorb(self, launch, group, rnd):
        """Records what one launch measured.  Returns (made progress, tests
        that still have to run)."""
        impl = launch.impl
        if impl in ("upstream", "mpich"):
            why = self.upstream_refusal(launch, group) if impl == "upstream" else \
                self.mpich_refusal(launch)
            if why:
                # the lock rows are one-sided: refused with the osc group
                self.refused[(impl, "osc" if group == "lock" else group)] = why
                say("    %s: %s -> 'refused'" % (impl, why))
                return True, []
        if impl == "mpich":
            why = self.mpich_provider_problem(launch)
            if why:
                # its numbers measure something else: none is kept, and
                # MPICH is not run again in this group
                self.wrong_provider[(impl, "osc" if group == "lock" else group)] = why
                say("    mpich: %s -> 'provider?' (log %s.out)"
                    % (why, os.path.relpath(launch.log_base, ROOT)))
                return True, []
        status = self.failure_status(launch) if launch.ended != "ok" else "ok"
        progressed = False
        rest = []
        failed_one = False
        for t in launch.tests:
            res = launch.results.get(t)
            expected = [8] if t in ATOMICS else \
                [s for s in launch.sizes if not (t == "p2p_bw" and s == 0)]
            if res is None and impl == "raw" and re.search(
                    r"^%s: provider reports no" % t, launch.stderr, re.M):
                for s in expected:
                    self.record(impl, t, s, rnd, None, "n/a")
                progressed = True
                continue
            if res is None:
                if failed_one or launch.ended == "ok":
                    rest.append(t)
                    continue
                # The program died before this test printed anything.
                failed_one = True
                res = {"rows": {}, "pvars": None, "done": False}
            if res["done"] or all(s in res["rows"] for s in expected):
                progressed = True
            for s in expected:
                if s in res["rows"]:
                    self.record(impl, t, s, rnd, res["rows"][s], "ok")
                elif s in res.get("capped", ()):
                    self.record(impl, t, s, rnd, None, "capped")
                else:
                    self.record(impl, t, s, rnd, None, status if status != "ok" else "missing")
                    if status == "timeout" and (impl, t) not in self.hang_at:
                        self.hang_at[(impl, t)] = s
                        say("    %s %s: no progress at %s bytes (%s); later rounds stop "
                            "below that size" % (impl, t, fmt_size(s), launch.ended))
            if res.get("pvars") is not None:
                self.checks.setdefault((impl, t), []).append(res["pvars"])
            if not res["done"] and launch.ended != "ok":
                failed_one = True
        if launch.ended != "ok":
            lines = [l.strip() for l in launch.stderr.splitlines() if l.strip()]
            telling = [l for l in lines if re.search(
                r"signal \d+|error|wrong|watchdog|refused|unreachable|fetched|counter is|"
                r"abort", l, re.I) and not l.startswith("[")]
            tail = "\n".join((telling or [l for l in lines if not l.startswith("[") and
                                           not l.startswith("---")])[:3])
            say("    %s launch %s after %.1fs (log %s.err)%s" % (
                impl, launch.ended, launch.seconds, os.path.relpath(launch.log_base, ROOT),
                (":\n      " + tail.replace("\n", "\n      ")) if tail else ""))
        return progressed, rest

    def count_progress(self):
        total = 0
        for impl in IMPLS:
            for b in self.selected:
                grp = "p2p" if b in P2P_TESTS else "osc"
                if self.supported(impl, b) and (impl, grp) not in self.refused and \
                        (impl, grp) not in self.wrong_provider:
                    total += 1
        return total * self.rounds

    def detect_provider(self):
        cmd = MPIRUN_CMD + ["-np", "2", "--mca", "pml", "ob1", "--mca", "btl", "ofi,self",
               "--mca", "btl_ofi_verbose", "1",
               os.path.join(BUILD, "p2p_bench"), "-t", "pingpong", "-m", "8:8",
               "-i", "1", "-w", "0", "-T", "60"]
        try:
            p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=90,
                               stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            sys.exit("contrib/bench: provider detection timed out; pass --provider")
        m = re.search(r"btl:ofi: provider ([^,\s]+)", p.stdout + p.stderr)
        if not m:
            sys.stderr.write(p.stdout[-2000:] + p.stderr[-2000:])
            sys.exit("contrib/bench: our btl/ofi chose no provider; pass --provider")
        return m.group(1)

    def run(self):
        if not self.provider:
            say("== detecting the provider our btl/ofi chooses ...")
            self.provider = self.detect_provider()
            say("   provider: %s" % self.provider)
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.provider)
        self.out = os.path.abspath(self.args.out or os.path.join(
            ROOT, "bench-out", "%s-%s" % (safe, stamp)))
        os.makedirs(os.path.join(self.out, "logs"), exist_ok=True)
        say("== %s mode, provider %s, %d round(s), %s, output in %s" % (
            self.mode, self.provider, self.rounds, self.ranks_words(), shown_path(self.out)))
        self.started = time.time()
        self.load_at_start = " ".join("%.2f" % x for x in os.getloadavg())
        self.progress_total = self.count_progress()
        with CompetingLoad(self.args.load):
            for rnd in range(1, self.rounds + 1):
                for impl in self.round_order(rnd):
                    for group, tests, sizes in self.build_launches(impl, rnd):
                        # the lock rows are one-sided: refused with the osc group
                        key = (impl, "osc" if group == "lock" else group)
                        if key in self.refused or key in self.wrong_provider:
                            continue
                        self.run_plan_item(impl, group, tests, sizes, rnd)
                        self.progress_total = max(self.count_progress(), self.progress_done)
                self.mark_structural(rnd)
        self.elapsed = time.time() - self.started
        return self.report()

    @staticmethod
    def round_order(rnd):
        """Every other round runs the implementations backwards, so that none
        always launches first after the previous round's last."""
        return IMPLS if rnd % 2 else tuple(reversed(IMPLS))

    def mark_structural(self, rnd):
        """Cells that have no measurement by design, and hung sizes skipped."""
        for b in self.selected:
            grp = "p2p" if b in P2P_TESTS else "osc"
            for s in self.sizes_for(b):
                if b == "p2p_bw" and s == 0:
                    continue
                for impl in IMPLS:
                    if not self.supported(impl, b):
                        self.record(impl, b, s, rnd, None, "n/a")
                    elif (impl, grp) in self.refused:
                        self.record(impl, b, s, rnd, None, "refused")
                    elif (impl, grp) in self.wrong_provider:
                        self.record(impl, b, s, rnd, None, "provider?")
                    elif (impl, b) in self.hang_at and s >= self.hang_at[(impl, b)] and \
                            not any(x for x in self.samples if x["impl"] == impl and
                                    x["bench"] == b and x["size"] == s and x["round"] == rnd):
                        self.record(impl, b, s, rnd, None, "timeout")

    # -------------------------------------------------------------- report

    def cell(self, impl, bench, size):
        vals = [x["value"] for x in self.samples if x["impl"] == impl and x["bench"] == bench
                and x["size"] == size and x["status"] == "ok"]
        stats = [x["status"] for x in self.samples if x["impl"] == impl and
                 x["bench"] == bench and x["size"] == size and x["status"] != "ok"]
        if vals:
            return statistics.median(vals), len(vals), None
        for word in ("refused", "n/a", "provider?", "capped", "wrong", "timeout", "failed",
                     "missing"):
            if word in stats:
                return None, 0, word
        return None, 0, "missing"

    def rows(self):
        out = []
        for b in self.selected:
            for s in self.sizes_for(b):
                if b == "p2p_bw" and s == 0:
                    continue
                row = dict(bench=b, size=s, unit=UNITS[kind_of(b)])
                for impl in IMPLS:
                    v, n, word = self.cell(impl, b, s)
                    row[impl], row["n_" + impl], row["word_" + impl] = v, n, word
                for _, key, other, _ in RATIOS:
                    row[key] = ratio(row["ours"], row[other])
                out.append(row)
        return out

    def report(self):
        rows = self.rows()
        self.write_csv(rows)
        table = self.markdown_table(rows)
        plots = self.plots(rows)
        problems = self.find_problems(rows)
        self.write_summary(rows, table, plots, problems)
        say("")
        say(table)
        say("")
        for p in problems:
            say("note: " + p)
        say("== wrote %s (summary.md, samples.csv, medians.csv, %d plot(s)) in %.0fs" % (
            shown_path(self.out), len(plots), self.elapsed))
        if self.args.smoke:
            return self.smoke_verdict(rows)
        return 0

    def smoke_verdict(self, rows):
        """Every row must have a number from ours and from raw (this
        project's code) unless the cell is missing by design; upstream's
        and MPICH's failures are their own and only reported, but MPICH on
        a provider other than the one under test is this driver's fault."""
        fatal = 0
        for r in rows:
            for impl in IMPLS:
                word = r["word_" + impl]
                if r[impl] is not None or word in ("refused", "n/a"):
                    continue
                what = "smoke: %s %s: no number from %s (%s)" % (
                    r["bench"], fmt_size(r["size"]), impl, word)
                if smoke_counts(impl, word):
                    say(what)
                    fatal += 1
                else:
                    say(what + " -- %s's problem, not counted" % impl)
        if fatal:
            say("smoke: FAILED, %d row(s) without a number" % fatal)
            return 1
        say("smoke: every benchmark printed every row")
        return 0

    def write_csv(self, rows):
        with open(os.path.join(self.out, "samples.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["benchmark", "size", "unit", "impl", "round", "value", "status"])
            for x in self.samples:
                w.writerow([x["bench"], x["size"], UNITS[kind_of(x["bench"])], x["impl"],
                            x["round"], "" if x["value"] is None else "%.6g" % x["value"],
                            x["status"]])
        with open(os.path.join(self.out, "medians.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["benchmark", "size", "unit"] + list(IMPLS) +
                       [col for col, _, _, _ in RATIOS] + ["n_" + i for i in IMPLS])
            for r in rows:
                w.writerow([r["bench"], r["size"], r["unit"]] +
                           ["%.6g" % r[i] if r[i] is not None else r["word_" + i]
                            for i in IMPLS] +
                           ["" if r[key] is None else "%.4g" % r[key]
                            for _, key, _, _ in RATIOS] +
                           [r["n_" + i] for i in IMPLS])

    def markdown_table(self, rows):
        impls = [i for i in IMPLS if i in self.impls]
        ratios = [x for x in RATIOS if x[2] in self.impls]
        lines = ["| benchmark | size | unit | %s |" % " | ".join(
                     impls + [x[3] for x in ratios]),
                 "|---|---:|---|%s" % ("---:|" * (len(impls) + len(ratios)))]
        for r in rows:
            cells = []
            for i in impls:
                txt = num_or_word(r[i], r["word_" + i])
                if r[i] is not None and r["n_" + i] < self.rounds:
                    txt += " (%d/%d)" % (r["n_" + i], self.rounds)
                cells.append(txt)
            lines.append("| %s | %s | %s | %s |" % (
                r["bench"], fmt_size(r["size"]), r["unit"],
                " | ".join(cells + [fmt_ratio(r[x[1]]) for x in ratios])))
        return "\n".join(lines)

    def find_problems(self, rows):
        """Things about our component worth a look, from the numbers and
        from its own MPI_T counters."""
        out = []
        for r in rows:
            if r["ours"] is None and r["word_ours"] not in ("n/a",):
                out.append("ours: %s at %s bytes: %s" % (r["bench"], fmt_size(r["size"]),
                                                          r["word_ours"]))
        for b in self.selected:
            pv = self.checks.get(("ours", b), [])
            if not pv:
                continue
            if any(p == "absent" for p in pv):
                out.append("ours: %s ran without our btl/ofi's counters (not our component?)" % b)
                continue
            key = {"put": "put_count", "get": "get_count", "pin": "send_count",
                   "p2p": "send_count"}.get(b[:3], None)
            if key and all(p.get(key, 0) == 0 for p in pv):
                out.append("ours: %s: btl/ofi %s stayed 0: traffic did not go through it"
                           % (b, key))
            if b in BTL_ATOMIC_TESTS and all(p.get("atomic_count", 0) == 0 for p in pv):
                out.append("ours: %s: no btl/ofi atomics (atomic_count=0, put=%d get=%d): "
                           "osc/rdma emulated it" % (b, pv[-1].get("put_count", 0),
                                                     pv[-1].get("get_count", 0)))
            errs = sum(p.get("error_count", 0) for p in pv)
            if errs:
                out.append("ours: %s: btl_ofi_error_count=%d" % (b, errs))
            ops = sum(p.get("put_count", 0) + p.get("get_count", 0) + p.get("atomic_count", 0)
                      + p.get("send_count", 0) for p in pv)
            retries = sum(p.get("retry_count", 0) for p in pv)
            if ops and retries > 10 * ops:
                out.append("ours: %s: %d EAGAIN retries for %d operations (%.0f per op)"
                           % (b, retries, ops, retries / ops))
        for r in rows:
            if r["r_raw"] is not None and r["size"] <= 4096:
                slow = r["r_raw"] > 3 if kind_of(r["bench"]) == "lat" else r["r_raw"] < 1 / 3
                if slow:
                    out.append("ours: %s at %s bytes is %s raw libfabric (%s vs %s %s)" % (
                        r["bench"], fmt_size(r["size"]),
                        "%.1fx slower than" % (r["r_raw"] if kind_of(r["bench"]) == "lat"
                                               else 1 / r["r_raw"]),
                        fmt_num(r["ours"]), fmt_num(r["raw"]), r["unit"]))
        for (impl, grp), why in sorted(self.refused.items()):
            out.append("%s %s: %s" % (impl, "one-sided" if grp == "osc" else "two-sided", why))
        for (impl, grp), why in sorted(self.wrong_provider.items()):
            out.append("%s %s: %s: its numbers are left out ('provider?')" % (
                impl, "one-sided" if grp == "osc" else "two-sided", why))
        if "mpich" in self.impls and not self.supported("mpich", "list_shared_lat"):
            out.append("mpich: no %s: the list_*_lat rows are n/a for it" % os.path.join(
                shown_path(MPICH_BUILD), "mpi", "rma_dyn_list"))
        if self.mpich_skipped:
            out.append("mpich: %s, so there is no mpich column" % self.mpich_skipped)
        # MPICH's own failures, which cost it numbers (its crashes are not
        # ours to debug, but the table should not hide them)
        for l in self.launches:
            if l.impl != "mpich" or l.ended == "ok":
                continue
            sig = re.search(r"terminated with signal \d+|signal \d+|Fatal error[^\n]*", l.stderr)
            out.append("mpich: %s %s after %.0f s %s%s (log %s.err)" % (
                l.program, l.ended, l.seconds,
                "(last test started: %s)" % l.order[-1] if l.order else "before its first test",
                ": " + sig.group(0) if sig else "", os.path.relpath(l.log_base, self.out)))
        return out

    def plots(self, rows):
        gnuplot = shutil.which("gnuplot")
        if not gnuplot or self.args.no_plots:
            return []
        script = os.path.join(ROOT, "bench", "plot.gp")
        made = []
        os.makedirs(os.path.join(self.out, "plots"), exist_ok=True)
        for b in self.selected:
            brows = [r for r in rows if r["bench"] == b and r["size"] > 0]
            if b in ATOMICS or len(brows) < 2:
                continue
            cols = [str(i + 2) for i, impl in enumerate(IMPLS)
                    if any(r[impl] is not None for r in brows)]
            if not cols:
                continue
            data = os.path.join(self.out, "plots", b + ".dat")
            with open(data, "w") as f:
                f.write("size %s\n" % " ".join(IMPLS))
                for r in brows:
                    f.write("%d %s\n" % (r["size"], " ".join(
                        "?" if r[i] is None else "%.6g" % r[i] for i in IMPLS)))
            png = os.path.join(self.out, b + ".png")
            kind = kind_of(b)
            ylabel = {"lat": "latency (us)", "bw": "bandwidth (MB/s)",
                      "rate": "messages/s"}[kind]
            if self.run_gnuplot(gnuplot, script, data, png, "%s, provider %s" % (b, self.provider),
                                ylabel, " ".join(cols), "lines"):
                made.append(png)
        atoms = [r for r in rows if r["bench"] in ATOMICS]
        if atoms:
            cols = [str(i + 2) for i, impl in enumerate(IMPLS)
                    if any(r[impl] is not None for r in atoms)]
            if cols:
                data = os.path.join(self.out, "plots", "atomics.dat")
                with open(data, "w") as f:
                    f.write("test %s\n" % " ".join(IMPLS))
                    for r in atoms:
                        f.write("%s %s\n" % (r["bench"], " ".join(
                            "?" if r[i] is None else "%.6g" % r[i] for i in IMPLS)))
                png = os.path.join(self.out, "atomics.png")
                if self.run_gnuplot(gnuplot, script, data, png,
                                    "8-byte atomics + flush, provider %s" % self.provider,
                                    "latency (us)", " ".join(cols), "bars"):
                    made.append(png)
        return made

    def run_gnuplot(self, gnuplot, script, data, png, title, ylabel, cols, style):
        expr = "datafile='%s'; outfile='%s'; ttl='%s'; ylab='%s'; cols='%s'; style='%s'" % (
            data, png, title.replace("'", ""), ylabel, cols, style)
        try:
            p = subprocess.run([gnuplot, "-e", expr, script], capture_output=True, text=True,
                               timeout=60)
        except subprocess.TimeoutExpired:
            return False
        if p.returncode != 0 or not os.path.exists(png):
            self.notes.append("gnuplot failed for %s: %s" % (os.path.basename(png),
                                                             p.stderr.strip()[-300:]))
            return False
        return True

    def machine(self):
        info = {}
        try:
            info["nproc"] = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
        except OSError:
            pass
        cpu = "?"
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("model name"):
                        cpu = line.split(":", 1)[1].strip()
                        break
        except OSError:
            pass
        info["CPU"] = cpu
        info["kernel"] = os.uname().release
        try:
            v = subprocess.run(["fi_info", "--version"], capture_output=True, text=True,
                               timeout=20).stdout
            m = re.search(r"libfabric: (\S+)", v)
            info["libfabric"] = m.group(1) if m else v.strip()
        except (OSError, subprocess.TimeoutExpired):
            info["libfabric"] = "?"
        try:
            v = subprocess.run(MPIRUN_CMD + ["--version"],
                               capture_output=True, text=True, timeout=30).stdout
            m = re.search(r"\(Open MPI\) (\S+)", v) or re.search(r"(\d+\.\d+\.\d+)", v)
            info["Open MPI"] = m.group(1) if m else "?"
        except (OSError, subprocess.TimeoutExpired):
            info["Open MPI"] = "?"
        if "mpich" in self.impls:
            try:
                v = subprocess.run([os.path.join(MPICH_PREFIX, "bin", "mpichversion")],
                                   capture_output=True, text=True, timeout=30).stdout
                m = re.search(r"MPICH Version:\s*(\S+)", v)
                info["MPICH"] = m.group(1) if m else "?"
            except (OSError, subprocess.TimeoutExpired):
                info["MPICH"] = "?"
        try:
            info["load average at end"] = " ".join("%.2f" % x for x in os.getloadavg())
        except OSError:
            pass
        return info

    def write_summary(self, rows, table, plots, problems):
        m = self.machine()
        m["load average at start"] = self.load_at_start
        L = []
        L.append("# btl/ofi benchmarks: provider `%s`" % self.provider)
        L.append("")
        L.append("Command: `%s`" % self.args.cmdline)
        L.append("")
        L.append("Date: %s; %s mode, %d round(s), medians over rounds; took %.0f s." % (
            datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S"), self.mode, self.rounds,
            self.elapsed))
        L.append("")
        L.append("| machine | |")
        L.append("|---|---|")
        for k, v in m.items():
            L.append("| %s | %s |" % (k, v))
        L.append("")
        L.append("Implementations (each round runs %s in turn, every other round in "
                 "reverse order):" % ", ".join(self.impls))
        L.append("")
        if DISTRO:
            L.append("Every job runs the distribution's Open MPI (%s): `contrib/mpirun --distro` "
                     "in place of `contrib/mpirun` below, ours from `build-distro/`, "
                     "upstream = the distribution's own btl/ofi (one-sided: with `--mca "
                     "osc_rdma_btls ofi`, or 4.1's osc/rdma may take the shared-memory BTL "
                     "beside it), sm = its `%s`."
                     % (m.get("Open MPI", "?"), SM_BTL))
            L.append("")
        np = self.args.np
        L.append("- **ours**: `contrib/mpirun -np %d --mca pml ob1 --mca btl ofi,self "
                 "--mca osc rdma --mca btl_ofi_provider_include '%s'`" % (np, self.provider))
        L.append("- **upstream**, one-sided: `contrib/mpirun --stock -np %d --mca pml ob1 "
                 "--mca btl %s --mca osc rdma --mca opal_common_ofi_provider_include '%s'` "
                 "(its btl/ofi "
                 "carries no two-sided traffic: ob1 needs the other BTL); "
                 "two-sided: `--mca btl ofi,self --mca btl_ofi_mode 2` instead of the btl list. "
                 "`refused`: upstream's btl/ofi did not take the provider, or osc/rdma did not "
                 "say at `osc_base_verbose 40` that btl/ofi carried every window, so there is "
                 "no upstream number to compare." % (
                     np, self.upstream_osc_btls(), self.provider))
        L.append("- **nothread**: ours with `--mca btl_ofi_progress_thread %s` (no number "
                 "for the busy_* rows: its origins wait until the target stops computing)%s."
                 % (NOTHREAD_SETTING, "" if NOTHREAD_SETTING == "off" else
                    "; BTL_OFI_BENCH_NOTHREAD set it: this column is not thread-off"))
        L.append("- **sm**: Open MPI's own btl/%s under osc/rdma, one node: `contrib/mpirun "
                 "--stock -np %d --mca pml ob1 --mca btl %s,self --mca osc rdma`."
                 % (SM_BTL, np, SM_BTL))
        L.append("- **raw**: `build/fi_bench %s-p '%s'` (libfabric alone, same fi_info "
                 "attributes; `n/a` where it has no equivalent test).  %s" % (
                     " ".join(self.raw_spin_flag()) + " " if self.raw_spin_flag() else "",
                     self.provider,
                     "It spins while polling (`--raw-spin`): fair only when its two "
                     "processes get a core each." if self.raw_spin_flag() else
                     "It yields the CPU while polling (its default; MPI ranks spin on "
                     "cores of their own), so on a loaded machine its small-message "
                     "latency includes scheduler delays; `--raw-spin` makes it spin."))
        if "mpich" in self.impls:
            L.append("- **mpich**: MPICH %s with its ch4:ofi device on the same libfabric "
                     "(`contrib/setup --peers`), the same benchmark sources built with its "
                     "mpicc into `%s`: `contrib/mpiexec %s`.  `FI_PROVIDER` leaves MPICH "
                     "only the provider under test, `MPIR_CVAR_NOLOCAL=1` keeps ranks of one "
                     "node off its shared memory, and each launch must print `libfabric "
                     "provider: %s` (its debug summary), or its numbers are left out "
                     "(`provider?`).  `refused`: MPICH stopped in `MPI_Init` on this "
                     "provider (the note says why)." % (
                         m.get("MPICH", "?"), shown_path(MPICH_BUILD),
                         " ".join(shquote(a) for a in self.mpiexec_prefix()[1:]),
                         self.provider))
        elif self.mpich_skipped:
            L.append("- **mpich**: %s." % self.mpich_skipped)
        L.append("")
        L.append("Latency in µs (lower is better: ours/x < 1 means ours is faster); bandwidth "
                 "in MB/s with MB = 10^6 bytes and rate in messages/s (higher is better: "
                 "ours/x > 1 means ours is faster).  `(k/n)`: only k of n rounds gave a number. "
                 "Words instead of numbers: `refused`, `n/a`, `provider?`, `timeout` (no progress; the "
                 "launch was killed and later rounds skip that size), `failed`, `wrong` "
                 "(the benchmark's data check failed), `capped` (a busy_* target computed until its "
                 "5 s cap without seeing the origin's closing flag: the operations were then "
                 "served, or the flag left unread, by a target back in MPI, so there is no "
                 "computing-target number).  Logs of every launch: `logs/`.")
        L.append("")
        if np > 2 or self.args.many_to_one:
            L.append("%d ranks, %s.  Latency rows are the mean over the origins (each timing "
                     "its own operations), bandwidth and rate rows the sum over them; the "
                     "programs' `# per-origin` lines in `logs/` give min, mean and max.  The "
                     "list_* rows keep their own %d ranks." % (
                         np, "many-to-one: ranks 1..%d all put, get, accumulate or send to "
                         "rank 0 (`-M`)" % (np - 1) if self.args.many_to_one else
                         "%d concurrent pairs of rank i (origin) and rank i+%d"
                         % (np // 2, np // 2),
                         LOCK_RANKS))
            L.append("")
        L.append("One-sided tests use `MPI_Win_create` windows and `MPI_Win_lock_all`, one "
                 "`MPI_Win_flush` per operation (latency) or per 64 operations (bw, rate); "
                 "two-sided: ping-pong (half round trip) and 64 `MPI_Isend` per "
                 "acknowledgement.  Every size runs at most ~0.1 s timed after a short warm-up "
                 "(OSU iteration counts otherwise).")
        L.append("")
        L.append(table)
        L.append("")
        if problems:
            L.append("## Notes")
            L.append("")
            for p in problems:
                L.append("- " + p)
            L.append("")
        L.append("## Counters of our btl/ofi (MPI_T, summed over all ranks, last round)")
        L.append("")
        L.append("| benchmark | put | get | atomic | send | flush | retry | error |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for b in self.selected:
            pv = self.checks.get(("ours", b))
            if not pv:
                continue
            p = pv[-1]
            if p == "absent":
                L.append("| %s | absent | | | | | | |" % b)
                continue
            L.append("| %s | %d | %d | %d | %d | %d | %d | %d |" % (
                b, p.get("put_count", 0), p.get("get_count", 0), p.get("atomic_count", 0),
                p.get("send_count", 0), p.get("flush_count", 0), p.get("retry_count", 0),
                p.get("error_count", 0)))
        L.append("")
        if plots:
            L.append("## Plots")
            L.append("")
            for png in plots:
                L.append("![%s](%s)" % (os.path.basename(png)[:-4], os.path.basename(png)))
            L.append("")
        for n in self.notes:
            L.append("- " + n)
        with open(os.path.join(self.out, "summary.md"), "w") as f:
            f.write("\n".join(L) + "\n")
        with open(os.path.join(self.out, "commands.txt"), "w") as f:
            for l in self.launches:
                f.write("%s  # %s, %s, %.1fs\n" % (" ".join(shquote(a) for a in l.cmd),
                                                   l.impl, l.ended, l.seconds))


def osc_btl_refusal(err, ended_ok, measured):
    """Why the windows of an upstream one-sided launch were not carried by
    upstream's btl/ofi, from osc/rdma's lines at osc_base_verbose 40
    (stderr `err`), or None when they all were.  Every rank names the BTL
    of every window it creates; a window without the line, another BTL, or
    the fall-back to active messages (emulated RMA over whatever BTL sends)
    means the upstream column would not measure btl/ofi.  `measured`: some
    test printed a row, so windows were created."""
    chosen = OSC_SELECTED_RE.findall(err)
    others = sorted(set(chosen) - {"ofi"})
    if others:
        return "osc/rdma put its windows on btl %s, not upstream's btl/ofi" % ",".join(others)
    if OSC_FALLBACK_RE.search(err):
        return ("osc/rdma found no RDMA BTL and fell back to active messages: "
                "upstream's btl/ofi did not carry the window")
    if DISTRO:
        # 4.1's osc/rdma names its BTL only in debug builds (osc_rdma_btls
        # makes it take btl/ofi)
        return None
    windows = len(OSC_WINDOW_RE.findall(err))
    if (measured or windows) and not chosen:
        return ("osc/rdma never said that btl/ofi carried a window (no 'accelerated_query: "
                "selected btl: ofi' line at osc_base_verbose 40)")
    if ended_ok and len(chosen) < windows:
        return ("osc/rdma named btl/ofi for %d of %d window creations; the others got no "
                "accelerated BTL" % (len(chosen), windows))
    return None


def smoke_counts(impl, word):
    """Whether a cell without a number fails the smoke run.  Our code must
    give one; another implementation's failure is its own, except a wrong
    provider, which is this driver's doing.  A target that computed past its
    cap is a result for the others (their progress needs the target in MPI)
    but a failure for ours, whose progress thread must serve it."""
    if word == "provider?":
        return True
    if impl in ("upstream", "mpich"):
        return False
    return not (word == "capped" and impl != "ours")


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


class CompetingLoad:
    """--load N: N CPU-bound processes in a session of their own beside the
    jobs, as other users' work or daemons are, for the whole run; ended
    however the run ends."""

    def __init__(self, count):
        self.count = count or 0
        self.procs = []

    def __enter__(self):
        for _ in range(self.count):
            self.procs.append(subprocess.Popen(
                ["sh", "-c", "while :; do :; done"], start_new_session=True,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
        if self.count:
            say("== competing load: %d CPU-bound process(es) in their own session"
                % self.count)
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        return False


def size_list(spec):
    """--sizes: comma-separated byte counts, K and M suffixes allowed."""
    out = []
    for word in spec.split(","):
        m = re.fullmatch(r"(\d+)([KkMm]?)", word.strip())
        if not m:
            raise argparse.ArgumentTypeError("not a size: %r" % word)
        out.append(int(m.group(1)) << {"": 0, "k": 10, "m": 20}[m.group(2).lower()])
    return sorted(set(out))


def fmt_num(v):
    if v is None:
        return "-"
    if v >= 1000:
        return "%.0f" % v
    if v >= 10:
        return "%.1f" % v
    if v >= 1 or v == 0:
        return "%.2f" % v
    return "%.3g" % v


def num_or_word(v, word):
    return fmt_num(v) if v is not None else (word or "missing")


def fmt_ratio(r):
    if r is None:
        return "-"
    return "%.2f" % r if r >= 0.1 else "%.2g" % r


def main():
    ap = argparse.ArgumentParser(prog="contrib/bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--provider")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true")
    g.add_argument("--full", action="store_true")
    g.add_argument("--smoke", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--iters", type=int,
                    help="timed iterations of every size, never cut short (osc_bench and "
                    "p2p_bench -i): a latency row under --load then spans many time slices")
    ap.add_argument("--hosts", type=int, default=1)
    ap.add_argument("--np", type=int, default=2,
                    help="ranks of every osc/p2p launch (even: pairs i, i+np/2)")
    ap.add_argument("--many-to-one", action="store_true",
                    help="ranks 1..np-1 all target rank 0 (osc_bench/p2p_bench -M)")
    ap.add_argument("--hostfile", default=os.environ.get("BTL_OFI_HOSTFILE"))
    ap.add_argument("--tests", help="comma-separated subset of: " + " ".join(all_benchmarks()))
    ap.add_argument("--impls", default=",".join(IMPLS),
                    help="comma-separated subset of: " + " ".join(IMPLS))
    ap.add_argument("--sizes", type=size_list,
                    help="comma-separated message sizes instead of the mode's (8,64K,1M)")
    ap.add_argument("--load", type=int, default=0,
                    help="N CPU-bound processes in their own session beside the jobs")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--raw-spin", action="store_true",
                    help="run fi_bench with -S (spin, never yield)")
    ap.add_argument("--cmdline", default="contrib/bench " + " ".join(sys.argv[1:]))
    args = ap.parse_args()
    if args.rounds is not None and args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if args.hosts < 1:
        ap.error("--hosts must be at least 1")
    if args.np < 2:
        ap.error("--np must be at least 2")
    if args.np % 2 and not args.many_to_one:
        ap.error("--np %d: pairs need an even number of ranks (or --many-to-one)" % args.np)
    if args.hosts == 1 or args.hostfile:
        return Bench(args).run()
    # simulated hosts: take down what this run brought up, however it ends
    hosts = os.path.join(ROOT, "contrib", "hosts")
    were_up = subprocess.run([hosts, "status"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL).returncode == 0
    try:
        return Bench(args).run()
    finally:
        if not were_up:
            subprocess.run([hosts, "down"], stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    sys.exit(main())
