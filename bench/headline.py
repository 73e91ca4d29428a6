"""Headline rows of one contrib/bench run (its medians.csv) as the Markdown
table README.md shows: python3 bench/headline.py OUT/medians.csv"""
import csv, sys

ROWS = [("put_lat", "8"), ("get_lat", "8"), ("acc_lat", "8"), ("gacc_lat", "8"),
        ("fop_lat", "8"), ("cas_lat", "8"), ("put_rate", "8"), ("put_bw", "65536"),
        ("put_bw", "1048576"), ("put_bw", "4194304"), ("get_bw", "1048576"),
        ("put_bibw", "1048576"), ("pingpong", "8"), ("pingpong", "1048576"),
        ("p2p_bw", "1048576")]

def size(n):
    n = int(n)
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d %s" % (n // div, unit)
    return "%d B" % n

def num(v):
    try:
        f = float(v)
    except ValueError:
        return v or "-"
    if f >= 1000:
        return "{:,.0f}".format(f).replace(",", " ")
    return "%.3g" % f if f < 10 else "%.1f" % f

def ratio(v):
    try:
        return "%.2f" % float(v) if float(v) >= 0.01 else "%.4f" % float(v)
    except ValueError:
        return "-"

rows = {(r["benchmark"], r["size"]): r for r in csv.DictReader(open(sys.argv[1]))}
print("| benchmark | size | unit | ours | upstream | raw | ours/upstream | ours/raw |")
print("|--|--:|--|--:|--:|--:|--:|--:|")
for b, s in ROWS:
    r = rows.get((b, s))
    if not r:
        continue
    print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
        b, size(s), r["unit"], num(r["ours"]), num(r["upstream"]), num(r["raw"]),
        ratio(r["ours_over_upstream"]), ratio(r["ours_over_raw"])))
