#!/usr/bin/env python3
"""The progress thread's A/B table: ours (thread on, the default) against ours
with the thread off, on an idle machine and under a competing load, from
two contrib/bench runs of the same provider (the second with --load).

  progress_ab.py IDLE_DIR LOAD_DIR                print the table
  progress_ab.py IDLE_DIR LOAD_DIR --write FILE   replace the block between
      <!-- progress-ab:PROVIDER:begin ... --> and <!-- progress-ab:PROVIDER:end -->
  ... --summary FILE   also the one-line verdict between
      <!-- progress-summary:PROVIDER:begin ... --> and <!-- progress-summary:PROVIDER:end -->
  ... --second-label WORDS   name the second run otherwise than "load" (a run
      with more ranks than CPUs, judged as the loaded one is)
  progress_ab.py --front FILE DIR                 one row per provider of DIR's
      P-idle/P-load pairs between <!-- progress-front:begin ... --> and
      <!-- progress-front:end --> (README's table)

Each cell is the median over the rounds with its range.  The ratio is
paired: every round launches ours and thread-off one after the other, so a
row's ratio is the median of the rounds' own ours/off, with a confidence
interval of at least 90 % for that median (order statistics, no model of
the noise): these VMs change speed between launches by 2-3x, and a ratio
of two medians taken over different rounds mixes those speeds.  A verdict
says whether the row meets the targets of docs/performance.md: idle within
0.97-1.03, under load at least thread-off's bandwidth and rate and at most
its latency.  A ratio that misses while its interval still reaches the
target reads "within noise"; "misses" only when the whole interval is past
it.  With upstream in the runs, its median follows, and the summary
counts the rows where ours is at or ahead of it (paired, the same way).
"""

import argparse
import csv
import math
import os
import re
import statistics
import sys
import textwrap

from doc_blocks import replace_block

HIGHER_IS_BETTER = ("MB/s", "msg/s", "Mmsg/s", "ops/s")


def read_samples(run_dir):
    """{(benchmark, size): {impl: {round: value}}} and {(benchmark, size): unit}."""
    values, units = {}, {}
    with open(os.path.join(run_dir, "samples.csv"), newline="") as f:
        for row in csv.DictReader(f):
            if row["status"] != "ok" or not row["value"]:
                continue
            key = (row["benchmark"], int(row["size"]))
            units[key] = row["unit"]
            by_round = values.setdefault(key, {}).setdefault(row["impl"], {})
            by_round[int(row["round"])] = float(row["value"])
    return values, units


def median_interval(xs, coverage=0.90):
    """The narrowest pair of order statistics (x[k], x[n-1-k]) that holds the
    median of what @p xs were drawn from with at least @p coverage: a round
    falls on either side of it with probability 1/2 whatever the noise, so
    the median is below x[k] with probability P(Binomial(n, 1/2) <= k).
    Too few rounds for that coverage give the whole range."""
    xs = sorted(xs)
    n = len(xs)
    k, tail = 0, 0.0
    while 2 * (k + 1) < n:
        tail += math.comb(n, k) / 2.0 ** n
        if 1.0 - 2.0 * (tail + math.comb(n, k + 1) / 2.0 ** n) < coverage:
            break
        k += 1
    return xs[k], xs[n - 1 - k]


def paired(a, b):
    """ours/other per round where both have a number: (median, low, high, n),
    or None without a common round."""
    ratios = [a[r] / b[r] for r in sorted(a) if r in b and b[r] > 0]
    if not ratios:
        return None
    low, high = median_interval(ratios)
    return statistics.median(ratios), low, high, len(ratios)


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


def cell(by_round):
    vals = list(by_round.values())
    return "%s (%s-%s)" % (fmt(statistics.median(vals)), fmt(min(vals)), fmt(max(vals)))


def on_target(ratio, higher_better, idle):
    if idle:
        return 0.97 <= ratio <= 1.03
    return ratio >= 1.0 if higher_better else ratio <= 1.0


def verdict(ratio, higher_better, idle):
    """Whether a row with the paired @p ratio (median, low, high, n) meets
    its target: 'within noise' when the median misses but its interval
    reaches the target, 'misses' when the whole interval is past it."""
    if on_target(ratio[0], higher_better, idle):
        return "meets"
    low, high = ratio[1], ratio[2]
    if idle:
        reaches = low <= 1.03 and high >= 0.97
    else:
        reaches = high >= 1.0 if higher_better else low <= 1.0
    return "within noise" if reaches else "misses"


def ratio_cell(ratio):
    return "%.2f (%.2f-%.2f)" % ratio[:3]


def size_word(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return "%d MiB" % (n >> 20)
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return "%d KiB" % (n >> 10)
    return "%d B" % n


def table(idle_dir, load_dir, tally, second=None):
    """The table's lines; @p tally gets {condition: [meets, within noise,
    misses, worst (ratio, row)]}; @p second names the second run."""
    second = second or "load"
    idle, units = read_samples(idle_dir)
    load, _ = read_samples(load_dir)
    upstream = any("upstream" in v for v in idle.values())
    head = ["row", "size", "unit", "idle: ours", "idle: off", "ours/off, paired", "idle",
            second + ": ours", second + ": off", "ours/off, paired", second]
    if upstream:
        head += ["idle: upstream", second + ": upstream"]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("--:" if i > 2 else "--" for i in range(len(head))) + "|"]
    for key in idle:
        unit = units[key]
        better = unit in HIGHER_IS_BETTER
        row = [key[0], size_word(key[1]), unit]
        for run in (idle, load):
            got = run.get(key, {})
            if "ours" in got and "nothread" not in got:
                # busy_*: the target computes, thread-off has no number
                row += [cell(got["ours"]), "n/a", "-", "thread only"]
                continue
            ratio = paired(got["ours"], got["nothread"]) if "ours" in got and "nothread" in got \
                else None
            if ratio is None:
                row += ["-", "-", "-", "no data"]
                continue
            word = verdict(ratio, better, run is idle)
            row += [cell(got["ours"]), cell(got["nothread"]), ratio_cell(ratio), word]
            cond = "idle" if run is idle else "load"
            name = "%s %s" % (key[0], size_word(key[1]))
            count_row(tally, cond, word, ratio, better, name)
            if "upstream" in got:
                count_upstream(tally, cond, got, better, name)
        if upstream:
            row += [fmt(statistics.median(r[key]["upstream"].values()))
                    if key in r and "upstream" in r[key] else "-" for r in (idle, load)]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def count_row(tally, cond, word, ratio, better, name):
    t = tally.setdefault(cond, {"meets": 0, "within noise": 0, "misses": 0, "worst": None})
    t[word] += 1
    # how far the row's paired median is on the wrong side of thread-off
    cost = 1.0 / ratio[0] if better else ratio[0]
    if t["worst"] is None or cost > t["worst"][0]:
        t["worst"] = (cost, "%s %s" % (name, ratio_cell(ratio)))


def count_upstream(tally, cond, got, better, name):
    """count_row's tally against upstream: at or ahead (paired median),
    within the interval, or behind, and the worst row."""
    ratio = paired(got["ours"], got["upstream"])
    if ratio is not None:
        count_row(tally, "upstream " + cond, verdict(ratio, better, False), ratio, better, name)


def summary_line(provider, tally, second=None):
    second = second or "under load"
    words = []
    for cond, what in (("idle", "idle (ours/off within 0.97-1.03)"),
                       ("load", second + " (ours at least as good as off)")):
        t = tally.get(cond)
        if not t:
            continue
        rows = t["meets"] + t["within noise"] + t["misses"]
        words.append("%s: %d of %d rows meet the target, %d more within their interval, "
                     "%d miss; least favourable paired ours/off: %s" % (
                         what, t["meets"], rows, t["within noise"], t["misses"], t["worst"][1]))
        u = tally.get("upstream " + cond)
        if u:
            words.append("against upstream %s: %d of %d rows at or ahead, %d more within "
                         "their interval, %d behind (least favourable paired ours/upstream: "
                         "%s)" % (cond == "idle" and "idle" or second, u["meets"],
                                  u["meets"] + u["within noise"] + u["misses"],
                                  u["within noise"], u["misses"], u["worst"][1]))
    return textwrap.fill("- `%s`: " % provider + "; ".join(words) + ".", width=90,
                         subsequent_indent="  ", break_on_hyphens=False)


def write_block(path, provider, idle_dir, load_dir, lines, kind="progress-ab"):
    with open(path) as f:
        text = f.read()
    begin = re.compile(r"<!-- %s:%s:begin[^>]*-->" % (kind, re.escape(provider)))
    end = "<!-- %s:%s:end -->" % (kind, provider)
    m = begin.search(text)
    if not m or end not in text[m.end():]:
        sys.exit("%s has no %s block for %s" % (path, kind, provider))
    stop = text.index(end, m.end())
    marker = "<!-- %s:%s:begin from=%s,%s -->" % (
        kind, provider, os.path.relpath(idle_dir), os.path.relpath(load_dir))
    text = text[:m.start()] + marker + "\n" + "\n".join(lines) + "\n" + text[stop:]
    with open(path, "w") as f:
        f.write(text)


def front_rows(run_dir):
    """README's table: per provider of @p run_dir, how many rows meet their
    target idle and under load, and the least favourable idle row."""
    lines = ["| provider | idle, within 0.97-1.03 of thread-off: meet / within noise / miss "
             "| under load, at least thread-off: meet / within noise / miss "
             "| least favourable idle row (paired ours/off) |",
             "|--|--:|--:|--|"]
    for name in sorted(os.listdir(run_dir)):
        if not name.endswith("-idle"):
            continue
        idle = os.path.join(run_dir, name)
        load = os.path.join(run_dir, name[:-len("idle")] + "load")
        if not os.path.isdir(load):
            continue
        tally = {}
        table(idle, load, tally)
        words = []
        for cond in ("idle", "load"):
            t = tally[cond]
            words.append("%d / %d / %d" % (t["meets"], t["within noise"], t["misses"]))
        lines.append("| `%s` | %s | %s | %s |" % (provider_of(idle), words[0], words[1],
                                                   tally["idle"]["worst"][1]))
    return lines


def write_front(path, run_dir):
    replace_block(path, "progress-front", os.path.relpath(run_dir), front_rows(run_dir))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--front":
        write_front(sys.argv[2], sys.argv[3])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("idle")
    ap.add_argument("load")
    ap.add_argument("--write", metavar="FILE")
    ap.add_argument("--summary", metavar="FILE")
    ap.add_argument("--second-label", metavar="WORDS")
    args = ap.parse_args()
    tally = {}
    lines = table(args.idle, args.load, tally, args.second_label)
    provider = provider_of(args.idle)
    summary = summary_line(provider, tally, args.second_label)
    if args.write:
        write_block(args.write, provider, args.idle, args.load, lines)
    else:
        print("\n".join(lines))
    if args.summary:
        write_block(args.summary, provider, args.idle, args.load, [summary],
                    kind="progress-summary")
    else:
        print("\n" + summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
