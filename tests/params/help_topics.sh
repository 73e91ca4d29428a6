#!/bin/bash
# Every opal_show_help("help-mpi-btl-ofi.txt", "TOPIC", ...) in the
# component's C sources names a [TOPIC] that exists in help-mpi-btl-ofi.txt,
# every topic in the file is used, no topic is defined twice, and each call
# passes as many arguments as its topic's text has % conversions (a missing
# one makes show_help read garbage).  Calls may be split over lines.  No MPI
# job is run.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

help_file=$PARAMS_ROOT/help-mpi-btl-ofi.txt
[ -f "$help_file" ] || skip "$help_file is missing"
command -v perl >/dev/null || skip "perl is needed to parse the sources"
sources=("$PARAMS_ROOT"/btl_ofi*.c "$PARAMS_ROOT"/btl_ofi*.h)
[ -e "${sources[0]}" ] || skip "no btl_ofi*.c sources"

echo "help file: $help_file"
echo "sources: ${sources[*]##*/}"

# "TOPIC<TAB>ARGS<TAB>FILE" per call: ARGS is the count of arguments after
# the "want error header" flag, or "?" when the topic is not a literal.
calls=$(perl -0777 -ne '
    my $file = $ARGV;
    $file =~ s{.*/}{};
    s{/\*.*?\*/}{}gs;   # comments may mention calls
    while (/opal_show_help\s*\(\s*"help-mpi-btl-ofi\.txt"\s*,\s*/g) {
        my $start = pos($_);
        # the argument list up to the balancing parenthesis
        my ($depth, $i, $in_str, $cur) = (1, $start, 0, "");
        my @args;
        for (; $i < length($_) && $depth > 0; ++$i) {
            my $c = substr($_, $i, 1);
            if ($in_str) {
                $cur .= $c;
                if ($c eq "\\") { $cur .= substr($_, ++$i, 1); next; }
                $in_str = 0 if $c eq "\"";
                next;
            }
            if ($c eq "\"") { $in_str = 1; $cur .= $c; next; }
            if ($c eq "(") { ++$depth; }
            if ($c eq ")") { --$depth; last if 0 == $depth; }
            if ($c eq "," && 1 == $depth) { push @args, $cur; $cur = ""; next; }
            $cur .= $c;
        }
        push @args, $cur;
        s/^\s+|\s+$//g for @args;
        my $topic = $args[0];
        my $nargs = @args - 2;    # topic and the error-header flag
        if ($topic =~ /^"([^"]*)"$/) { print "$1\t$nargs\t$file\n"; }
        else { print "?$topic\t?\t$file\n"; }
    }' "${sources[@]}")

# topics defined in the file, and how many % conversions each one's text has
defined=$(perl -ne '
    if (/^\[(.+)\]\s*$/) { print "$t\t$n\n" if defined $t; $t = $1; $n = 0; next; }
    next if /^#/;
    if (defined $t) { my $l = $_; $l =~ s/%%//g; $n += () = $l =~ /%[-+ #0-9.]*[ldiuxXscpfg]/g; }
    END { print "$t\t$n\n" if defined $t; }' "$help_file")

if [ -z "$calls" ]; then
    fail "found no opal_show_help call for help-mpi-btl-ofi.txt in the sources"
fi

# topics used more than once in the file
dups=$(cut -f1 <<<"$defined" | sort | uniq -d)
if [ -n "$dups" ]; then
    while read -r d; do fail "topic [$d] is defined more than once"; done <<<"$dups"
else
    ok "no topic is defined twice ($(wc -l <<<"$defined") topics)"
fi

# every call's topic exists, with the right number of arguments
while IFS=$'\t' read -r topic nargs file; do
    [ -n "$topic" ] || continue
    if [ "${topic:0:1}" = "?" ]; then
        fail "$file: a show_help call names its topic by expression ${topic:1}: cannot be checked"
        continue
    fi
    conversions=$(awk -F'\t' -v t="$topic" '$1 == t { print $2 }' <<<"$defined")
    if [ -z "$conversions" ]; then
        fail "$file: topic \"$topic\" is used but [$topic] is not in help-mpi-btl-ofi.txt"
    elif [ "$conversions" != "$nargs" ]; then
        fail "$file: topic \"$topic\" gets $nargs arguments, its text has $conversions % conversions"
    else
        ok "$file: topic \"$topic\" exists and gets its $nargs arguments"
    fi
done <<<"$calls"

# every topic of the file is used somewhere
while IFS=$'\t' read -r topic _; do
    [ -n "$topic" ] || continue
    if cut -f1 <<<"$calls" | grep -qxF -- "$topic"; then
        ok "[$topic] is used"
    else
        fail "[$topic] is in help-mpi-btl-ofi.txt but no source uses it"
    fi
done <<<"$defined"

# the copy next to the built component must be the current text
built=${BTL_OFI_BUILD:-$PARAMS_ROOT/build}/help-mpi-btl-ofi.txt
if [ -f "$built" ]; then
    if cmp -s "$help_file" "$built"; then
        ok "build/help-mpi-btl-ofi.txt is up to date"
    else
        fail "build/help-mpi-btl-ofi.txt differs from help-mpi-btl-ofi.txt (rebuild the component)"
    fi
fi
finish
