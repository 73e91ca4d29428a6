# One benchmark's medians as a PNG, for contrib/bench.
#
#   gnuplot -e "datafile='x.dat'; outfile='x.png'; ttl='...'; ylab='...'; \
#               cols='2 3 4'; style='lines'" bench/plot.gp
#
# datafile: a header line "size" and the implementations, then one line per size
# (or per test name with style='bars'), '?' where there is no number.
# cols: the columns that hold at least one number (gnuplot refuses to plot
# a column without any).

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 900,600 noenhanced font "sans,10"
} else {
    set terminal png size 900,600 noenhanced
}
set output outfile
set title ttl noenhanced
set ylabel ylab
set datafile missing "?"
set key outside right top vertical box
set grid
set logscale y
colours = "#1f77b4 #ff7f0e #d62728 #9467bd #2ca02c #8c564b"

if (style eq 'bars') {
    set style data histograms
    set style histogram clustered gap 1
    set style fill solid 0.8 border -1
    set boxwidth 0.9
    set xlabel "operation (8 bytes)"
    set yrange [*:*]
    plot for [c in cols] datafile using int(c):xtic(1) \
        title columnheader(int(c)) linecolor rgb word(colours, int(c) - 1)
} else {
    set logscale x 2
    set xlabel "message size (bytes)"
    set xtics ("1" 1, "4" 4, "16" 16, "64" 64, "256" 256, "1K" 1024, "4K" 4096, \
        "16K" 16384, "64K" 65536, "256K" 262144, "1M" 1048576, "4M" 4194304)
    set offsets graph 0.03, graph 0.03, 0, 0
    plot for [c in cols] datafile using 1:int(c) with linespoints \
        title columnheader(int(c)) linewidth 2 pointsize 1.2 \
        linecolor rgb word(colours, int(c) - 1)
}
