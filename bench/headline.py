#!/usr/bin/env python3
"""The benchmark tables of README.md and docs/performance.md, written from
contrib/bench runs (each run's medians.csv and summary.md).

  python3 bench/headline.py OUT/medians.csv
      print the headline table of one run (ours, upstream, MPICH, raw)
  python3 bench/headline.py --run OUT [--run OUT2 ...] --write README.md docs/performance.md
      replace the tables between the markers of those files with the tables
      of these runs (one run per provider: the provider is read from the
      run's summary.md), and draw each run's put_lat.png
  python3 bench/headline.py --write README.md docs/performance.md
      the same from the runs the markers already name (a refresh)
  python3 bench/headline.py --check README.md docs/performance.md
      exit 1 when a marker is missing or unpaired, a table between markers
      does not parse, or it differs from what its run's CSV gives

Markers (one pair per provider and kind; KIND is `headline` or `full`;
PROVIDER is the run's provider, with `@2hosts` for a run across 2 hosts):

  <!-- KIND:PROVIDER:begin from=RUN-DIR -->
  ... written by this script ...
  <!-- KIND:PROVIDER:end -->

`headline` blocks hold the rows below (ours / upstream / MPICH / raw at the
sizes every contrib/bench mode measures, so `contrib/bench --quick` output
works too) and the run's put latency plot; `full` blocks every row of the
run with every implementation it has.  Numbers are formatted as the run's
own summary.md formats them.
"""
import argparse
import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_driver import IMPLS, RATIOS, fmt_ratio, fmt_size, num_or_word  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KIB, MIB = 1 << 10, 1 << 20
# (benchmark, size): 8 B, 4 KiB and 1 MiB are what --quick measures, and
# --full measures them too
# (the full blocks of docs/performance.md hold every row)
ROWS = [("put_lat", 8), ("get_lat", 8), ("acc_lat", 8), ("fop_lat", 8), ("cas_lat", 8),
        ("put_rate", 8), ("put_bw", 4 * KIB), ("put_bw", 1 * MIB), ("get_bw", 1 * MIB),
        ("put_bibw", 1 * MIB), ("busy_put_lat", 8), ("busy_fop_lat", 8), ("pingpong", 8),
        ("p2p_bw", 1 * MIB), ("list_shared_lat", 8)]
# the headline's columns: ours against the three others a user can pick
HEAD_IMPLS = [("ours", "ours"), ("upstream", "upstream"), ("mpich", "MPICH"), ("raw", "raw")]
HEAD_RATIOS = [("ours_over_upstream", "ours/upstream"), ("ours_over_mpich", "ours/MPICH"),
               ("ours_over_raw", "ours/raw")]
HEADINGS = {"nothread": "thread off", "sm": "btl/sm", "mpich": "MPICH"}
KINDS = ("headline", "full")
# a marker is a line of its own
MARK_RE = re.compile(r"^<!-- (headline|full):(\S+):(begin|end)(?: from=(\S+))? -->$")
CELL_RE = re.compile(r"^(-?[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?( \(\d+/\d+\))?|-|n/a|refused|"
                     r"provider\?|timeout|failed|wrong|capped|missing)$")
# the plot each run gets: one line per implementation over the sizes
PLOT_BENCH = "put_lat"


class Error(Exception):
    pass


def number(text):
    """A CSV cell as a float, or None where it holds a word (n/a, refused)."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


class Run:
    """One contrib/bench output directory."""

    def __init__(self, path):
        self.path = os.path.normpath(path)
        csv_path = os.path.join(self.path, "medians.csv")
        summary = os.path.join(self.path, "summary.md")
        if not os.path.isfile(csv_path):
            raise Error("%s: no medians.csv (not a contrib/bench output directory)" % path)
        with open(csv_path, newline="") as f:
            self.rows = list(csv.DictReader(f))
        self.by_key = {(r["benchmark"], int(r["size"])): r for r in self.rows}
        self.provider, self.command, self.date, self.machine = "?", "", "", {}
        if os.path.isfile(summary):
            with open(summary) as f:
                text = f.read()
            m = re.search(r"provider `([^`]+)`", text)
            self.provider = m.group(1) if m else "?"
            m = re.search(r"^Command: `([^`]+)`", text, re.M)
            self.command = m.group(1) if m else ""
            m = re.search(r"^Date: ([^;]+);", text, re.M)
            self.date = m.group(1) if m else ""
            for k, v in re.findall(r"^\| (nproc|CPU|libfabric|Open MPI|MPICH) \| ([^|]+) \|",
                                   text, re.M):
                self.machine[k] = v.strip()
        if self.provider == "?":
            raise Error("%s: summary.md names no provider" % path)
        m = re.search(r"--hosts (\d+)", self.command)
        self.hosts = int(m.group(1)) if m else 0
        # what a marker names: the provider, and the hosts when more than one
        self.key = self.provider + ("@%dhosts" % self.hosts if self.hosts else "")

    def has(self, impl):
        return any(number(r.get(impl)) is not None for r in self.rows)

    def describe(self, dated=True):
        """The run in one sentence; without the date for README (whose dated
        lines are few: the run's README and summary.md give it)."""
        m = self.machine
        where = "across %d simulated hosts" % self.hosts if self.hosts else "one node"
        return ("`%s`, %s: `%s`, %s; %s CPUs (%s), libfabric %s, Open MPI %s%s." % (
            self.provider, where, self.command,
            (self.date or "undated") if dated else "date in its summary.md",
            m.get("nproc", "?"),
            m.get("CPU", "?"), m.get("libfabric", "?"), m.get("Open MPI", "?"),
            ", MPICH %s" % m["MPICH"] if "MPICH" in m else ""))

    def cell(self, r, impl):
        return num_or_word(number(r.get(impl)), r.get(impl) or "n/a")

    def headline(self):
        lines = ["| benchmark | size | unit | %s | %s |" % (
                     " | ".join(h for _, h in HEAD_IMPLS), " | ".join(h for _, h in HEAD_RATIOS)),
                 "|--|--:|--|%s" % ("--:|" * (len(HEAD_IMPLS) + len(HEAD_RATIOS)))]
        for bench, size in ROWS:
            r = self.by_key.get((bench, size))
            if not r:
                continue
            cells = [self.cell(r, k) for k, _ in HEAD_IMPLS]
            cells += [fmt_ratio(number(r.get(k))) for k, _ in HEAD_RATIOS]
            lines.append("| %s | %s | %s | %s |" % (bench, fmt_size(size), r["unit"],
                                                    " | ".join(cells)))
        return lines

    def full(self):
        impls = [i for i in IMPLS if self.has(i)]
        ratios = [(col, head) for col, _, other, head in RATIOS if other in impls]
        lines = ["| benchmark | size | unit | %s | %s |" % (
                     " | ".join(HEADINGS.get(i, i) for i in impls),
                     " | ".join(h for _, h in ratios)),
                 "|--|--:|--|%s" % ("--:|" * (len(impls) + len(ratios)))]
        for r in self.rows:
            cells = [self.cell(r, i) for i in impls]
            cells += [fmt_ratio(number(r.get(col))) for col, _ in ratios]
            lines.append("| %s | %s | %s | %s |" % (r["benchmark"], fmt_size(int(r["size"])),
                                                    r["unit"], " | ".join(cells)))
        return lines

    def plot_path(self):
        return os.path.join(self.path, PLOT_BENCH + ".png")

    def plot(self):
        """Draw PLOT_BENCH over the sizes with bench/plot.gp; False when
        gnuplot is missing or fails."""
        gnuplot = shutil.which("gnuplot")
        rows = [r for r in self.rows if r["benchmark"] == PLOT_BENCH and int(r["size"]) > 0]
        if not gnuplot or len(rows) < 2:
            return False
        impls = [i for i, _ in HEAD_IMPLS if any(number(r.get(i)) is not None for r in rows)]
        with tempfile.TemporaryDirectory() as tmp:
            data = os.path.join(tmp, "plot.dat")
            with open(data, "w") as f:
                f.write("size %s\n" % " ".join(impls))
                for r in rows:
                    f.write("%s %s\n" % (r["size"], " ".join(
                        "?" if number(r.get(i)) is None else r[i] for i in impls)))
            expr = ("datafile='%s'; outfile='%s'; ttl='%s'; ylab='latency (us)'; cols='%s'; "
                    "style='lines'" % (data, self.plot_path(), "%s + flush, provider %s%s" % (
                        PLOT_BENCH, self.provider, ", %d hosts" % self.hosts if self.hosts else ""),
                        " ".join(str(i + 2) for i in range(len(impls)))))
            p = subprocess.run([gnuplot, "-e", expr, os.path.join(ROOT, "bench", "plot.gp")],
                               capture_output=True, text=True, timeout=60)
        return p.returncode == 0 and os.path.exists(self.plot_path())


def shown(path, doc):
    """PATH as a link from document DOC."""
    return os.path.relpath(os.path.abspath(path), os.path.dirname(os.path.abspath(doc)))


def block(kind, run, doc):
    """The lines between a pair of markers (the markers excluded)."""
    src = os.path.relpath(run.path, ROOT)
    out = ["From `%s`: %s" % (src, run.describe(dated=kind != "headline")), ""]
    out += run.headline() if kind == "headline" else run.full()
    if kind == "headline" and os.path.exists(run.plot_path()):
        out += ["", "![%s, %s](%s)" % (PLOT_BENCH, run.provider, shown(run.plot_path(), doc))]
    return out


def parse_blocks(text, name):
    """[(kind, provider, from, begin line index, end line index)]; raises
    Error on unpaired or nested markers."""
    blocks, open_ = [], None
    for i, line in enumerate(text.split("\n")):
        m = MARK_RE.match(line.strip())
        if not m:
            if line.lstrip().startswith(("<!-- headline:", "<!-- full:")):
                raise Error("%s:%d: malformed marker: %s" % (name, i + 1, line.strip()))
            continue
        kind, prov, edge, src = m.groups()
        if edge == "begin":
            if open_:
                raise Error("%s:%d: %s:%s begins inside %s:%s" % (name, i + 1, kind, prov,
                                                                  open_[0], open_[1]))
            open_ = (kind, prov, src, i)
        else:
            if not open_ or open_[:2] != (kind, prov):
                raise Error("%s:%d: %s:%s ends without its begin" % (name, i + 1, kind, prov))
            blocks.append((kind, prov, open_[2], open_[3], i))
            open_ = None
    if open_:
        raise Error("%s: %s:%s has no end marker" % (name, open_[0], open_[1]))
    return blocks


def parse_table(lines, where):
    """The rows of the one Markdown table in LINES, checked: a header, a
    separator, every row with as many cells, every cell a number, a ratio
    or one of the driver's words."""
    rows = [l for l in lines if l.startswith("|")]
    if len(rows) < 3:
        raise Error("%s: no table (%d table lines)" % (where, len(rows)))
    split = [[c.strip() for c in l.strip().strip("|").split("|")] for l in rows]
    head, sep, body = split[0], split[1], split[2:]
    if head[:3] != ["benchmark", "size", "unit"] or "ours" not in head:
        raise Error("%s: header is not 'benchmark | size | unit | ours ...': %s" % (where, rows[0]))
    if len(sep) != len(head) or not all(re.match(r"^:?-+:?$", c) for c in sep):
        raise Error("%s: bad separator line: %s" % (where, rows[1]))
    for n, cells in enumerate(body):
        if len(cells) != len(head):
            raise Error("%s: row %d has %d cells, the header %d" % (where, n + 1, len(cells),
                                                                    len(head)))
        if not re.match(r"^\d+[KM]?$", cells[1]):
            raise Error("%s: row %d: size '%s'" % (where, n + 1, cells[1]))
        for c in cells[3:]:
            if not CELL_RE.match(c):
                raise Error("%s: row %d: cell '%s' is no number" % (where, n + 1, c))
    return head, body


def check(files, need, fresh=True):
    """Problems of FILES: NEED is {file: [(kind, provider)]} that must be
    there; every block must hold a table that parses and (FRESH) equals
    what its run gives."""
    problems = []
    for name in files:
        try:
            with open(name) as f:
                text = f.read()
            blocks = parse_blocks(text, name)
        except (OSError, Error) as e:
            problems.append(str(e))
            continue
        lines = text.split("\n")
        have = {(k, p) for k, p, _, _, _ in blocks}
        for k, p in need.get(name, []):
            if (k, p) not in have:
                problems.append("%s: no <!-- %s:%s:begin ... --> block" % (name, k, p))
        for kind, prov, src, b, e in blocks:
            where = "%s:%d (%s:%s)" % (name, b + 1, kind, prov)
            try:
                parse_table(lines[b + 1:e], where)
                if not src:
                    raise Error("%s: the begin marker names no from=RUN-DIR" % where)
                run = Run(os.path.join(ROOT, src))
                if run.key != prov:
                    raise Error("%s: %s is a run of %s" % (where, src, run.key))
                if fresh and lines[b + 1:e] != block(kind, run, name):
                    raise Error("%s: the table differs from %s/medians.csv: "
                                "run python3 bench/headline.py --write %s" % (where, src, name))
            except (OSError, Error) as ex:
                problems.append(str(ex))
    return problems


def write(files, runs, plots=True):
    """Replace the blocks of FILES: with RUNS (by provider) where given,
    else from the run each block names."""
    by_prov = {}
    for r in runs:
        if r.key in by_prov:
            raise Error("two runs of %s: %s and %s" % (r.key, by_prov[r.key].path, r.path))
        by_prov[r.key] = r
    drawn = set()
    for name in files:
        with open(name) as f:
            text = f.read()
        blocks = parse_blocks(text, name)
        if not blocks:
            raise Error("%s: no <!-- headline:PROVIDER:begin --> markers" % name)
        lines = text.split("\n")
        for kind, prov, src, b, e in reversed(blocks):
            run = by_prov.get(prov)
            if run is None:
                if runs and kind == "headline":
                    print("note: %s: no run of %s given, block left as it is" % (name, prov))
                    continue
                if not src:
                    raise Error("%s:%d: no run for %s:%s" % (name, b + 1, kind, prov))
                run = Run(os.path.join(ROOT, src))
            if plots and kind == "headline" and run.path not in drawn:
                drawn.add(run.path)
                if not run.plot():
                    print("note: no %s for %s (gnuplot missing or failed)" % (
                        os.path.basename(run.plot_path()), run.path))
            begin = "<!-- %s:%s:begin from=%s -->" % (kind, prov, os.path.relpath(run.path, ROOT))
            lines[b:e] = [begin] + block(kind, run, name)
        with open(name, "w") as f:
            f.write("\n".join(lines))
        print("wrote %s" % name)


def main(argv):
    if len(argv) == 1 and argv[0].endswith(".csv"):
        run = Run(os.path.dirname(argv[0]) or ".")
        print("\n".join(run.headline()))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", action="append", default=[],
                    help="a contrib/bench output directory (repeat: one per provider)")
    ap.add_argument("--write", nargs="+", metavar="FILE", help="files whose blocks to replace")
    ap.add_argument("--check", nargs="+", metavar="FILE", help="files whose blocks to check")
    ap.add_argument("--no-plots", action="store_true")
    args = ap.parse_args(argv)
    try:
        if args.write:
            write(args.write, [Run(p) for p in args.run], plots=not args.no_plots)
        elif args.check:
            problems = check(args.check, {})
            for p in problems:
                print(p)
            return 1 if problems else 0
        elif args.run:
            for p in args.run:
                print("\n".join(block("headline", Run(p), "README.md")))
        else:
            ap.error("give --run, --write or --check")
    except Error as e:
        print("headline.py: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
