#!/usr/bin/env python3
"""Checks for test/E2E/bf16-masters-gpt2.test (#zero.optimizer's
bf16_masters, DeepSpeed's bf16_master_weights_and_grads).

  bf16_masters_check.py report IR F32_REPORT MASTERS_REPORT
      the model-state breakdowns of the two zero-report files differ only
      in master_params: 4 bytes per element of each trainable partition's
      shard of IR (zero-opt's output) with fp32 masters, none with bf16
      masters; prints the drop.
  bf16_masters_check.py bf16 WEIGHTS [--expect yes|no]
      whether every value of an exported safetensors file is a bf16 value
      (its low 16 bits zero): yes for bf16 masters, which are the exported
      weights; no for fp32 masters, most of which are not.
"""

import argparse
import json
import struct
import sys

# The report's nested key lookup and the partitions' shards, shared with
# the 8-bit Adam check.
from adam8bit_check import find_key, trainable_shards


def fail(msg):
    print("bf16-masters-check: error: " + msg)
    sys.exit(1)


def cmd_report(args):
    with open(args.ir) as f:
        shard = sum(trainable_shards(f.read()))
    if not shard:
        fail("no trainable partitions in " + args.ir)
    with open(args.f32) as f:
        f32 = find_key(json.load(f), "model_state_breakdown")
    with open(args.masters) as f:
        masters = find_key(json.load(f), "model_state_breakdown")
    if f32.get("master_params") != 4 * shard:
        fail("fp32 masters: master_params %r != 4 x %d" %
             (f32.get("master_params"), shard))
    if masters.get("master_params") != 0:
        fail("bf16 masters: master_params %r != 0" %
             masters.get("master_params"))
    for key in sorted(set(f32) | set(masters)):
        if key != "master_params" and f32.get(key) != masters.get(key):
            fail("%s: %r (fp32 masters) != %r (bf16 masters)" %
                 (key, f32.get(key), masters.get(key)))
    print("model states drop by master_params = 4 bytes x %d shard elements "
          "= %d bytes; params, grads and states unchanged" %
          (shard, 4 * shard))


def read_f32(path):
    data = open(path, "rb").read()
    (length,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + length])
    base = 8 + length
    words = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] != "F32":
            fail("%s: %s is %s, not F32" % (path, name, entry["dtype"]))
        begin, end = entry["data_offsets"]
        words += struct.unpack_from("<%dI" % ((end - begin) // 4), data,
                                    base + begin)
    return words


def cmd_bf16(args):
    words = read_f32(args.weights)
    wide = sum(1 for w in words if w & 0xFFFF)
    if args.expect == "yes":
        if wide:
            fail("%d of %d values are not bf16" % (wide, len(words)))
        print("all %d exported values are bf16" % len(words))
    else:
        if wide < len(words) // 2:
            fail("only %d of %d values are not bf16" % (wide, len(words)))
        print("most exported values are not bf16 (fp32 masters)")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("report")
    r.add_argument("ir")
    r.add_argument("f32")
    r.add_argument("masters")
    b = sub.add_parser("bf16")
    b.add_argument("weights")
    b.add_argument("--expect", choices=["yes", "no"], default="yes")
    args = p.parse_args()
    {"report": cmd_report, "bf16": cmd_bf16}[args.cmd](args)


if __name__ == "__main__":
    main()
