#!/usr/bin/env python3
"""Trains a model with frozen parameters and the same model with none at
several (stage, world size) points and checks what a frozen parameter
promises: its exported values are bitwise those it started with (under
16-bit compute: the fp32 initial values rounded once to that type), the
trainable ones move, every measured peak equals the planned one, and the
planned peak is below the unfrozen model's. Prints one line per point."""

import argparse
import shlex
import struct
import sys

from zrt_e2e import bf16_bits, check_peak, fail, read_log, read_safetensors, run


def tensors(path):
    _, header, data = read_safetensors(path)
    return {name: data[slice(*info["data_offsets"])]
            for name, info in header.items()}


def frozen_names(model):
    names = []
    with open(model) as f:
        for line in f:
            words = line.split()
            if words[:1] == ["zero.param"] and words[-1] == "frozen":
                names.append(words[1].lstrip("@"))
    return names


def rounded(data, dtype):
    """fp32 bytes as the 16-bit compute copy holds them, widened again."""
    if dtype == "fp16":
        n = len(data) // 4
        half = struct.pack("<%de" % n, *struct.unpack("<%df" % n, data))
        return struct.pack("<%df" % n, *struct.unpack("<%de" % n, half))
    if dtype != "bf16":
        return data
    values = struct.unpack("<%dI" % (len(data) // 4), data)
    return struct.pack("<%dI" % len(values),
                       *[bf16_bits(v) << 16 for v in values])


def train(args, model, name, world, stage, steps, export):
    run([args.compiler, model, "-o", name, "--stage", str(stage),
         "--world-size", str(world)] + shlex.split(args.compile_args))
    cmd = shlex.split(args.mpirun) + ["-np", str(world), name, "--quiet",
                                      "--steps", str(steps)]
    if steps:
        cmd += ["--log-json", name + ".json"]
    run(cmd + ["--export", export] + shlex.split(args.train_args),
        log=name + ".out")
    return read_log(name + ".json") if steps else None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--compiler", required=True)
    p.add_argument("--mpirun", required=True)
    p.add_argument("--frozen", required=True, help="the model with frozen params")
    p.add_argument("--base", required=True, help="the same model, none frozen")
    p.add_argument("--dtype", default="fp32")
    p.add_argument("--work", required=True)
    p.add_argument("--points", default="0:1,2:2,3:2", help="stage:world,...")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--train-args", default="")
    p.add_argument("--compile-args", default="")
    args = p.parse_args()
    import os
    os.makedirs(args.work, exist_ok=True)
    names = frozen_names(args.frozen)
    if not names:
        fail("%s has no frozen parameter" % args.frozen)
    for point in args.points.split(","):
        stage, world = (int(x) for x in point.split(":"))
        w = os.path.join(args.work, "s%d_w%d" % (stage, world))
        base0 = w + "_base_init.safetensors"
        init = w + "_init.safetensors"
        after = w + "_after.safetensors"
        train(args, args.base, w + "_base", world, stage, 0, base0)
        base_log = train(args, args.base, w + "_base", world, stage, 1,
                         w + "_base_after.safetensors")
        train(args, args.frozen, w + "_frozen", world, stage, 0, init)
        log = train(args, args.frozen, w + "_frozen", world, stage,
                    args.steps, after)
        peak = check_peak(log, "frozen stage %d" % stage)
        base_peak = check_peak(base_log, "unfrozen stage %d" % stage)
        a, b, ref = tensors(init), tensors(after), tensors(base0)
        for name in names:
            if a[name] != rounded(ref[name], args.dtype):
                fail("%s: the initial values are not the %s rounding of the "
                     "unfrozen model's" % (name, args.dtype))
            if a[name] != b[name]:
                fail("%s: frozen, but changed by training" % name)
        moved = [n for n in a if n not in names and a[n] != b[n]]
        if len(moved) != len(a) - len(names):
            fail("trainable tensors that did not move: %s" %
                 sorted(set(a) - set(names) - set(moved)))
        if not peak < base_peak:
            fail("stage %d: planned peak %d is not below the unfrozen %d" %
                 (stage, peak, base_peak))
        print("stage %d, world %d: %d frozen tensors bitwise unchanged after "
              "%d steps, %d trained; measured peak == planned, below the "
              "unfrozen model's" % (stage, world, len(names), args.steps,
                                    len(moved)))
        sys.stdout.flush()
    print("OK")


if __name__ == "__main__":
    main()
