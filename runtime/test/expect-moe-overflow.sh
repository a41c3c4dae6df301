#!/bin/sh
# Usage: expect-moe-overflow.sh RANKS COMMAND...
# Runs COMMAND (zrt-moe-exchange-test's overflow case under mpirun) and
# passes when it exits non-zero after every one of its RANKS ranks printed
# the capacity overflow's message, and no rank went on past it.
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
if [ "$got" -ne "$ranks" ]; then
  echo "expect-moe-overflow: the message from $got of $ranks ranks"
  exit 1
fi
if printf '%s\n' "$out" | grep -q "went past the overflow"; then
  echo "expect-moe-overflow: a rank went on past the overflow"
  exit 1
fi
exit 0
