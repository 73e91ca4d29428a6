#!/usr/bin/env python3
"""Sort AddressSanitizer, LeakSanitizer, UBSan and valgrind reports into
ours (btl/ofi is to blame) and everybody else's.

  scan_sanitizer.py asan|valgrind FILE...

A report is split into stacks: the stack of the error itself and the stacks
of the memory it is about ("allocated by", "freed by", "alloc'd at",
"Uninitialised value was created by").  A stack is reduced to its first
frame that is not an allocator or an interceptor (malloc, free, memcpy,
opal_free_list_grow_st, ...).  The report is ours when that frame of the
error stack, or of any memory stack, is in btl/ofi (mca_btl_ofi.so or a
btl_ofi_*.c file); for UBSan, when the "file:line: runtime error" is in a
btl_ofi_*.c file.  A memory error in libfabric or Open MPI that merely has
btl/ofi further down its stack is not ours.

Prints one summary line, then every report of ours (first 40 lines each).
Exit status 1 when there is one.
"""

import re
import sys

OURS = re.compile(r"btl_ofi")
ASAN_START = re.compile(r"^==\d+==ERROR: (AddressSanitizer|LeakSanitizer)")
LEAK_START = re.compile(r"^(Direct|Indirect) leak of ")
UBSAN = re.compile(r"^(\S+):\d+:\d+: runtime error:")
VG_LINE = re.compile(r"^==\d+== ?(.*)$")
VG_SKIP = re.compile(r"^(Memcheck|Copyright|Using Valgrind|Command:|Parent PID|HEAP SUMMARY|"
                     r"LEAK SUMMARY|ERROR SUMMARY|For lists of|For counts of|Rerun with|"
                     r"in use at exit|total heap usage|All heap blocks|To see them|"
                     r"definitely lost:|indirectly lost:|possibly lost:|still reachable:|"
                     r"suppressed:|Searching for pointers|Reachable blocks|checked |"
                     r"Warning: )")
ASAN_FRAME = re.compile(r"^\s+#\d+ 0x[0-9a-f]+ (?:in (\S+) )?(.*)$")
VG_FRAME = re.compile(r"^\s*(?:at|by) 0x[0-9A-F]+: (\S+) (.*)$")
# frames that only move or hand out memory: skipped when blaming
PLUMBING = re.compile(r"(^|_)(malloc|calloc|realloc|free|memalign|posix_memalign|aligned_alloc|"
                      r"valloc|strdup|strndup|memcpy|memmove|memset|memcmp|strlen|strcpy|"
                      r"__interceptor_\w+|__asan_\w+|operator|opal_malloc|opal_free|"
                      r"opal_obj_new\w*|opal_free_list_grow_st|opal_free_list_init|"
                      r"mca_mpool_default_alloc|mca_mpool_\w+_alloc|_int_malloc)($|[^a-z])")
MEMORY_HEADER = re.compile(r"(allocated by thread|freed by thread|previously allocated|"
                           r"alloc'd|free'd|was created by|Block was alloc'd)")


def split_stacks(lines, frame_re):
    """Stacks of a report: the first, then one per memory header."""
    stacks, current = [], []
    for line in lines:
        if MEMORY_HEADER.search(line):
            stacks.append(current)
            current = []
            continue
        m = frame_re.match(line)
        if m:
            current.append(((m.group(1) or "?"), line))
    stacks.append(current)
    return stacks


def blamed_frame(stack):
    for function, line in stack:
        if not PLUMBING.search(function):
            return line
    return None


def report_is_ours(kind, lines, frame_re):
    """The frame (or UBSan line) that makes the report ours, or None."""
    if kind == "ubsan":
        m = UBSAN.match(lines[0])
        return lines[0] if m and OURS.search(m.group(1)) else None
    for stack in split_stacks(lines, frame_re):
        frame = blamed_frame(stack)
        if frame and OURS.search(frame):
            return frame
    return None


def asan_reports(text):
    reports, current = [], None
    for line in text.splitlines():
        starts = None
        if ASAN_START.search(line):
            starts = "leak-header" if "LeakSanitizer" in line else "asan"
        elif LEAK_START.search(line):
            starts = "leak"
        elif UBSAN.match(line):
            starts = "ubsan"
        if starts:
            if current:
                reports.append(current)
            current = [starts, line]
            continue
        if current is not None:
            if line.startswith("SUMMARY:"):
                reports.append(current)
                current = None
                continue
            current.append(line)
    if current:
        reports.append(current)
    return [r for r in reports if r[0] != "leak-header"]


def valgrind_reports(text):
    blocks, block = [], []
    for line in text.splitlines():
        m = VG_LINE.match(line)
        if not m:
            continue
        body = m.group(1)
        if body.strip() == "":
            if block:
                blocks.append(block)
            block = []
            continue
        block.append(body)
    if block:
        blocks.append(block)
    errors = []
    for block in blocks:
        head = block[0].strip()
        if head.startswith("Thread ") and len(block) > 1:
            block = block[1:]
            head = block[0].strip()
        if VG_SKIP.match(head):
            continue
        kind = "leak" if " lost in loss record " in head else "error"
        errors.append([kind] + block)
    return errors


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("asan", "valgrind"):
        print(__doc__)
        return 2
    mode = sys.argv[1]
    frame_re = ASAN_FRAME if mode == "asan" else VG_FRAME
    total, ours, mentions = 0, [], 0
    kinds = {}
    for path in sys.argv[2:]:
        try:
            with open(path, errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        reports = asan_reports(text) if mode == "asan" else valgrind_reports(text)
        for report in reports:
            total += 1
            kinds[report[0]] = kinds.get(report[0], 0) + 1
            blamed = report_is_ours(report[0], report[1:], frame_re)
            if blamed:
                ours.append((path, report, blamed))
            elif any(OURS.search(line) for line in report[1:]):
                mentions += 1
    detail = " ".join("%s=%d" % (k, v) for k, v in sorted(kinds.items()))
    print("reports=%d ours=%d elsewhere_with_btl_ofi_on_the_stack=%d (%s)" % (
        total, len(ours), mentions, detail or "none"))
    for path, report, blamed in ours:
        print("---- %s report in %s, blamed on: %s ----" % (report[0], path, blamed.strip()))
        for line in report[1:41]:
            print(line)
    return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main())
