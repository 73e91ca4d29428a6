# The verdict on a run of tests/mpi/dpm.c -m die, where a spawned child
# SIGKILLs itself while its parents exchange with it: the runtime ends the
# child's job only, so the parents must learn it from us (PMIx's
# announcement of the job's end: [connected job ended]; or a send that
# failed, with its error returned to the application or, inline, [message
# lost]) and end, not wait for good.  Sourced by tests/robustness (one node)
# and tests/hosts (the child on the other host).
# shellcheck shell=bash

# dpm_death_verdict HUNG LEFT LOG: prints "PASS reason" or "FAIL reason";
# HUNG is 1 when the run hit its limit, LEFT the processes it left behind.
dpm_death_verdict() {
    local hung=$1 left=$2 log=$3
    if ! grep -a -q '^KILL rank=' "$log"; then
        echo "FAIL the child never reached its kill point"
    elif [ "$hung" = 1 ] || grep -a -q 'SURVIVED' "$log"; then
        echo "FAIL the parents kept waiting on the dead child"
    elif [ "$left" != 0 ]; then
        echo "FAIL processes left behind"
    elif grep -a -q 'abnormally: one of its processes died' "$log"; then
        echo "PASS the parents ended: [connected job ended]"
    elif grep -a -q 'could not deliver a message to a peer' "$log"; then
        echo "PASS the parents ended: [message lost]"
    elif grep -a -q 'returned error [0-9]* after the child died' "$log"; then
        echo "PASS the parents ended: a send to it failed and the call returned the error"
    else
        echo "FAIL the parents ended, but not through btl/ofi's report"
    fi
}
