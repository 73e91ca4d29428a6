"""Headline rows of one contrib/bench run (its medians.csv) as the Markdown
table README.md shows: python3 bench/headline.py OUT/medians.csv

Numbers are formatted as the run's own summary.md formats them."""
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_driver import fmt_ratio, fmt_size, num_or_word  # noqa: E402

ROWS = [("put_lat", 8), ("get_lat", 8), ("acc_lat", 8), ("gacc_lat", 8),
        ("busy_put_lat", 8), ("busy_get_lat", 8), ("busy_fop_lat", 8),
        ("fop_lat", 8), ("cas_lat", 8), ("put_rate", 8), ("put_bw", 64 << 10),
        ("put_bw", 1 << 20), ("put_bw", 4 << 20), ("get_bw", 1 << 20),
        ("put_bibw", 1 << 20), ("pingpong", 8), ("pingpong", 1 << 20),
        ("p2p_bw", 1 << 20)]


def number(text):
    """A CSV cell as a float, or None where it holds a word (n/a, refused)."""
    try:
        return float(text)
    except ValueError:
        return None


def main(path):
    rows = {(r["benchmark"], int(r["size"])): r for r in csv.DictReader(open(path))}
    impls = ["ours", "nothread", "upstream", "sm", "raw"]
    ratios = ["ours_over_upstream", "ours_over_raw", "ours_over_nothread", "ours_over_sm"]
    heads = ["ours", "thread off", "upstream", "btl/sm", "raw"]
    ratio_heads = ["ours/upstream", "ours/raw", "ours/thread off", "ours/btl sm"]
    # the peer's columns only where the run had it (contrib/setup --peers)
    if any(number(r.get("mpich", "")) is not None for r in rows.values()):
        impls.append("mpich")
        ratios.append("ours_over_mpich")
        heads.append("mpich")
        ratio_heads.append("ours/mpich")
    print("| benchmark | size | unit | %s |" % " | ".join(heads + ratio_heads))
    print("|--|--:|--|%s" % ("--:|" * (len(heads) + len(ratio_heads))))
    for bench, size in ROWS:
        r = rows.get((bench, size))
        if not r:
            continue
        cells = [num_or_word(number(r.get(k, "n/a")), r.get(k, "n/a")) for k in impls]
        cells += [fmt_ratio(number(r.get(k, ""))) for k in ratios]
        print("| %s | %s | %s | %s |" % (bench, fmt_size(size), r["unit"], " | ".join(cells)))


if __name__ == "__main__":
    main(sys.argv[1])
