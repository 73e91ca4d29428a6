#!/usr/bin/env python3
"""contrib/bench --tax: what progress costs a computing rank.

Runs bench/compute_tax (fixed work, no MPI call inside, ranks bound one per
core, np = cores) through each implementation, interleaved round by round,
in three modes:

  compute_tax        no window: a job that only computes and sends
  compute_tax_win    an MPI_Win_create window and an MPI_Win_lock_all epoch
  compute_tax_idle   the window, np 2: rank 1 computes alone while rank 0
                     sleeps (it only tests a barrier every 100 us)
  compute_tax_serve  the same, but rank 0 aims an 8-byte put and a flush at
                     computing rank 1 every 100 us

and prints the median compute time of each, its ratio to ours with the
progress thread off in the same mode (for serve: in the idle mode, the
undisturbed computation; the 2 vCPUs here behave like SMT siblings, so a
rank computes about twice as fast while the other idles), the puts served
while rank 1 computed, and our progress thread's looks per second of
computation (MPI_T).
contrib/bench builds the programs and sets the environment; run that.

  tax.py --from-csv DIR [--write FILE]
      run nothing: one table from the compute_tax.csv files of DIR (one per
      provider, named after it: tcp_ofi_rxm.csv), ours against thread off;
      with --write, between FILE's <!-- tax:begin from=DIR --> and
      <!-- tax:end --> markers
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

# (name, what it is)
IMPLS = (("ours", "ours, progress thread default"),
         ("nothread", "ours, btl_ofi_progress_thread off"),
         ("nonudge", "ours, btl_ofi_progress_nudge_us 0"),
         ("sm", "btl/sm + osc/rdma"),
         ("upstream", "upstream btl/ofi"),
         ("mpich", "MPICH ch4:ofi"),
         ("mpich_async", "MPICH ch4:ofi, MPIR_CVAR_ASYNC_PROGRESS=1"))
OURS = ("ours", "nothread", "nonudge")
MODES = (("compute_tax", []),
         ("compute_tax_win", ["-w"]),
         ("compute_tax_idle", ["-i"]),
         ("compute_tax_serve", ["-s", "100"]))
TAX_RE = re.compile(r"^TAX window=\d+ serve=\S+ ranks=(\d+) median_s=(\S+) max_s=(\S+) "
                    r"served=(\d+)(?: threads_ms=(\S+))?")
PVARS_RE = re.compile(r"^PVARS rank=(\d+) .* look=(-?\d+) ")


def launch_cmd(impl, provider, np, args):
    prog = os.path.join(BUILD, "compute_tax")
    if impl.startswith("mpich"):
        cmd = [MPIEXEC, "-n", str(np), "-bind-to", "core",
               "-genv", "FI_PROVIDER", provider, "-genv", "MPIR_CVAR_NOLOCAL", "1"]
        if impl == "mpich_async":
            cmd += ["-genv", "MPIR_CVAR_ASYNC_PROGRESS", "1"]
            args = args + ["-m"]
        return cmd + [os.path.join(MPICH_BUILD, "compute_tax")] + args
    cmd = [MPIRUN] + (["--stock"] if impl in ("sm", "upstream") else [])
    cmd += ["-np", str(np), "--bind-to", "core", "--mca", "pml", "ob1", "--mca", "osc", "rdma"]
    if impl in OURS:
        cmd += ["--mca", "btl", "ofi,self", "--mca", "btl_ofi_provider_include", provider]
        if impl == "nothread":
            cmd += ["--mca", "btl_ofi_progress_thread", "off"]
        elif impl == "nonudge":
            cmd += ["--mca", "btl_ofi_progress_nudge_us", "0"]
    elif impl == "sm":
        cmd += ["--mca", "btl", "sm,self"]
    else:
        cmd += ["--mca", "btl", "ofi,sm,self",
                "--mca", "opal_common_ofi_provider_include", provider]
    return cmd + [prog] + args


def run_one(impl, mode_args, args):
    np = 2 if "-s" in mode_args or "-i" in mode_args else args.np
    cmd = launch_cmd(impl, args.provider, np, mode_args + ["-n", str(args.work)])
    try:
        out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, timeout=args.timeout, check=False,
                             universal_newlines=True, errors="replace").stdout
    except subprocess.TimeoutExpired:
        return None, "timeout"
    result, looks = None, []
    for line in out.splitlines():
        m = TAX_RE.match(line)
        if m:
            result = {"median": float(m.group(2)), "served": int(m.group(4)),
                      "threads_ms": float(m.group(5)) if m.group(5) else None}
        m = PVARS_RE.match(line)
        if m and int(m.group(2)) >= 0:
            looks.append(int(m.group(2)))
    if result is None:
        tail = " | ".join(out.strip().splitlines()[-3:])
        return None, "failed: " + tail[:300]
    result["looks"] = max(looks) if looks else None
    if impl in OURS and result["looks"] is None:
        # no counter of ours: another BTL carried the job
        return None, "failed: our btl/ofi's MPI_T counters are missing"
    return result, ""


def provider_of(csv_name):
    """tcp_ofi_rxm.csv -> tcp;ofi_rxm (the names contrib/bench gives them)."""
    return os.path.splitext(csv_name)[0].replace("_ofi_", ";ofi_")


def table_from_csvs(directory):
    """One row per provider and mode: ours (thread on) against ours with the
    thread off, from the compute_tax.csv files of DIRECTORY."""
    lines = ["| provider | mode | ours (s) | / thread off | looks/s | thread CPU | served "
             "| thread off (s) |",
             "|---|---|--:|--:|--:|--:|--:|--:|"]
    names = sorted(n for n in os.listdir(directory) if n.endswith(".csv"))
    for name in names:
        with open(os.path.join(directory, name), newline="") as f:
            rows = {(r["benchmark"], r["impl"]): r for r in csv.DictReader(f)}
        for mode, _ in MODES:
            ours, off = rows.get((mode, "ours")), rows.get((mode, "nothread"))
            if not ours:
                continue
            lines.append("| `%s` | %s | %s | %s | %s | %s %% | %s | %s |" % (
                provider_of(name), mode, ours["median_s"], ours["ratio_to_thread_off"],
                ours["looks_per_s"], ours["threads_cpu_pct"], ours["served"],
                off["median_s"] if off else "n/a"))
    return lines


def write_block(path, directory, lines):
    """Replaces what lies between <!-- tax:begin ... --> and <!-- tax:end -->."""
    replace_block(path, "tax", os.path.relpath(directory), lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--provider", default="tcp;ofi_rxm")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--work", type=int, default=4000,
                    help="units of compute_tax work (about 0.3 ms each here)")
    ap.add_argument("--np", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--impls", default="ours,nothread,sm,upstream,mpich,mpich_async")
    ap.add_argument("--modes", default=",".join(m for m, _ in MODES),
                    help="which of the modes to run (default: all)")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--out", default="")
    ap.add_argument("--from-csv", metavar="DIR",
                    help="run nothing: the table from DIR/*.csv (see above)")
    ap.add_argument("--write", metavar="FILE",
                    help="with --from-csv: put the table between FILE's tax markers")
    args = ap.parse_args()
    if args.from_csv:
        lines = table_from_csvs(args.from_csv)
        print("\n".join(lines))
        if args.write:
            write_block(args.write, args.from_csv, lines)
        return 0

    modes = [(m, a) for m, a in MODES if m in args.modes.split(",")]
    if not modes:
        sys.exit("--modes takes any of %s" % " ".join(m for m, _ in MODES))
    impls = [i for i in args.impls.split(",") if i]
    known = [name for name, _ in IMPLS]
    bad = [i for i in impls if i not in known]
    if bad or "ours" not in impls or "nothread" not in impls:
        sys.exit("--impls takes ours, nothread and any of %s (got %s)" % (" ".join(known),
                                                                         args.impls))
    skipped = {}
    if MPICH_SKIP:
        for i in ("mpich", "mpich_async"):
            if i in impls:
                impls.remove(i)
                skipped[i] = MPICH_SKIP
    print("compute tax: provider %s, np %d (idle, serve: 2), %d rounds, work %d, impls %s"
          % (args.provider, args.np, args.rounds, args.work, ",".join(impls)), flush=True)
    samples = {(i, m): [] for i in impls for m, _ in modes}
    problems = {}
    for rnd in range(args.rounds):
        for mode, mode_args in modes:
            for impl in impls:
                res, why = run_one(impl, mode_args, args)
                if res is None:
                    problems[(impl, mode)] = why
                    print("  round %d %s %s: %s" % (rnd + 1, mode, impl, why), flush=True)
                    continue
                samples[(impl, mode)].append(res)
                print("  round %d %s %s: %.4f s, served %d, looks %s, other threads %s ms"
                      % (rnd + 1, mode, impl, res["median"], res["served"], res["looks"],
                         res["threads_ms"]), flush=True)
    rows = report(impls, modes, samples, problems, skipped)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "compute_tax.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["benchmark", "impl", "median_s", "ratio_to_thread_off", "served",
                        "looks_per_s", "threads_cpu_pct", "n"])
            w.writerows(rows)
    failed = [k for k in (("ours", m) for m, _ in modes) if not samples[k]]
    return 1 if failed else 0


def report(impls, modes, samples, problems, skipped):
    rows = []
    print("\n| benchmark | implementation | compute (s) | / thread off | served | "
          "thread looks/s | other threads' CPU |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for mode, _ in modes:
        base_mode = "compute_tax_idle" if mode == "compute_tax_serve" else mode
        base = samples.get(("nothread", base_mode)) or []
        base_t = statistics.median(r["median"] for r in base) if base else None
        for impl in impls:
            got = samples[(impl, mode)]
            if not got:
                print("| %s | %s | %s | | | | |" % (mode, impl, problems.get((impl, mode), "n/a")))
                continue
            t = statistics.median(r["median"] for r in got)
            served = statistics.median(r["served"] for r in got)
            looks = [r["looks"] / r["median"] for r in got if r["looks"] is not None]
            rate = statistics.median(looks) if looks else None
            # the threads' CPU time as a share of the computation: what the
            # ratio measures, without the noise of the compute times
            shares = [100.0 * r["threads_ms"] / 1000.0 / r["median"] for r in got
                      if r["threads_ms"] is not None and r["threads_ms"] >= 0]
            share = statistics.median(shares) if shares else None
            ratio = t / base_t if base_t else None
            rows.append([mode, impl, "%.4f" % t, "%.4f" % ratio if ratio else "",
                         "%d" % served, "%.0f" % rate if rate is not None else "",
                         "%.3f" % share if share is not None else "", len(got)])
            print("| %s | %s | %.4f | %s | %s | %s | %s |"
                  % (mode, impl, t, "%.3f" % ratio if ratio else "n/a",
                     "%d" % served if mode == "compute_tax_serve" else "",
                     "%.0f" % rate if rate is not None else "",
                     "%.3f %%" % share if share is not None else ""))
    for impl, why in skipped.items():
        print("(%s: %s)" % (impl, why))
    return rows


if __name__ == "__main__":
    sys.exit(main())
