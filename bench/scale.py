#!/usr/bin/env python3
"""contrib/bench --scale: how the cost of one-sided traffic grows with ranks.

Runs bench/scale_put (every rank puts 8 bytes to every other rank and
flushes, --iters rounds) at each --nps count on this one machine
(oversubscribed), through each implementation, interleaved round by round:

  ours      our btl/ofi on --provider (default tcp;ofi_rxm), osc/rdma
  nothread  the same with btl_ofi_progress_thread off
  tcp       Open MPI's btl/tcp with osc/rdma
  mpich     MPICH's ch4:ofi on the same provider (contrib/setup --peers)

and prints, per np and implementation, the median time of the put phase
(the slowest rank's) with its range, and the first round's apart (it
carries the connections made on first use).  Every run checks the values
that landed; ours must show its puts in our MPI_T counter.
contrib/bench builds the programs and sets the environment; run that.
"""

import argparse
import csv
import os
import re
import statistics
import subprocess
import sys

from bench_paths import BUILD, MPICH_BUILD, MPICH_SKIP, MPIEXEC, MPIRUN
from doc_blocks import replace_block
IMPLS = ("ours", "nothread", "tcp", "mpich")
OURS = ("ours", "nothread")
LINE_RE = re.compile(r"^scale_put np=(\d+) rounds=(\d+) first_s=(\S+) rest_s=(\S+) "
                     r"total_s=(\S+) check=(\S+) ofi_puts=(-?\d+)")


def launch_cmd(impl, provider, np, iters):
    args = ["-r", str(iters)]
    if impl == "mpich":
        return [MPIEXEC, "-n", str(np), "-genv", "FI_PROVIDER", provider,
                "-genv", "MPIR_CVAR_NOLOCAL", "1",
                os.path.join(MPICH_BUILD, "scale_put")] + args
    cmd = [MPIRUN, "-np", str(np), "--oversubscribe", "--mca", "pml", "ob1",
           "--mca", "osc", "rdma"]
    if impl in OURS:
        cmd += ["--mca", "btl", "ofi,self", "--mca", "btl_ofi_provider_include", provider]
        if impl == "nothread":
            cmd += ["--mca", "btl_ofi_progress_thread", "off"]
    else:
        cmd += ["--mca", "btl", "tcp,self"]
    return cmd + [os.path.join(BUILD, "scale_put")] + args


def run_one(impl, np, args):
    cmd = launch_cmd(impl, args.provider, np, args.iters)
    try:
        out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, timeout=args.timeout, check=False,
                             universal_newlines=True, errors="replace").stdout
    except subprocess.TimeoutExpired:
        return None, "timeout after %d s" % args.timeout
    for line in out.splitlines():
        m = LINE_RE.match(line)
        if not m:
            continue
        if m.group(6) != "ok":
            return None, "wrong values landed"
        expected = np * (np - 1) * args.iters
        if impl in OURS and int(m.group(7)) < expected:
            return None, "our MPI_T counter shows %s puts of %d" % (m.group(7), expected)
        return {"first": float(m.group(3)), "rest": float(m.group(4)),
                "total": float(m.group(5))}, ""
    tail = " | ".join(out.strip().splitlines()[-3:])
    return None, "failed: " + tail[:300]


def spread(values):
    return statistics.median(values), min(values), max(values)


def report(impls, nps, samples, problems, skipped, lines):
    rows = []

    def out(line):
        lines.append(line)
        print(line)

    print()
    out("| np | implementation | put phase (s) | range | first round (s) | / mpich |")
    out("|---:|---|---:|---|---:|---:|")
    for np in nps:
        peer = samples.get(("mpich", np)) or []
        peer_t = statistics.median(r["total"] for r in peer) if peer else None
        for impl in impls:
            got = samples[(impl, np)]
            if not got:
                out("| %d | %s | %s | | | |" % (np, impl, problems.get((impl, np), "n/a")))
                continue
            t, lo, hi = spread([r["total"] for r in got])
            first = statistics.median(r["first"] for r in got)
            ratio = "%.2f" % (t / peer_t) if peer_t else "n/a"
            rows.append([np, impl, "%.4f" % t, "%.4f" % lo, "%.4f" % hi, "%.4f" % first, len(got)])
            out("| %d | %s | %.4f | %.4f-%.4f | %.4f | %s |" % (np, impl, t, lo, hi, first, ratio))
    for impl, why in skipped.items():
        out("")
        out("%s: %s" % (impl, why))
    return rows


def write_block(path, out_dir, lines):
    """Replaces what lies between <!-- scale:begin ... --> and <!-- scale:end -->."""
    replace_block(path, "scale", os.path.relpath(out_dir or "."), lines)


def table_from_csv(path):
    """The lines report() printed, rebuilt from the scale.csv it wrote."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    peer = {r["np"]: float(r["median_s"]) for r in rows if r["impl"] == "mpich"}
    lines = ["| np | implementation | put phase (s) | range | first round (s) | / mpich |",
             "|---:|---|---:|---|---:|---:|"]
    for r in rows:
        t = float(r["median_s"])
        ratio = "%.2f" % (t / peer[r["np"]]) if peer.get(r["np"]) else "n/a"
        lines.append("| %s | %s | %s | %s-%s | %s | %s |" % (
            r["np"], r["impl"], r["median_s"], r["min_s"], r["max_s"], r["first_round_s"], ratio))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--provider", default="tcp;ofi_rxm")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20, help="put rounds inside one launch")
    ap.add_argument("--nps", default="8,16,32")
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--out", default="")
    ap.add_argument("--write", metavar="FILE",
                    help="put the table between FILE's <!-- scale:begin/end --> markers")
    ap.add_argument("--from-csv", metavar="CSV",
                    help="run nothing: the table from a scale.csv this script wrote "
                         "(with --write, the block names the CSV's directory)")
    args = ap.parse_args()
    if args.from_csv:
        lines = table_from_csv(args.from_csv)
        print("\n".join(lines))
        if args.write:
            write_block(args.write, os.path.dirname(args.from_csv), lines)
        return 0

    nps = [int(n) for n in args.nps.split(",") if n]
    impls = [i for i in args.impls.split(",") if i]
    bad = [i for i in impls if i not in IMPLS]
    if bad or "ours" not in impls:
        sys.exit("--impls takes ours and any of %s (got %s)" % (" ".join(IMPLS), args.impls))
    skipped = {}
    if MPICH_SKIP and "mpich" in impls:
        impls.remove("mpich")
        skipped["mpich"] = MPICH_SKIP
    print("scale: provider %s, np %s, %d rounds of %d put rounds, impls %s"
          % (args.provider, args.nps, args.rounds, args.iters, ",".join(impls)), flush=True)
    samples = {(i, n): [] for i in impls for n in nps}
    problems = {}
    for rnd in range(args.rounds):
        for np in nps:
            for impl in impls:
                res, why = run_one(impl, np, args)
                if res is None:
                    problems[(impl, np)] = why
                    print("  round %d np %d %s: %s" % (rnd + 1, np, impl, why), flush=True)
                    continue
                samples[(impl, np)].append(res)
                print("  round %d np %d %s: %.4f s (first round %.4f s)"
                      % (rnd + 1, np, impl, res["total"], res["first"]), flush=True)
    lines = []
    rows = report(impls, nps, samples, problems, skipped, lines)
    if args.write:
        write_block(args.write, args.out, lines)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "scale.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["np", "impl", "median_s", "min_s", "max_s", "first_round_s", "n"])
            w.writerows(rows)
    return 1 if any(not samples[("ours", n)] for n in nps) else 0


if __name__ == "__main__":
    sys.exit(main())
