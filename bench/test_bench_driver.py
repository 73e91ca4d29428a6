#!/usr/bin/env python3
"""Checks of bench/bench_driver.py's parsing that need no MPI job: the
upstream check (did upstream's btl/ofi carry every window, from osc/rdma's
lines at osc_base_verbose 40), the reading of osc_bench's output with
more than two ranks, a busy_* target that stopped at its cap (no
number), bench/busy_hosts.py's reading of the busy rows, and --iters.  Run by
contrib/check's bench lane; exit 0 when all hold.

    python3 bench/test_bench_driver.py
"""

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("bench_driver",
                                              os.path.join(HERE, "bench_driver.py"))
driver = importlib.util.module_from_spec(spec)
spec.loader.exec_module(driver)


def window_lines(pid, btl, wid=3):
    """What one rank of Open MPI 5.0.7 prints for one window at
    osc_base_verbose 40 (a release build), with `btl` chosen, or the
    fall-back to active messages when btl is None."""
    out = ["[HOST:%d] creating osc/rdma window of flavor 1 with id %d" % (pid, wid)]
    if btl:
        out.append("[HOST:%d] accelerated_query: selected btl: %s" % (pid, btl))
    else:
        out += ["[HOST:%d] accelerated_query: no suitable btls found" % pid,
                "[HOST:%d] could not find an accelerated btl. falling back on active-message "
                "BTLs" % pid,
                "[HOST:%d] found alternate btl sm" % pid]
    out.append("[HOST:%d] finished creating osc/rdma window with id %d" % (pid, wid))
    return out


def err_of(*ranks):
    lines = ["[HOST:1] select: init of component ofi returned success"]
    for r in ranks:
        lines += r
    return "\n".join(lines) + "\n"


CASES = [
    # (what, stderr, ended ok, rows printed, refused?)
    ("both ranks on btl/ofi, two windows",
     err_of(window_lines(1, "ofi"), window_lines(2, "ofi"),
            window_lines(1, "ofi", 4), window_lines(2, "ofi", 4)), True, True, False),
    ("osc/rdma chose sm", err_of(window_lines(1, "sm"), window_lines(2, "sm")),
     True, True, True),
    ("one rank fell back to active messages",
     err_of(window_lines(1, "ofi"), window_lines(2, None)), True, True, True),
    ("the selection line never printed (verbosity 20, as before)",
     err_of(["[HOST:1] select: component rdma selected"]), True, True, True),
    ("a window without its line", err_of(window_lines(1, "ofi"), window_lines(2, "ofi"),
                                         window_lines(1, None)[:1]), True, True, True),
    ("a launch that died before any window", err_of(), False, False, False),
]


def check_refusals():
    bad = 0
    for what, err, ok, measured, refused in CASES:
        why = driver.osc_btl_refusal(err, ok, measured)
        if bool(why) != refused:
            print("FAIL  upstream check: %s: %s" % (what, why or "accepted"))
            bad += 1
        else:
            print("ok    upstream check: %s: %s" % (what, why or "accepted"))
    return bad


OSC_4_RANKS = """\
# osc_bench put_lat: MPI_Put + MPI_Win_flush latency
# window=create sync=lock_all ranks=4 pairs=2 (rank i with rank i+2)
# each row: the mean over the 2 origins, each timed on its own; '# per-origin' lines: min, \
mean and max of them
# Size            Latency (us)
8                       129.40
# per-origin 8: min 126.5243 mean 129.3975 max 132.2707 (2 origins)
4096                    128.53
# per-origin 4096: min 124.8627 mean 128.5340 max 132.2053 (2 origins)
# btl_ofi pvars (sum over ranks): put_count=8 flush_count=14 error_count=0
"""


def check_rows():
    launch = driver.Launch("ours", "osc_bench", ["put_lat"], [8, 4096], [], "/nonexistent")
    for line in OSC_4_RANKS.splitlines():
        driver.parse_line(launch, line, lambda bench: None)
    res = launch.results.get("put_lat")
    want = {8: 129.40, 4096: 128.53}
    if not res or res["rows"] != want or not res["done"]:
        print("FAIL  rows of 4 ranks: %s" % res)
        return 1
    print("ok    rows of 4 ranks: %s" % res["rows"])
    return 0


BUSY_CAPPED = """\
# osc_bench busy_put_lat: MPI_Put + MPI_Win_flush latency, target computing outside MPI
# window=create sync=lock_all ranks=2
# Size            Latency (us)
# busy_put_lat 8: 2000 ops, median 1.100 us, 99th percentile 1.400 us, slowest 9.000 us
# busy_put_lat 8: target capped: it computed 5 s and stopped before the origin's flag arrived
# btl_ofi pvars: absent
"""


def check_capped():
    """A busy row whose target never saw the flag gives no number."""
    launch = driver.Launch("mpich", "osc_bench", ["busy_put_lat"], [8], [], "/nonexistent")
    for line in BUSY_CAPPED.splitlines():
        driver.parse_line(launch, line, lambda bench: None)
    res = launch.results.get("busy_put_lat")
    if not res or res["rows"] or res.get("capped") != {8} or not res["done"]:
        print("FAIL  capped busy target: %s" % res)
        return 1
    print("ok    capped busy target: no row, capped %s" % sorted(res["capped"]))
    return 0


busy_spec = importlib.util.spec_from_file_location("busy_hosts",
                                                   os.path.join(HERE, "busy_hosts.py"))
busy_hosts = importlib.util.module_from_spec(busy_spec)
busy_spec.loader.exec_module(busy_hosts)

BUSY_ROWS = """\
# busy_put_lat 8: 597 ops, median 151.573 us, 99th percentile 626.189 us, slowest 2279.326 us
# busy_put_lat target thread: looks 633 (timer 624, woken 9), late 6, nudges 4
# busy_fop_lat 8: 590 ops, median 150.120 us, 99th percentile 407.511 us, slowest 4198.629 us
# busy_fop_lat target thread: looks 652 (timer 641, woken 11), late 1, nudges 2
"""


def check_busy_hosts_rows():
    """busy_hosts.py takes each row's 99th percentile, not the thread's
    counters printed after it."""
    got = busy_hosts.read_p99(BUSY_ROWS)
    want = {"busy_put_lat": 626.189, "busy_fop_lat": 407.511}
    if got != want:
        print("FAIL  busy_hosts rows: %s, want %s" % (got, want))
        return 1
    print("ok    busy_hosts rows: %s" % got)
    return 0


def check_smoke_counts():
    """Which cells without a number fail a smoke run."""
    cases = [("ours", "capped", True), ("ours", "failed", True), ("raw", "timeout", True),
             ("sm", "capped", False), ("sm", "failed", True), ("upstream", "capped", False),
             ("upstream", "failed", False), ("mpich", "provider?", True),
             ("nothread", "capped", False)]
    bad = 0
    for impl, word, want in cases:
        got = driver.smoke_counts(impl, word)
        if got != want:
            print("FAIL  smoke counts %s %s: %s, want %s" % (impl, word, got, want))
            bad += 1
    if not bad:
        print("ok    smoke counts: %d cases" % len(cases))
    return bad


def check_iters():
    """--iters reaches every program as -i, in any mode; without it the
    mode's own counts (none: the programs' defaults, cut short by time)."""
    from types import SimpleNamespace

    def args_of(iters, quick=False, smoke=False):
        a = SimpleNamespace(smoke=smoke, full=False, quick=quick, rounds=None, sizes=None,
                            iters=iters, provider="shm", tests=None, many_to_one=False,
                            impls="ours")
        return driver.Bench(a).count_args()

    cases = [(args_of(20000), ["-i", "20000"]), (args_of(500, quick=True), ["-i", "500"]),
             (args_of(None, quick=True), []), (args_of(None, smoke=True), ["-i", "2", "-w", "1"]),
             (args_of(7, smoke=True), ["-i", "7", "-w", "1"])]
    bad = 0
    for got, want in cases:
        if got != want:
            print("FAIL  --iters: %s, want %s" % (got, want))
            bad += 1
    if not bad:
        print("ok    --iters: %d cases" % len(cases))
    return bad


def main():
    bad = (check_refusals() + check_rows() + check_capped() + check_busy_hosts_rows()
           + check_smoke_counts() + check_iters())
    print("%s: %d failure(s)" % (os.path.basename(sys.argv[0]), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
