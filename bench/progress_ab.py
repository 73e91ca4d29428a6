#!/usr/bin/env python3
"""The progress thread's A/B table: ours (thread on, the default) against ours
with the thread off, on an idle machine and under a competing load, from
two contrib/bench runs of the same provider (the second with --load).

  progress_ab.py IDLE_DIR LOAD_DIR                print the table
  progress_ab.py IDLE_DIR LOAD_DIR --write FILE   replace the block between
      <!-- progress-ab:PROVIDER:begin ... --> and <!-- progress-ab:PROVIDER:end -->

Each cell is the median over the rounds with its range; the ratio is
ours/off, and a verdict says whether the row meets docs/design.md's
targets: idle within 0.97-1.03, under load at least thread-off's bandwidth
and rate and at most its latency (a ratio past the target by less than the
two ranges' overlap allows reads "within noise").  With upstream in the
runs, its median follows.
"""

import argparse
import csv
import os
import re
import statistics
import sys

HIGHER_IS_BETTER = ("MB/s", "msg/s", "Mmsg/s", "ops/s")


def read_samples(run_dir):
    """{(benchmark, size): {impl: [values]}} and {(benchmark, size): unit}."""
    values, units = {}, {}
    with open(os.path.join(run_dir, "samples.csv"), newline="") as f:
        for row in csv.DictReader(f):
            if row["status"] != "ok" or not row["value"]:
                continue
            key = (row["benchmark"], int(row["size"]))
            units[key] = row["unit"]
            values.setdefault(key, {}).setdefault(row["impl"], []).append(float(row["value"]))
    return values, units


def provider_of(run_dir):
    with open(os.path.join(run_dir, "summary.md")) as f:
        for line in f:
            m = re.search(r"provider `([^`]+)`", line)
            if m:
                return m.group(1)
    return os.path.basename(os.path.normpath(run_dir))


def fmt(v):
    if v >= 1000:
        return "%.0f" % v
    if v >= 10:
        return "%.1f" % v
    return "%.2f" % v


def cell(vals):
    return "%s (%s-%s)" % (fmt(statistics.median(vals)), fmt(min(vals)), fmt(max(vals)))


def verdict(ours, off, higher_better, idle):
    """Whether a row meets its target; 'within noise' when it misses it
    by less than the runs' own spread."""
    ratio = statistics.median(ours) / statistics.median(off)
    if idle:
        ok = 0.97 <= ratio <= 1.03
    else:
        ok = ratio >= 1.0 if higher_better else ratio <= 1.0
    if ok:
        return ratio, "meets"
    overlap = min(max(ours), max(off)) >= max(min(ours), min(off))
    return ratio, "within noise" if overlap else "misses"


def size_word(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return "%d MiB" % (n >> 20)
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return "%d KiB" % (n >> 10)
    return "%d B" % n


def table(idle_dir, load_dir):
    idle, units = read_samples(idle_dir)
    load, _ = read_samples(load_dir)
    upstream = any("upstream" in v for v in idle.values())
    head = ["row", "size", "unit", "idle: ours", "idle: off", "ours/off", "idle",
            "load: ours", "load: off", "ours/off", "load"]
    if upstream:
        head += ["idle: upstream", "load: upstream"]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("--:" if i > 2 else "--" for i in range(len(head))) + "|"]
    for key in idle:
        unit = units[key]
        better = unit in HIGHER_IS_BETTER
        row = [key[0], size_word(key[1]), unit]
        for run in (idle, load):
            got = run.get(key, {})
            if "ours" not in got or "nothread" not in got:
                row += ["-", "-", "-", "no data"]
                continue
            ratio, word = verdict(got["ours"], got["nothread"], better, run is idle)
            row += [cell(got["ours"]), cell(got["nothread"]), "%.2f" % ratio, word]
        if upstream:
            row += [fmt(statistics.median(r[key]["upstream"]))
                    if key in r and "upstream" in r[key] else "-" for r in (idle, load)]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def write_block(path, provider, idle_dir, load_dir, lines):
    with open(path) as f:
        text = f.read()
    begin = re.compile(r"<!-- progress-ab:%s:begin[^>]*-->" % re.escape(provider))
    end = "<!-- progress-ab:%s:end -->" % provider
    m = begin.search(text)
    if not m or end not in text[m.end():]:
        sys.exit("%s has no progress-ab block for %s" % (path, provider))
    stop = text.index(end, m.end())
    marker = "<!-- progress-ab:%s:begin from=%s,%s -->" % (
        provider, os.path.relpath(idle_dir), os.path.relpath(load_dir))
    text = text[:m.start()] + marker + "\n" + "\n".join(lines) + "\n" + text[stop:]
    with open(path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("idle")
    ap.add_argument("load")
    ap.add_argument("--write", metavar="FILE")
    args = ap.parse_args()
    lines = table(args.idle, args.load)
    provider = provider_of(args.idle)
    if args.write:
        write_block(args.write, provider, args.idle, args.load, lines)
    else:
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
