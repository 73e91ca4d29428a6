#!/usr/bin/env python3
"""Check the registrations of win_realloc's windows in a fi_fault MR trace.

Input: the merged output of `win_realloc` run under the fi_fault shim with
BTL_OFI_FAULT_TRACE=mr.  Per rank, in order:
  fi_fault[rank R pid P]: mr_reg mr=M buf=B len=L access=0x.. (FLAGS) key=K
  fi_fault[rank R pid P]: mr_close mr=M buf=B len=L rc=0
  WINMARK rank=R iter=I buf=B bytes=N event=created|winfreed|freed

For every window the region covering its buffer is identified.  When a
window's buffer sits at the address of the previous iteration's buffer,
the registration is "fresh" when it is a different region from the
previous one and the previous one was closed before this window was
created, and "reused" when the previous region serves again.  A fresh
registration's predecessor was closed either by MPI_Win_free itself
("at_win_free": before the winfreed marker) or later, when free() gave
the memory back and the memory hooks invalidated the cached region
("after_unmap").

  check_mr_trace.py LOG --expect fresh|any

--expect fresh: fail unless every same-address window got a fresh
registration (the buffer was unmapped in between, so the memory hooks
must have invalidated the old one).  Prints one summary line.
"""

import argparse
import re
import sys
from collections import defaultdict

SHIM = re.compile(r"fi_fault\[rank (-?\d+) pid \d+\]: (mr_reg|mr_close) mr=(0x[0-9a-f]+|\(nil\)) "
                  r"buf=(0x[0-9a-f]+|\(nil\)) len=(\d+)(?: access=(0x[0-9a-f]+) \(([^)]*)\))?")
MARK = re.compile(r"WINMARK rank=(\d+) iter=(\d+) buf=(0x[0-9a-f]+) bytes=(\d+) event=(\w+)")


def addr(text):
    return 0 if text == "(nil)" else int(text, 16)


def parse(path):
    events = defaultdict(list)
    with open(path, errors="replace") as log:
        for line in log:
            m = SHIM.search(line)
            if m:
                rank, kind, mr, buf, length, _, flags = m.groups()
                events[int(rank)].append((kind, addr(mr), addr(buf), int(length), flags or ""))
                continue
            m = MARK.search(line)
            if m:
                rank, it, buf, nbytes, what = m.groups()
                events[int(rank)].append(("mark-" + what, int(it), addr(buf), int(nbytes), ""))
    return events


def check_rank(events):
    active = {}        # mr -> (buf, len, serial, flags)
    closed = set()     # serials of closed regions
    closed_late = set()  # serials closed after a winfreed marker
    after_winfree = False
    serial = 0
    windows = []       # (iter, buf, serial of covering region, closed serials at creation)
    flags_seen = set()
    for kind, a, buf, length, flags in events:
        if kind == "mr_reg":
            serial += 1
            active[a] = (buf, length, serial, flags)
        elif kind == "mr_close":
            if a in active:
                region_serial = active.pop(a)[2]
                closed.add(region_serial)
                if after_winfree:
                    closed_late.add(region_serial)
        elif kind == "mark-winfreed":
            after_winfree = True
        elif kind == "mark-created":
            after_winfree = False
            cover = [v for v in active.values() if v[0] <= buf and buf + length <= v[0] + v[1]]
            if not cover:
                windows.append((a, buf, None, set(closed)))
                continue
            region = max(cover, key=lambda v: v[2])  # the newest covering region
            flags_seen.add(region[3])
            windows.append((a, buf, region[2], set(closed)))
    same = fresh = reused = uncovered = late = 0
    for prev, cur in zip(windows, windows[1:]):
        if cur[2] is None:
            uncovered += 1
            continue
        if prev[1] != cur[1] or prev[2] is None:
            continue
        same += 1
        if cur[2] != prev[2] and prev[2] in cur[3]:
            fresh += 1
            late += prev[2] in closed_late
        elif cur[2] == prev[2]:
            reused += 1
    return {"windows": len(windows), "same_address": same, "fresh": fresh, "reused": reused,
            "uncovered": uncovered, "after_unmap": late, "flags": sorted(flags_seen)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("log")
    parser.add_argument("--expect", choices=["fresh", "any"], default="any")
    args = parser.parse_args()
    per_rank = parse(args.log)
    ok = bool(per_rank)
    totals = defaultdict(int)
    flags = set()
    for rank in sorted(per_rank):
        r = check_rank(per_rank[rank])
        for key in ("windows", "same_address", "fresh", "reused", "uncovered", "after_unmap"):
            totals[key] += r[key]
        flags.update(r["flags"])
        if r["uncovered"]:
            ok = False
        if args.expect == "fresh" and r["fresh"] != r["same_address"]:
            ok = False
    if args.expect == "fresh" and totals["same_address"] == 0:
        ok = False
    print("windows=%d same_address=%d fresh=%d (old closed after unmap: %d, at MPI_Win_free: %d) "
          "reused=%d uncovered=%d window_access=%s" % (
              totals["windows"], totals["same_address"], totals["fresh"], totals["after_unmap"],
              totals["fresh"] - totals["after_unmap"], totals["reused"], totals["uncovered"],
              "+".join(flags) if flags else "?"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
