#!/usr/bin/env python3
"""The computing-target rows across 2 simulated hosts (contrib/bench --busy-hosts).

One rank on each of 2 simulated hosts (contrib/hosts); the target computes
outside MPI while the origin times 8-byte puts, gets and fetch-and-ops one
by one (osc_bench -t busy_put_lat,busy_get_lat,busy_fop_lat): the 99th
percentile of each, per launch.  The layouts, interleaved round by round:

  shared    the hosts share every CPU (contrib/hosts as the test lanes use
            it): the origin's rank, in another session and so another
            scheduling group, competes with the target's progress thread
  own       each host on a CPU of its own (BTL_OFI_HOST_CPUS=own), as two
            machines are
  own_rt    the same with btl_ofi_progress_rt_priority 1 (SCHED_RR)

and, on request (--layouts), shared_nonudge and own_nonudge: the same
without the progress thread's nudges (btl_ofi_progress_nudge_us 0).

Prints a table of the medians over the rounds of each launch's p99 (and
their range), in microseconds, and writes it with the raw lines under
--out.  Each launch also gives the time the VM's hypervisor took from
the CPUs meanwhile (steal, /proc/stat): on the 2-vCPU VMs here the
launches with a row above 1 ms are mostly those with the most of it.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BTL_OFI_BUILD", os.path.join(ROOT, "build"))
TESTS = ["busy_put_lat", "busy_get_lat", "busy_fop_lat"]
LAYOUTS = {
    "shared": ({}, []),
    "own": ({"BTL_OFI_HOST_CPUS": "own"}, []),
    "own_rt": ({"BTL_OFI_HOST_CPUS": "own"}, ["--mca", "btl_ofi_progress_rt_priority", "1"]),
    "shared_nonudge": ({}, ["--mca", "btl_ofi_progress_nudge_us", "0"]),
    "own_nonudge": ({"BTL_OFI_HOST_CPUS": "own"}, ["--mca", "btl_ofi_progress_nudge_us", "0"]),
}
DEFAULT_LAYOUTS = ("shared", "own", "own_rt")


def launch(provider, layout):
    env_extra, mca = LAYOUTS[layout]
    env = dict(os.environ, **env_extra)
    cmd = [os.path.join(ROOT, "contrib", "mpirun"), "--hosts", "2", "-np", "2",
           "--mca", "pml", "ob1", "--mca", "btl", "ofi,self", "--mca", "osc", "rdma",
           "--mca", "btl_ofi_provider_include", provider] + mca + \
          [os.path.join(BUILD, "osc_bench"), "-t", ",".join(TESTS), "-m", "8:8"]
    try:
        out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, timeout=180, text=True,
                             errors="replace").stdout
    except subprocess.TimeoutExpired:
        return {}, "timeout\n"
    return read_p99(out), out


def read_p99(out):
    """Each busy row's 99th percentile in osc_bench's output (the
    target-thread lines that follow the rows are not rows)."""
    p99 = {}
    for line in out.splitlines():
        # "# busy_put_lat 8: 750 ops, median 136.1 us, 99th percentile 210.1 us, ..."
        words = line.split()
        if len(words) > 11 and words[0] == "#" and words[1] in TESTS and words[4] == "ops,":
            p99[words[1]] = float(words[10])
    return p99


def steal_ms():
    """The time this VM's hypervisor took from every CPU so far (/proc/stat),
    in ms; None where the kernel does not say."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) * 1000 // os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--provider", default="tcp;ofi_rxm")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--layouts", default=",".join(DEFAULT_LAYOUTS),
                    help="of %s" % ", ".join(LAYOUTS))
    ap.add_argument("--out", default=os.path.join(
        ROOT, "bench-out", "busy-hosts-" + time.strftime("%Y%m%d-%H%M%S")))
    args = ap.parse_args()
    layouts = args.layouts.split(",")
    for name in layouts:
        if name not in LAYOUTS:
            ap.error("unknown layout %s (%s)" % (name, ", ".join(LAYOUTS)))
    os.makedirs(args.out, exist_ok=True)
    results = {(lay, t): [] for lay in layouts for t in TESTS}
    with open(os.path.join(args.out, "raw.txt"), "w") as raw:
        for r in range(args.rounds):
            for lay in layouts:
                before = steal_ms()
                p99, out = launch(args.provider, lay)
                after = steal_ms()
                stolen = "%d ms" % (after - before) if None not in (before, after) else "-"
                raw.write("=== round %d layout %s steal %s\n%s" % (r + 1, lay, stolen, out))
                raw.flush()
                for t in TESTS:
                    if t in p99:
                        results[(lay, t)].append(p99[t])
                print("round %d %-14s %s  (steal %s)" % (r + 1, lay, "  ".join(
                    "%s %s" % (t[5:8], "%.0f" % p99[t] if t in p99 else "-") for t in TESTS),
                    stolen), flush=True)
    lines = ["`contrib/bench --busy-hosts --provider '%s' --rounds %d`, %s: 99th percentile of "
             "8-byte operations at a computing target, 2 simulated hosts, one rank each, us "
             "(median of the launches, [lowest-highest])" % (args.provider, args.rounds,
                                                           time.strftime("%Y-%m-%d")), "",
             "| layout | " + " | ".join(TESTS) + " |", "|--|" + "--:|" * len(TESTS)]
    for lay in layouts:
        cells = []
        for t in TESTS:
            v = results[(lay, t)]
            cells.append("%.0f [%.0f-%.0f]" % (statistics.median(v), min(v), max(v)) if v else "-")
        lines.append("| %s | %s |" % (lay, " | ".join(cells)))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(text)
    print("\n" + text + "\n(raw output: %s)" % os.path.join(args.out, "raw.txt"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
