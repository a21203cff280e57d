#!/usr/bin/env bash
# phase.sh NAME COMMAND...: run COMMAND and print how long it took (make test's and CI's
# phase times, docs/testing.md); exits with COMMAND's status.
set -uo pipefail
name=$1
shift
start=$SECONDS
"$@"
rc=$?
took=$((SECONDS - start))
printf 'aitestbed: phase %s: %d min %02d s%s\n' "$name" $((took / 60)) $((took % 60)) \
    "$([[ $rc == 0 ]] || echo " (failed: exit $rc)")"
exit $rc
