#!/usr/bin/env python3
"""Check the component's file layout from its object files.

  check_layout.py OBJDIR SRCDIR

Fails (exit 1) when
- two of the component's files call each other in a loop: file A uses a
  symbol file B defines, and B (directly or through others) uses one of A's;
- there is not exactly one thread-local variable among the objects (the
  context index every file must share);
- a component source does not open with a comment saying what it owns, or
  a file the design names is missing.

Symbols come from `nm`: defined (T, D, B, R...) and undefined (U) names.
"""

import os
import subprocess
import sys

DESIGNED = [
    "btl_ofi_component.c",
    "btl_ofi_module.c",
    "btl_ofi_endpoint.c",
    "btl_ofi_context.c",
    "btl_ofi_rdma.c",
    "btl_ofi_atomics.c",
    "btl_ofi_frag.c",
    "btl_ofi_validate.c",
    "btl_ofi_progress.c",
    "btl_ofi_copy.c",
]


def symbols(obj):
    out = subprocess.run(["nm", obj], check=True, capture_output=True, text=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRVW":
            defined.add(parts[2])
    return defined, used


def tls_symbols(obj):
    out = subprocess.run(["readelf", "-sW", obj], check=True, capture_output=True,
                         text=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(parts) >= 8 and parts[3] == "TLS" and parts[6] != "UND":
            found.append(parts[7])
    return found


def find_cycle(graph):
    """A list of nodes forming a cycle, or None."""
    state = {}
    stack = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def opens_with_comment(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    # after the license block, the first thing that is not a blank line is
    # a comment of our own
    body = text.split("$HEADER$", 1)[-1].split("*/", 1)[-1].lstrip()
    return body.startswith("/*")


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    objdir, srcdir = sys.argv[1], sys.argv[2]
    failures = []

    for name in DESIGNED:
        if not os.path.exists(os.path.join(srcdir, name)):
            failures.append(f"missing designed file {name}")
    sources = sorted(f for f in os.listdir(srcdir)
                     if f.startswith("btl_ofi") and f.endswith(".c"))
    for name in sources:
        if not opens_with_comment(os.path.join(srcdir, name)):
            failures.append(f"{name} does not open with a comment saying what it owns")

    objs = {}
    for name in sources:
        obj = os.path.join(objdir, name[:-2] + ".o")
        if not os.path.exists(obj):
            failures.append(f"no object {obj}")
            continue
        objs[name[:-2]] = obj
    defined_by = {}
    uses = {}
    tls = []
    for unit, obj in objs.items():
        defined, used = symbols(obj)
        for sym in defined:
            defined_by[sym] = unit
        uses[unit] = used
        tls += [(unit, sym) for sym in tls_symbols(obj)]

    graph = {unit: set() for unit in objs}
    for unit, used in uses.items():
        for sym in used:
            owner = defined_by.get(sym)
            # a global variable (the component structure) is data, not a call
            if owner and owner != unit and not sym.endswith("_component"):
                graph[unit].add(owner)
    cycle = find_cycle(graph)
    if cycle:
        failures.append("call circle: " + " -> ".join(cycle))
    if len(tls) != 1:
        failures.append(f"expected one thread-local variable, found {len(tls)}: {tls}")

    for unit in sorted(graph):
        print(f"  {unit} -> {', '.join(sorted(graph[unit])) or '(nothing)'}")
    for f in failures:
        print(f"FAIL: {f}")
    if not failures:
        print(f"layout ok: {len(objs)} files, no call circle, one thread-local index")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
