#!/usr/bin/env python3
"""One-sided bandwidth over several NICs: contrib/bench --rails.

Two simulated hosts (contrib/hosts) with K NICs each, every NIC shaped by
tc tbf to RATE (default 1gbit), so that the link and not the CPU copying
into a veth is the bottleneck.  For each K, interleaved round by round:

  ours      our btl/ofi, one module per NIC, the first one striping puts
            and gets over all of them (btl_ofi_rails 0: every module)
  onerail   the same with btl_ofi_rails 1: one NIC carries the one-sided
            traffic, as before striping
  upstream  Open MPI's btl/ofi (contrib/mpirun --stock), ob1 over btl/tcp
  mpich     MPICH's ch4:ofi (contrib/setup --peers), when it is built

osc_bench put_bw and get_bw from 64 KiB to 16 MiB, 4 operations per flush
(-W 4: a 16 MiB window of 64 takes 9 s at 1 Gbit/s).  With 2 NICs also:
8-byte put/get/fetch-and-op latency and put rate, ours against onerail,
and ob1's two-sided bandwidth (p2p_bench bw) with 2 rails and with 1.

Writes samples.csv, summary.md and (with gnuplot) bandwidth.png to --out.
The ratio column is ours / (K x onerail at the same K): the target is 0.9
from 1 MiB on.
"""
import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOSTS = os.path.join(ROOT, "contrib", "hosts")
MPIRUN = os.path.join(ROOT, "contrib", "mpirun")
MPIEXEC = os.path.join(ROOT, "contrib", "mpiexec")
BUILD = os.environ.get("BTL_OFI_BUILD", os.path.join(ROOT, "build"))
MPICH_BUILD = os.path.join(ROOT, "build-mpich")


def parse_rows(text):
    """{test: {size: value}} from osc_bench / p2p_bench output."""
    rows, test = {}, None
    for line in text.splitlines():
        if line.startswith("# osc_bench ") or line.startswith("# p2p_bench "):
            test = line.split()[2].rstrip(":")
            rows.setdefault(test, {})
        elif test and line and not line.startswith("#"):
            parts = line.split()
            if len(parts) == 2:
                try:
                    rows[test][int(parts[0])] = float(parts[1])
                except ValueError:
                    pass
    return rows


class Runner:
    def __init__(self, args):
        self.args = args
        self.samples = []  # (nics, impl, test, size, round, value)
        self.log = open(os.path.join(args.out, "runs.log"), "w")

    def ompi(self, impl, nics, extra_mca):
        cmd = [MPIRUN] + (["--stock"] if impl == "upstream" else [])
        cmd += ["--hosts", "2", "--nics", str(nics), "-np", "2", "--mca", "pml", "ob1",
                "--mca", "osc", "rdma"]
        if impl == "upstream":
            cmd += ["--mca", "btl", "ofi,self,tcp",
                    "--mca", "opal_common_ofi_provider_include", self.args.provider]
        else:
            cmd += ["--mca", "btl", "ofi,self", "--mca", "btl_ofi_provider_include",
                    self.args.provider, "--mca", "btl_ofi_max_nics", str(nics)]
            if impl == "onerail":
                cmd += ["--mca", "btl_ofi_rails", "1"]
        return cmd + extra_mca

    def mpich(self):
        return [MPIEXEC, "--hosts", "2", "-n", "2", "-genv", "FI_PROVIDER", self.args.provider,
                "-genv", "MPIR_CVAR_NOLOCAL", "1"]

    def launch(self, impl, nics, program, prog_args, rnd):
        if impl == "mpich":
            exe = os.path.join(MPICH_BUILD, program)
            cmd = self.mpich() + [exe] + prog_args
        else:
            exe = os.path.join(BUILD, program)
            cmd = self.ompi(impl, nics, []) + [exe] + prog_args
        self.log.write("# K=%d %s round %d: %s\n" % (nics, impl, rnd, " ".join(cmd)))
        self.log.flush()
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=self.args.timeout)
            out = p.stdout
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) \
                else (e.stdout or "")
            out += "\n# timed out\n"
            subprocess.run([HOSTS, "reap"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        self.log.write(out + "\n")
        self.log.flush()
        for test, by_size in parse_rows(out).items():
            for size, value in by_size.items():
                self.samples.append((nics, impl, test, size, rnd, value))

    def impls_for(self, nics):
        impls = [i for i in self.args.impls if not (i == "onerail" and nics == 1)]
        if "mpich" in impls and not os.access(os.path.join(MPICH_BUILD, "osc_bench"), os.X_OK):
            impls.remove("mpich")
        return impls

    def run(self):
        bw_args = ["-t", "put_bw,get_bw", "-m", self.args.sizes, "-W", "4", "-i",
                   str(self.args.iters), "-w", "1"]
        for nics in self.args.nics:
            subprocess.run([HOSTS, "down"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            subprocess.run([HOSTS, "up", "2", "--nics", str(nics), "--rate", self.args.rate],
                           check=True, stdout=subprocess.DEVNULL)
            impls = self.impls_for(nics)
            for rnd in range(self.args.rounds):
                order = impls[rnd % len(impls):] + impls[:rnd % len(impls)]
                for impl in order if not self.args.no_bandwidth else []:
                    print("K=%d round %d: %s" % (nics, rnd + 1, impl), flush=True)
                    self.launch(impl, nics, "osc_bench", bw_args, rnd)
                if nics == 2 and not self.args.no_latency:
                    for impl in ("ours", "onerail"):
                        self.launch(impl, nics, "osc_bench",
                                    ["-t", "put_lat,get_lat,fop_lat,put_rate", "-m", "8:8"], rnd)
                        self.launch(impl, nics, "p2p_bench",
                                    ["-t", "bw", "-m", "65536,1048576,4194304"], rnd)
        subprocess.run([HOSTS, "down"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def median(self, nics, impl, test, size):
        v = [s[5] for s in self.samples
             if s[0] == nics and s[1] == impl and s[2] == test and s[3] == size]
        return statistics.median(v) if v else None

    def write(self):
        with open(os.path.join(self.args.out, "samples.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["nics", "impl", "test", "size", "round", "value"])
            w.writerows(self.samples)
        sizes = sorted({s[3] for s in self.samples if s[2] in ("put_bw", "get_bw")})
        if self.args.no_bandwidth:
            sizes = []
        fmt = lambda v: "n/a" if v is None else ("%.1f" % v if v >= 10 else "%.2f" % v)
        L = ["# One-sided bandwidth over K NICs of %s each (%s)" % (self.args.rate,
                                                                  self.args.provider), "",
             "`%s`, %d rounds, medians in MB/s; ratio = ours / (K x onerail)." % (
                 " ".join(sys.argv), self.args.rounds), ""]
        for test in ("put_bw", "get_bw") if sizes else ():
            for nics in self.args.nics:
                impls = self.impls_for(nics)
                L.append("## %s, K = %d" % (test, nics))
                L.append("")
                L.append("| size | " + " | ".join(impls) + (" | ratio |" if nics > 1 else " |"))
                L.append("|--:|" + "--:|" * len(impls) + ("--:|" if nics > 1 else ""))
                for size in sizes:
                    vals = [self.median(nics, i, test, size) for i in impls]
                    row = "| %s | " % size + " | ".join(fmt(v) for v in vals)
                    if nics > 1:
                        o, one = self.median(nics, "ours", test, size), \
                            self.median(nics, "onerail", test, size)
                        row += " | " + ("n/a" if o is None or not one else
                                         "%.2f" % (o / (nics * one)))
                    L.append(row + " |")
                L.append("")
        if any(s[2] in ("put_lat", "bw") for s in self.samples):
            L.append("## K = 2: small operations and two-sided traffic, 2 rails against 1")
            L.append("")
            L.append("| test | size | ours (2 rails) | onerail | ours / onerail |")
            L.append("|--|--:|--:|--:|--:|")
            for test in ("put_lat", "get_lat", "fop_lat", "put_rate", "bw"):
                for size in sorted({s[3] for s in self.samples if s[2] == test}):
                    o, one = self.median(2, "ours", test, size), \
                        self.median(2, "onerail", test, size)
                    L.append("| %s | %d | %s | %s | %s |" % (
                        test, size, fmt(o), fmt(one),
                        "n/a" if o is None or not one else "%.3f" % (o / one)))
            L.append("")
        with open(os.path.join(self.args.out, "summary.md"), "w") as f:
            f.write("\n".join(L) + "\n")
        print("\n".join(L))
        self.plot(sizes)

    def plot(self, sizes):
        if not shutil.which("gnuplot") or not sizes:
            return
        data = os.path.join(self.args.out, "put_bw.dat")
        plots = []
        with open(data, "w") as f:
            for nics in self.args.nics:
                for impl in ("ours", "onerail"):
                    rows = [(size, self.median(nics, impl, "put_bw", size)) for size in sizes]
                    rows = [r for r in rows if r[1] is not None]
                    if not rows:
                        continue
                    f.write("# K=%d %s\n" % (nics, impl))
                    f.writelines("%d %f\n" % r for r in rows)
                    f.write("\n\n")
                    plots.append("'%s' index %d with linespoints title '%s, %d NIC%s'" % (
                        data, len(plots), impl, nics, "s" if nics > 1 else ""))
        script = ("set terminal png size 900,600 noenhanced; set output '%s'; "
                  "set logscale x 2; set format x '%%.0b %%BB'; "
                  "set xlabel 'bytes'; set ylabel 'MB/s'; set key left top; "
                  "set title 'MPI_Put bandwidth across 2 hosts, NICs of %s'; plot %s" % (
                      os.path.join(self.args.out, "bandwidth.png"), self.args.rate,
                      ", ".join(plots)))
        subprocess.run(["gnuplot", "-e", script], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--provider", default="tcp;ofi_rxm")
    ap.add_argument("--nics", default="1,2,4")
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="65536,262144,1048576,4194304,16777216")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--impls", default="ours,onerail,upstream,mpich")
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument("--no-bandwidth", action="store_true")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--out", default=None)
    ap.add_argument("--from-csv", metavar="CSV",
                    help="write summary.md and the plot from an earlier run's samples.csv")
    args = ap.parse_args()
    args.nics = [int(n) for n in args.nics.split(",")]
    args.impls = args.impls.split(",")
    if args.out is None:
        args.out = os.path.join(ROOT, "bench-out", "rails-" + time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(args.out, exist_ok=True)
    r = Runner(args)
    if args.from_csv:
        with open(args.from_csv) as f:
            for row in csv.DictReader(f):
                r.samples.append((int(row["nics"]), row["impl"], row["test"], int(row["size"]),
                                  int(row["round"]), float(row["value"])))
    else:
        r.run()
    r.write()


if __name__ == "__main__":
    main()
