#!/bin/sh
# Usage: expect-moe-overflow.sh RANKS COMMAND...
# Runs COMMAND (zrt-moe-exchange-test's overflow case under mpirun) and
# passes when it exits non-zero with the capacity overflow's message, and no
# rank went on past it.
ranks=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -eq 0 ]; then
  echo "expect-moe-overflow: the run exited 0"
  exit 1
fi
got=$(printf '%s\n' "$out" |
  grep -c "zrt: error: MoE layer 7, step 4: 24 rows would arrive at rank [0-9]* (member 0 of the expert-parallel ranks")
# Every rank prints it, but MPI_Abort may end a rank before mpirun has
# forwarded its output: at least one rank's, at most every rank's.
if [ "$got" -lt 1 ] || [ "$got" -gt "$ranks" ]; then
  echo "expect-moe-overflow: the message from $got of $ranks ranks"
  exit 1
fi
if printf '%s\n' "$out" | grep -q "went past the overflow"; then
  echo "expect-moe-overflow: a rank went on past the overflow"
  exit 1
fi
exit 0
