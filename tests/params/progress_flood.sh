#!/bin/bash
# A stranger cannot wake the progress thread.  Origins wake a target's
# thread (btl-ofi-look) with a UDP datagram to its wake socket; a process
# outside the job that floods that socket must neither be counted as a
# wake-up nor cost the computing rank CPU.  rma_busy_target -s 3 runs twice
# (np 2, rank 0 computes 3 s as a passive target): a baseline, then a job
# in which a watcher (progress_flood_watch.py, not part of the job), as
# soon as rank 0's btl-ofi-look thread is up, lists every UDP socket of
# the ranks and sends random 16-byte datagrams, about 25 000 a second for
# 3 s, to rank 0's UDP ports at their own local addresses (127.0.0.1 for
# a socket bound to 0.0.0.0); in the baseline the same 3 s window passes
# without them.  Checks: every UDP socket of the ranks is bound to a
# specific address (never 0.0.0.0 or ::), and there is one to flood; the
# flood happened (at least 10 000 datagrams sent); rank 0's wake_recv
# counter is at most the other rank's wake_sent (no outside datagram
# counted); the CPU time of rank 0's threads other than the main one
# (/proc/PID/task/TID/stat) over the flood's window exceeds the baseline's
# window by at most 0.15 s; both jobs pass.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

BUSY=${BTL_OFI_BUILD:-$PARAMS_ROOT/build}/mpi/rma_busy_target
[ -x "$BUSY" ] || skip "$BUSY is not built (make -C standalone mpitests)"
command -v python3 >/dev/null || skip "python3 is not installed"
[ -r /proc/net/udp ] || skip "no /proc/net/udp here"
WATCH=$PARAMS_ROOT/tests/params/progress_flood_watch.py
TICK=$(getconf CLK_TCK)
MIN_SENT=10000
MIN_WINDOW_MS=2500 # of the 3 s, or the CPU times do not compare
MAX_EXTRA_TICKS=$(((15 * TICK + 99) / 100)) # 0.15 s
if [ -z "$PARAMS_LOGS" ]; then
    PARAMS_LOGS=$(mktemp -d "${TMPDIR:-/tmp}/btl-ofi-params.XXXXXX")
fi
mkdir -p "$PARAMS_LOGS"

# the watcher of a job this script leaves early (set -e) ends with it
BUSY_WATCHERS=()
trap '[ ${#BUSY_WATCHERS[@]} = 0 ] || kill "${BUSY_WATCHERS[@]}" 2>/dev/null || true' EXIT

# flood_job LABEL MODE: rma_busy_target -s 3 with the watcher in MODE
# (flood or idle); its output in $JOB_LOG.watch (WATCH_LOG).
flood_job() {
    local label=$1 mode=$2
    if [ "$mode" = flood ]; then
        echo "job $label: rma_busy_target -s 3, a process outside the job floods rank 0's UDP ports for 3 s"
    else
        echo "job $label: rma_busy_target -s 3, no flood (3 s window measured)"
    fi
    busy_target_log "$label"
    WATCH_LOG=$JOB_LOG.watch
    python3 "$WATCH" "$$.$label" "$mode" "$PARAMS_TIMEOUT" 2 >"$WATCH_LOG" 2>&1 &
    BUSY_WATCHERS=($!)
    busy_target_job "$label" --oversubscribe
    BUSY_WATCHERS=()
    echo "  (exit status $JOB_RC, log $JOB_LOG, watcher's $WATCH_LOG)"
    if grep -q '^error=' "$WATCH_LOG"; then
        fail "$label: the watcher: $(sed -n 's/^error=//p' "$WATCH_LOG" | head -n 1)"
    elif ! grep -q '^cpu_ticks=' "$WATCH_LOG"; then
        fail "$label: the watcher did not finish its window before the job ended"
        tail -n 5 "$WATCH_LOG" | sed 's/^/  | /'
    fi
}

# watch_value KEY: the watcher's KEY=N of the last job, empty if none.
watch_value() {
    sed -n "s/^$1=\\([0-9]*\\).*/\\1/p" "$WATCH_LOG" | head -n 1
}

# check_bindings: every UDP socket of the last job's ranks has an address.
check_bindings() {
    local sockets wild
    sockets=$(awk '$1 == "socket" { print $2, $3, $4, $5, $6, $7 }' "$WATCH_LOG" | sort -u)
    if [ -z "$sockets" ]; then
        fail "$JOB_NAME: no UDP socket of the ranks was seen (there must be the wake socket to flood)"
        return
    fi
    wild=$(awk '$4 == "0.0.0.0" || $4 == "::" {
        printf "rank %s (pid %s) %s %s:%s; ", $1, $2, $3, $4, $5 }' <<<"$sockets")
    if [ -n "$wild" ]; then
        fail "$JOB_NAME: UDP socket(s) bound to every address: ${wild%; }"
    else
        ok "$JOB_NAME: every UDP socket of the ranks is bound to one address ($(awk '{
            printf "%srank %s %s %s:%s", sep, $1, $3, $4, $5; sep = ", " }' <<<"$sockets"))"
    fi
}

# pvar RANK-TEST KEY: the sum of counter KEY over the PVARS lines of the
# last job whose rank passes the awk test RANK-TEST (on r); -1 if a value
# is missing or negative (not read).
pvar() {
    grep -a '^PVARS rank=' "$JOB_LOG" | awk -v key="$2" '
        { r = -1; v = -1
          for (i = 2; i <= NF; ++i) {
              split($i, kv, "=")
              if (kv[1] == "rank") r = kv[2] + 0
              if (kv[1] == key && kv[2] ~ /^[0-9]+$/) v = kv[2] + 0
          }
          if ('"$1"') { n++; if (v < 0) bad = 1; s += v } }
        END { print (bad || !n) ? -1 : s }'
}

flood_job baseline idle
check_bindings
base_ticks=$(watch_value cpu_ticks) base_ms=$(watch_value window_ms)

flood_job flood flood
check_bindings
sent=$(watch_value sent)
if [ -z "$sent" ]; then
    fail "the flood did not happen: the test could not tell"
elif [ "$sent" -lt "$MIN_SENT" ]; then
    fail "the flood sent only $sent datagrams ($(watch_value failed) refused), under $MIN_SENT: the test could not tell"
else
    ok "the flood sent $sent datagrams to rank 0's UDP port(s) in 3 s"
fi

recv=$(pvar 'r == 0' wake_recv) peers_sent=$(pvar 'r > 0' wake_sent)
if [ "$recv" -lt 0 ] || [ "$peers_sent" -lt 0 ]; then
    fail "the counters wake_recv and wake_sent were not read from $JOB_LOG"
elif [ "$recv" -le "$peers_sent" ]; then
    ok "rank 0 counted $recv wake-up(s), the other rank sent $peers_sent: no outside datagram counted"
else
    fail "rank 0 counted $recv wake-ups, yet the other rank sent only $peers_sent: datagrams from outside the job woke its thread"
fi

flood_ticks=$(watch_value cpu_ticks) flood_ms=$(watch_value window_ms)
if [ -z "$base_ticks" ] || [ -z "$flood_ticks" ]; then
    fail "rank 0's thread CPU time was not measured (baseline: ${base_ticks:-none}, flood: ${flood_ticks:-none} ticks)"
elif [ "$base_ms" -lt "$MIN_WINDOW_MS" ] || [ "$flood_ms" -lt "$MIN_WINDOW_MS" ]; then
    fail "a window closed early, rank 0 had ended (baseline ${base_ms} ms, flood ${flood_ms} ms): the test could not tell"
else
    cpu=$(awk -v b="$base_ticks" -v f="$flood_ticks" -v t="$TICK" -v bm="$base_ms" -v fm="$flood_ms" \
        'BEGIN { printf "%.2f s in the flood'\''s %.1f s, %.2f s in the baseline'\''s %.1f s (%+.2f s)",
                 f / t, fm / 1000, b / t, bm / 1000, (f - b) / t }')
    if [ $((flood_ticks - base_ticks)) -le "$MAX_EXTRA_TICKS" ]; then
        ok "rank 0's threads but the main one used $cpu: at most 0.15 s more"
    else
        fail "rank 0's threads but the main one used $cpu: over 0.15 s more"
        awk '$1 == "thread" { printf "  | flood window: thread %s %s %d ticks\n", $2, $3, $4 }' "$WATCH_LOG"
    fi
fi
finish
