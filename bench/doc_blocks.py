"""The tables the benchmark scripts write into Markdown documents, between
<!-- NAME:begin from=SOURCE --> and <!-- NAME:end --> markers."""

import re
import sys


def read_blocks(text, prefix):
    """[(name, source, lines)] of every block of @p text whose name starts
    with @p prefix (a name is NAME in the markers above)."""
    found = []
    for m in re.finditer(r"<!-- (%s\S*?):begin(?: from=(\S*))? -->\n" % re.escape(prefix), text):
        end = "<!-- %s:end -->" % m.group(1)
        stop = text.find(end, m.end())
        if stop >= 0:
            found.append((m.group(1), m.group(2) or "", text[m.end():stop].rstrip("\n").split("\n")))
    return found


def replace_block(path, name, source, lines):
    """Put @p lines between @p path's markers for @p name, the begin marker
    naming @p source; exits saying so when the file has no such block."""
    with open(path) as f:
        text = f.read()
    m = re.search(r"<!-- %s:begin[^>]*-->" % re.escape(name), text)
    end = "<!-- %s:end -->" % name
    if not m or end not in text[m.end():]:
        sys.exit("%s has no %s block" % (path, name))
    stop = text.index(end, m.end())
    marker = "<!-- %s:begin from=%s -->" % (name, source)
    with open(path, "w") as f:
        f.write(text[:m.start()] + marker + "\n" + "\n".join(lines) + "\n" + text[stop:])
