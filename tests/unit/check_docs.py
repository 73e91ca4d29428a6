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
- docs/parameters.md, or README.md's block between `<!-- parameters:begin
  -->` and `<!-- parameters:end -->`, differs from what `contrib/params`
  writes from the parameter table in btl_ofi_params.c (then run
  `contrib/params --write`);
- the table and `ompi_info --param btl ofi --level 9` (run through
  contrib/env, so with this build of the component) disagree: a parameter
  one has and the other lacks, or another level, type or default;
- README.md or a document names a `btl_ofi_*` MCA parameter that ompi_info
  does not list;
- a relative link in README.md, docs/*.md or docs/bench/**/README.md names
  a file that does not exist, or a '#anchor' no heading of that file gives;
- README.md is past the front page's limits (250 lines, 400 characters a
  line, 3 lines carrying a date), or docs/*.md past 20 000 words;
- README.md's `<!-- progress-front:begin from=DIR -->` block is missing or
  differs from what `bench/progress_ab.py --front README.md DIR` writes, or
  a `<!-- progress-summary:P:begin from=IDLE,LOAD -->` block of
  docs/performance.md from what `bench/progress_ab.py IDLE LOAD --summary`
  writes;
- ompi_info cannot be run, or lists no btl/ofi parameter: that part fails
  with the reason, it is never skipped.

Not parameters, so not checked against ompi_info: the MPI_T variables
(`btl_ofi_*_count`, `btl_ofi_*_bytes`, `btl_ofi_nic_*`), file names
(`btl_ofi_context.c`) and C names (`mca_btl_ofi_*`).
"""

import glob
import importlib.machinery
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


def check_progress(src):
    """The progress thread's A/B: README's table and performance.md's
    summaries against the runs their markers name."""
    sys.path.insert(0, os.path.join(src, "bench"))
    import progress_ab  # noqa: E402
    from doc_blocks import read_blocks  # noqa: E402
    problems = []
    with open(os.path.join(src, "README.md")) as f:
        front = read_blocks(f.read(), "progress-front")
    if not front or not front[0][1]:
        problems.append("README.md: no <!-- progress-front:begin from=DIR --> block")
    elif front[0][2] != progress_ab.front_rows(os.path.join(src, front[0][1])):
        problems.append("README.md: the progress table differs from %s: run python3 "
                        "bench/progress_ab.py --front README.md %s" % (front[0][1], front[0][1]))
    with open(os.path.join(src, "docs", "performance.md")) as f:
        summaries = read_blocks(f.read(), "progress-summary:")
    if not summaries:
        problems.append("docs/performance.md: no progress-summary block")
    for name, source, lines in summaries:
        prov = name[len("progress-summary:"):]
        idle, _, load = source.partition(",")
        tally = {}
        progress_ab.table(os.path.join(src, idle), os.path.join(src, load), tally)
        if "\n".join(lines) != progress_ab.summary_line(prov, tally):
            problems.append("docs/performance.md: the %s progress summary differs from %s: run "
                            "python3 bench/progress_ab.py %s %s --summary docs/performance.md"
                            % (prov, source, idle, load))
    return problems


def ompi_info_params(src, build):
    """{name: {field: text}} of the parameters ompi_info lists for btl/ofi
    (fields level, type, value, source), or raise RuntimeError saying why
    there are none."""
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
    params = {}
    for m in re.finditer(r"^mca:btl:ofi:param:(btl_ofi_[a-z0-9_]+):(level|type|value|source):"
                         r"(.*)$", p.stdout, re.M):
        params.setdefault(m.group(1), {})[m.group(2)] = m.group(3)
    if not params:
        raise RuntimeError("ompi_info listed no btl_ofi_* parameter (is our component on "
                           "the component path? output: %s)" % p.stdout.strip()[-300:])
    return params


def params_tool(src):
    """contrib/params as a module: the table's reader, the documents' writer."""
    path = os.path.join(src, "contrib", "params")
    return importlib.machinery.SourceFileLoader("btl_ofi_params_tool", path).load_module()


def table_against_ompi_info(rows, listed):
    """Where the parameter table and what ompi_info lists disagree."""
    problems = []
    table = {r["name"]: r for r in rows}
    for name in sorted(set(listed) - set(table)):
        problems.append("btl_ofi_params.c: %s (ompi_info lists it) has no row" % name)
    for name in sorted(set(table) - set(listed)):
        problems.append("btl_ofi_params.c: %s has a row, ompi_info does not list it" % name)
    for name in sorted(set(table) & set(listed)):
        row, info = table[name], listed[name]
        for field, ours in (("level", row["level"]), ("type", row["type"])):
            if str(ours) != info.get(field):
                problems.append("btl_ofi_params.c: %s has %s %s, ompi_info says %s" % (
                    name, field, ours, info.get(field)))
        if (row["default"] is not None and info.get("source") == "default"
                and str(row["default"]) != info.get("value")):
            problems.append("btl_ofi_params.c: %s defaults to '%s', ompi_info says '%s'" % (
                name, row["default"], info.get("value")))
    return problems


def check_params(src, build):
    try:
        tool = params_tool(src)
        rows = tool.load(src)
    except Exception as e:  # noqa: BLE001 (a table that does not parse is the finding)
        return ["parameter table: %s" % e], 0
    problems = ["parameters: " + p for p in tool.check(src)]
    try:
        listed = ompi_info_params(src, build)
    except RuntimeError as e:
        return problems + ["MCA parameters: " + str(e)], 0
    problems += table_against_ompi_info(rows, listed)
    for doc in documents(src):
        with open(doc) as f:
            for n, line in enumerate(f, 1):
                for name in NAME_RE.findall(line):
                    if not is_pvar(name) and name not in listed:
                        problems.append("%s:%d: %s is not a parameter ompi_info lists" % (
                            os.path.relpath(doc, src), n, name))
    return problems, len(listed)


LINK_RE = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
DATE_RE = re.compile(r"\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b")


def slug(heading):
    """The anchor GitHub gives a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path):
    found, seen = set(), {}
    with open(path) as f:
        fence = False
        for line in f:
            if line.startswith("```"):
                fence = not fence
            m = re.match(r"^#{1,6} (.*)$", line)
            if m and not fence:
                base = slug(m.group(1))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else "%s-%d" % (base, n))
    return found


# files a generator of the unit lane writes: a link to one is not dead while
# the generator has not run yet (main() says so)
PENDING = ("docs/parameters.md",)


def check_links(src):
    """Relative links that name a missing file or anchor."""
    problems = []
    docs = documents(src) + sorted(glob.glob(os.path.join(src, "docs", "bench", "**",
                                                          "README.md"), recursive=True))
    for doc in docs:
        with open(doc) as f:
            text = f.read()
        text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
        for target in LINK_RE.findall(text):
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
            where = "%s: link %s" % (os.path.relpath(doc, src), target)
            if not os.path.exists(full):
                if os.path.relpath(full, src) in PENDING:
                    continue
                problems.append(where + ": no such file")
            elif anchor and full.endswith(".md") and anchor not in anchors(full):
                problems.append(where + ": no such heading")
    return problems


def check_limits(src):
    problems = []
    with open(os.path.join(src, "README.md")) as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) > 250:
        problems.append("README.md: %d lines (at most 250)" % len(lines))
    for n, line in enumerate(lines, 1):
        if len(line) > 400:
            problems.append("README.md:%d: %d characters (at most 400)" % (n, len(line)))
    dated = [n for n, line in enumerate(lines, 1) if DATE_RE.search(line)]
    if len(dated) > 3:
        problems.append("README.md: %d lines carry a date (at most 3): lines %s" % (
            len(dated), ", ".join(map(str, dated))))
    words = 0
    for doc in documents(src)[1:]:
        with open(doc) as f:
            words += len(f.read().split())
    if words > 20000:
        problems.append("docs/*.md: %d words (at most 20 000)" % words)
    return problems


def main(argv):
    if len(argv) != 1:
        print(__doc__)
        return 2
    src = os.path.abspath(argv[0])
    build = os.environ.get("BTL_OFI_BUILD") or os.path.join(src, "build")
    problems = check_tables(src)
    print("benchmark tables: %s" % ("ok" if not problems else "%d problem(s)" % len(problems)))
    pa = check_progress(src)
    print("progress thread A/B: %s" % ("ok" if not pa else "%d problem(s)" % len(pa)))
    problems += pa
    lp = check_links(src)
    print("relative links: %s%s" % ("ok" if not lp else "%d problem(s)" % len(lp), "".join(
        " (%s not generated yet)" % p for p in PENDING if not os.path.exists(os.path.join(src, p)))))
    problems += lp
    fp = check_limits(src)
    print("front page and word limits: %s" % ("ok" if not fp else "%d problem(s)" % len(fp)))
    problems += fp
    pp, count = check_params(src, build)
    print("MCA parameters: %d listed by ompi_info, %s" % (
        count, "the table, docs/parameters.md and README's block agree with it, none unknown "
        "named" if not pp else "%d problem(s)" % len(pp)))
    problems += pp
    for p in problems:
        print("FAIL: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
