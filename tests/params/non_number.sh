#!/bin/bash
# Values that are not plain numbers, for an integer parameter.  What the
# MCA variable system makes of them is Open MPI's business (in 5.0.7 it
# reads the leading number, "abc" being 0); this test records what
# happened and demands only that the job neither crashes nor hangs, and
# that a job that runs to the end moves its data correctly.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_smoke

for value in abc 12abc 0x10 3.7 ""; do
    run_job "num_cq_read='$value'" ofi --mca btl ofi,self \
        --mca btl_ofi_provider_include "$PARAMS_PROVIDER" --mca btl_ofi_num_cq_read "$value"
    expect_no_crash
    # what happened, for the record
    if grep -aqF "Parameter: btl_ofi_num_cq_read" "$JOB_LOG"; then
        echo "  recorded: btl/ofi saw $(grep -a -m1 -E '^ *Value:' "$JOB_LOG" | tr -s ' ' | sed 's/^ //')" \
            "and used $(grep -a -m1 -E '^ *Using:' "$JOB_LOG" | tr -s ' ' | sed 's/^ //')"
    else
        echo "  recorded: no [bad parameter] message from btl/ofi"
    fi
    grep -a -m3 -iE "invalid|not a valid|could not convert|bad value" "$JOB_LOG" |
        sed 's/^/  recorded: Open MPI said: /' || true
    if [ "$JOB_RC" = 0 ]; then
        expect_completed
    else
        echo "  recorded: the job ended with exit status $JOB_RC"
    fi
done
finish
