# Helpers of the lane scripts that print one line per case and run on the
# simulated hosts (tests/hosts/hosts.sh, tests/slurm/slurm.sh, tests/clients/armci.sh).  Sourced
# after contrib/lib.sh, with LANE (the word after the status), LOGDIR and,
# optionally, LANE_SKIP_LABEL (what a skipped lane's one line names) set.
# shellcheck shell=bash

n_pass=0 n_fail=0 n_skip=0 n_xfail=0
lane_start=$(date +%s)
# the simulated hosts are shared: one lane at a time (the hosts and slurm
# lanes alike), since their down kills what runs in them
LANE_HOSTS_LOCK=/run/lock/btlofi-hosts-lane.lock

record() {
    local status=$1
    shift
    case $status in
    PASS) n_pass=$((n_pass + 1)) ;;
    FAIL) n_fail=$((n_fail + 1)) ;;
    SKIP) n_skip=$((n_skip + 1)) ;;
    XFAIL) n_xfail=$((n_xfail + 1)) ;; # expected to fail, and failed
    esac
    printf '%s  %s  %s\n' "$status" "$LANE" "$*"
}

summary() {
    local xfail=""
    [ $n_xfail = 0 ] || xfail=", $n_xfail expected failures"
    echo "$LANE: $n_pass passed, $n_fail failed, $n_skip skipped$xfail in $(($(date +%s) - lane_start))s"
}

skip_lane() {
    record SKIP "${LANE_SKIP_LABEL:-all}  ($1)"
    summary
    exit 0
}

show_log_tail() {
    echo "---- last 30 lines of $1 ----"
    tail -n 30 "$1" | tr -d '\000' || true
    echo "----"
}

# Skip the whole lane unless this machine can make network namespaces.
lane_need_netns() {
    [ "$(id -u)" = 0 ] || skip_lane "needs root for network namespaces"
    command -v ip >/dev/null 2>&1 || skip_lane "iproute2 (ip) not installed"
    ip netns del btlofi-probe 2>/dev/null || true
    if ! ip netns add btlofi-probe 2>/dev/null; then
        skip_lane "cannot create network namespaces here"
    fi
    ip netns del btlofi-probe
}

# lane_take_hosts DOWN...: wait for the hosts, and run DOWN (a command
# that takes them down, its output in LOGDIR/down.log) when the lane ends,
# however it ends (a lane killed by timeout or ^C too).
lane_take_hosts() {
    LANE_DOWN=("$@")
    mkdir -p "$(dirname "$LANE_HOSTS_LOCK")" "$LOGDIR"
    exec 8>"$LANE_HOSTS_LOCK"
    flock -w 900 8 || die "another lane holds $LANE_HOSTS_LOCK"
    trap lane_down EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP
}

lane_down() {
    "${LANE_DOWN[@]}" >"$LOGDIR/down.log" 2>&1 ||
        echo "$LANE: '${LANE_DOWN[*]##*/}' failed, see $LOGDIR/down.log" >&2
}
