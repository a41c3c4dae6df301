#!/usr/bin/env python3
"""Checks a run with 8-bit (zrt_adam8bit) or bf16 Adam states against the
same run with fp32 states, for test/E2E/adam8bit-gpt2.test and
test/E2E/adam-bf16-gpt2.test.

  adam8bit_check.py losses LOW_LOG F32_LOG --rtol R [--label bf16]
      every step's measured peak equals its plan in both --log-json files,
      and the last step's loss with the lower-precision states (int8 unless
      --label says otherwise) is within R (relative) of the one with fp32
      states; prints the gap.
  adam8bit_check.py same A_LOG B_LOG
      the losses of B are bitwise A's first ones (the host and the device
      8-bit Adam are one kernel).
  adam8bit_check.py report IR REPORT [--bytes B --block K]
      the report's optimizer-state bytes per rank are the table's: for
      each trainable partition of IR (zero-opt's output), B bytes (1) per
      element of the rank's shard and an fp32 absmax per K (2048; 0: none)
      of them, for each of exp_avg and exp_avg_sq.
"""

import argparse
import json
import re
import sys

from zrt_e2e_checks import check_peak, read_log

# optimizers.def: ZRT_OPTIMIZER_PRECISION(AdamW, Int8, 1, 2048), and
# ZRT_OPTIMIZER_PRECISION(AdamW, BF16, 2, 0) with --bytes 2 --block 0.
BYTES, BLOCK = 1, 2048


def fail(msg):
    print("adam8bit-check: error: " + msg)
    sys.exit(1)


def trainable_shards(ir):
    """Each trainable partition's shard of IR (zero-opt's output): its
    elements per rank."""
    for m in re.finditer(
            r"zero\.partition @(\S+) stage (\d+) world_size (\d+) "
            r"alignment \d+ numel (\d+) padded (\d+)( frozen)?", ir):
        stage, world = int(m.group(2)), int(m.group(3))
        numel, padded = int(m.group(4)), int(m.group(5))
        if m.group(6):
            continue
        yield numel if stage == 0 else padded // world


def cmd_losses(args):
    int8, f32 = read_log(args.int8), read_log(args.f32)
    if len(int8) != len(f32) or not int8:
        fail("%d and %d steps" % (len(int8), len(f32)))
    low = args.label
    peak8 = check_peak(int8, low, fail=fail)
    peak32 = check_peak(f32, "f32", fail=fail)
    if peak8 >= peak32:
        fail("%s states peak %d, not below f32's %d" % (low, peak8, peak32))
    a, b = int8[-1]["loss"], f32[-1]["loss"]
    gap = abs(a - b) / abs(b)
    print("%d steps: first loss %.4f, last loss %s %.4f, f32 %.4f: gap "
          "%.2f%%" % (len(int8), int8[0]["loss"], low, a, b, 100 * gap))
    if gap > args.rtol:
        fail("gap %.4f above %.4f" % (gap, args.rtol))
    if not a < 0.7 * int8[0]["loss"]:
        fail("the %s run did not learn: %.4f from %.4f" %
             (low, a, int8[0]["loss"]))
    print("gap within %g; measured peaks %d (%s) and %d (f32) == planned" %
          (args.rtol, peak8, low, peak32))


def cmd_same(args):
    a, b = read_log(args.a), read_log(args.b)
    check_peak(b, args.b, fail=fail)
    for x, y in zip(a, b):
        if x["loss"] != y["loss"]:
            fail("step %d: loss %r != %r" % (x["step"], y["loss"], x["loss"]))
    print("%d steps bitwise equal" % len(b))


def cmd_report(args):
    with open(args.ir) as f:
        ir = f.read()
    want = 0
    for shard in trainable_shards(ir):
        want += args.bytes * shard
        if args.block:
            want += 4 * ((shard + args.block - 1) // args.block)
    if not want:
        fail("no partitions in " + args.ir)
    with open(args.report) as f:
        report = json.load(f)
    got = find_key(report, "model_state_breakdown")
    for key in ("adam_m", "adam_v"):
        if got.get(key) != want:
            fail("report %s %r != the table's %d" % (key, got.get(key), want))
    if args.block:
        print("report adam_m = adam_v = %d bytes = the table's %d byte x "
              "shard + 4 bytes x ceil(shard / %d)" %
              (want, args.bytes, args.block))
    else:
        print("report adam_m = adam_v = %d bytes = the table's %d bytes x "
              "shard" % (want, args.bytes))


def find_key(j, key):
    if isinstance(j, dict):
        if key in j:
            return j[key]
        for v in j.values():
            r = find_key(v, key)
            if r is not None:
                return r
    elif isinstance(j, list):
        for v in j:
            r = find_key(v, key)
            if r is not None:
                return r
    return None


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("losses")
    s.add_argument("int8")
    s.add_argument("f32")
    s.add_argument("--rtol", type=float, required=True)
    s.add_argument("--label", default="int8")
    s = sub.add_parser("same")
    s.add_argument("a")
    s.add_argument("b")
    s = sub.add_parser("report")
    s.add_argument("ir")
    s.add_argument("report")
    s.add_argument("--bytes", type=int, default=BYTES)
    s.add_argument("--block", type=int, default=BLOCK)
    args = p.parse_args()
    {"losses": cmd_losses, "same": cmd_same, "report": cmd_report}[args.cmd](
        args)


if __name__ == "__main__":
    main()
