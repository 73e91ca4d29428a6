#!/usr/bin/env python3
"""Check README.md and docs/*.md against the code and the benchmark runs.

  check_docs.py SRCDIR        (the component as built at $BTL_OFI_BUILD,
                               default SRCDIR/build)

Fails (exit 1) when
- a benchmark block is missing: README.md needs `<!-- headline:P:begin
  from=RUN -->` ... `<!-- headline:P:end -->` and docs/performance.md
  `<!-- full:P:... -->` for P in shm, sockets and tcp;ofi_rxm;
- a table between markers does not parse, or differs from what
  `bench/headline.py` writes from the run its marker names (then run
  `python3 bench/headline.py --write README.md docs/performance.md`);
- README.md or a document names a `btl_ofi_*` MCA parameter that
  `ompi_info --param btl ofi --level 9` (run through contrib/env, so with
  this build of the component) does not list;
- a parameter ompi_info lists is missing from README.md's MCA table;
- ompi_info cannot be run, or lists no btl/ofi parameter: that part fails
  with the reason, it is never skipped.

Not parameters, so not checked against ompi_info: the MPI_T variables
(`btl_ofi_*_count`, `btl_ofi_*_bytes`, `btl_ofi_nic_*`), file names
(`btl_ofi_context.c`) and C names (`mca_btl_ofi_*`).
"""

import glob
import os
import re
import subprocess
import sys

# a btl_ofi_ name not inside a longer identifier, not a file name
NAME_RE = re.compile(r"(?<![A-Za-z0-9_])btl_ofi_[a-z0-9_]*[a-z0-9](?![A-Za-z0-9_]|\.[ch]\b|\.txt\b)")
PROVIDERS = ["shm", "sockets", "tcp;ofi_rxm"]


def is_pvar(name):
    return name.endswith("_count") or name.endswith("_bytes") or name.startswith("btl_ofi_nic_")


def documents(src):
    return [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))


def check_tables(src):
    sys.path.insert(0, os.path.join(src, "bench"))
    import headline  # noqa: E402
    readme = os.path.join(src, "README.md")
    perf = os.path.join(src, "docs", "performance.md")
    need = {readme: [("headline", p) for p in PROVIDERS],
            perf: [("full", p) for p in PROVIDERS]}
    return headline.check([readme, perf], need)


def ompi_info_params(src, build):
    """The parameter names ompi_info lists for btl/ofi, or raise
    RuntimeError saying why there are none."""
    so = os.path.join(build, "mca_btl_ofi.so")
    if not os.path.isfile(so):
        raise RuntimeError("no %s: build the component first (contrib/setup --component-only)" % so)
    env = dict(os.environ, BTL_OFI_BUILD=build)
    cmd = 'eval "$("%s/contrib/env")" && ompi_info --param btl ofi --level 9 --parsable' % src
    try:
        p = subprocess.run(["bash", "-c", cmd], env=env, capture_output=True, text=True,
                           timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError("ompi_info through contrib/env could not run: %s" % e)
    if p.returncode != 0:
        raise RuntimeError("ompi_info through contrib/env failed (exit %d): %s" % (
            p.returncode, (p.stderr or p.stdout).strip()[-500:]))
    names = set(re.findall(r"^mca:btl:ofi:param:(btl_ofi_[a-z0-9_]+):", p.stdout, re.M))
    if not names:
        raise RuntimeError("ompi_info listed no btl_ofi_* parameter (is our component on "
                           "the component path? output: %s)" % p.stdout.strip()[-300:])
    return names


def readme_mca_table(text):
    """The names in the first column of README's '## MCA parameters' table."""
    m = re.search(r"^## MCA parameters\n(.*?)(?=^## )", text, re.S | re.M)
    if not m:
        return None
    names = set()
    for line in m.group(1).split("\n"):
        if line.startswith("|") and line.count("|") >= 3:
            first = line.split("|")[1]
            names.update(n for n in NAME_RE.findall(first) if not is_pvar(n))
    return names


def check_params(src, build):
    problems = []
    try:
        listed = ompi_info_params(src, build)
    except RuntimeError as e:
        return ["MCA parameters: " + str(e)], 0
    for doc in documents(src):
        with open(doc) as f:
            for n, line in enumerate(f, 1):
                for name in NAME_RE.findall(line):
                    if not is_pvar(name) and name not in listed:
                        problems.append("%s:%d: %s is not a parameter ompi_info lists" % (
                            os.path.relpath(doc, src), n, name))
    with open(os.path.join(src, "README.md")) as f:
        table = readme_mca_table(f.read())
    if table is None:
        problems.append("README.md: no '## MCA parameters' section")
    else:
        for name in sorted(listed - table):
            problems.append("README.md: %s (ompi_info lists it) is missing from the MCA "
                            "parameters table" % name)
    return problems, len(listed)


def main(argv):
    if len(argv) != 1:
        print(__doc__)
        return 2
    src = os.path.abspath(argv[0])
    build = os.environ.get("BTL_OFI_BUILD") or os.path.join(src, "build")
    problems = check_tables(src)
    print("benchmark tables: %s" % ("ok" if not problems else "%d problem(s)" % len(problems)))
    pp, count = check_params(src, build)
    print("MCA parameters: %d listed by ompi_info, %s" % (
        count, "every one in README's table, none unknown named" if not pp
        else "%d problem(s)" % len(pp)))
    problems += pp
    for p in problems:
        print("FAIL: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
