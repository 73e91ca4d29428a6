#!/usr/bin/env python3
"""The share of launches with a busy row above 1 ms, by the VM's steal time
during the launch, over this directory's launches of the released code
(e7dab31: busy300-a, busy300-b, and the 'old' / 's100' halves of the A/B
files).  'steal=N' in the files is /proc/stat's steal field, in ticks of
10 ms, summed over both vCPUs.

    python3 steal_rates.py
"""
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = [("busy300-a.txt", None), ("busy300-b.txt", None),
           ("ab-disarm-late.txt", {"old"}), ("ab-disarm-always.txt", {"old"}),
           ("ab-slice.txt", {"s100"})]


def launches(name, conds):
    with open(os.path.join(HERE, name)) as f:
        text = f.read()
    for block in text.split("\n== "):
        m = re.match(r"(?:== )?\d+ (\S+) steal=(\d+)", block)
        p99 = [float(x) for x in re.findall(r"p99=([\d.]+)", block)]
        if m and p99 and (conds is None or m.group(1) in conds):
            yield int(m.group(2)) * 10, max(p99) > 1000


def main():
    all_ = [x for name, conds in SOURCES for x in launches(name, conds)]
    print("%d launches, %d with a row above 1 ms" % (len(all_), sum(b for _, b in all_)))
    for lo, hi in ((0, 20), (30, 50), (60, 100), (110, None)):
        bucket = [b for s, b in all_ if s >= lo and (hi is None or s <= hi)]
        print("steal %s ms: %d launches, %d above 1 ms (%.1f %%)" % (
            "%d-%d" % (lo, hi) if hi else "%d+" % lo, len(bucket), sum(bucket),
            100.0 * sum(bucket) / len(bucket)))


if __name__ == "__main__":
    main()
