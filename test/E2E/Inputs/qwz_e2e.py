"""ZeRO++ qwZ (or qgZ) end to end: the same model compiled at stage 3 in
bf16 with and without quantized-weights (or the --quantized options),
trained on the same ranks and data.

    qwz_e2e.py --compiler ZERO_COMPILE --opt ZERO_OPT --mpirun CMD
               --model M --work DIR --world N --steps S --rtol R
               --step-rtol T [--options OPTS] [--train-args ARGS]
               [--ranks-per-node K] [--quantized "OPTION=V ..." --name NAME]...
               [--nudged-rtol R]

Checks that every run's measured peak equals its plan (the staging
buffers of the quantized gathers included), that the quantized run's mean
loss over the last 20 steps is within --rtol of the unquantized run's and
every step's loss within --step-rtol (and not bitwise the same: the
gathered weights are quantized), and prints the measured differences and
the report's bytes per rank of both (the quantized gathers move INT8
chunks: about half of bf16's). --options are more pipeline options
(space-separated name=value) for both runs, e.g. the gradient clipping and
learning-rate schedule. --quantized and --name may be repeated: each
quantized run is checked against the one unquantized run.
"""

import argparse
import array
import json
import os
import shlex
import sys

from zrt_e2e import fail, read_safetensors, run


def step_diffs(ref, log):
    return [abs(a["loss"] - b["loss"]) / abs(a["loss"])
            for a, b in zip(ref, log)]


def train(args, name, exe, extra=(), steps=None):
    """Runs exe on args.world ranks and checks each step's log line: the
    measured peak equals the plan's, and no step was skipped."""
    steps = args.steps if steps is None else steps
    out = os.path.join(args.work, name)
    run(shlex.split(args.mpirun) + ["-np", str(args.world), exe, "--quiet",
        "--steps", str(steps), "--log-json", out + ".json"] +
        (["--ranks-per-node", str(args.ranks_per_node)]
         if args.ranks_per_node else []) +
        shlex.split(args.train_args) + list(extra), log=out + ".out")
    with open(out + ".json") as f:
        log = [json.loads(line) for line in f if line.strip()]
    if len(log) != steps:
        fail("%s: %d log lines for %d steps" % (name, len(log), steps))
    for line in log:
        if line["peak_bytes"] != line["planned_peak_bytes"]:
            fail("%s step %d: measured peak %d != planned %d" % (
                name, line["step"], line["peak_bytes"],
                line["planned_peak_bytes"]))
        if line["skipped"]:
            fail("%s step %d was skipped" % (name, line["step"]))
    return log


def nudge(src, dst):
    """dst: the F32 safetensors file src with every nonzero value raised by
    one ulp (its bits one more away from zero when positive, one fewer
    when negative); zeros stay zero."""
    _, header, data = read_safetensors(src)
    raw = open(src, "rb").read()
    body = array.array("I", data)
    if sys.byteorder != "little":
        body.byteswap()
    for name, t in header.items():
        if t["dtype"] != "F32":
            fail("%s: %s is %s, not F32" % (src, name, t["dtype"]))
    for i, bits in enumerate(body):
        if bits & 0x7FFFFFFF:
            body[i] = bits - 1 if bits & 0x80000000 else bits + 1
    if sys.byteorder != "little":
        body.byteswap()
    with open(dst, "wb") as f:
        f.write(raw[:len(raw) - len(data)] + body.tobytes())


def main():
    p = argparse.ArgumentParser()
    for a in ("--compiler", "--opt", "--mpirun", "--model", "--work"):
        p.add_argument(a, required=True)
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--rtol", type=float, default=0.02)
    p.add_argument("--step-rtol", type=float, default=0.08)
    p.add_argument("--options", default="")
    p.add_argument("--nudged-rtol", type=float)
    p.add_argument("--train-args", default="")
    p.add_argument("--ranks-per-node", type=int, default=0)
    p.add_argument("--quantized", action="append")
    p.add_argument("--name", action="append")
    args = p.parse_args()
    quantized = args.quantized or ["quantized-weights=1"]
    names = args.name or ["qwz"]
    if len(names) != len(quantized) or "bf16" in names:
        fail("give one --name (not bf16) per --quantized")
    os.makedirs(args.work, exist_ok=True)
    runs = {}
    nodes = []
    if args.ranks_per_node:
        nodes = ["ranks-per-node=%d" % args.ranks_per_node]
    for name, extra in [("bf16", [])] + [
            (n, q.split()) for n, q in zip(names, quantized)]:
        options = ["stage=3", "world-size=%d" % args.world, "dtype=bf16"
                   ] + nodes + args.options.split()
        exe = os.path.join(args.work, name)
        run([args.compiler, args.model, "-o", exe] +
            ["--" + o for o in options + extra])
        report = json.loads(run(
            [args.opt, args.model, "--zero-pipeline=" + " ".join(
                options + extra), "--zero-report=format=json", "-o",
             os.devnull]))
        log = train(args, name, exe)
        runs[name] = (log, report)
        print("%s: %d steps, measured peak %d == planned" % (
            name, args.steps, log[-1]["peak_bytes"]))
    ref = runs["bf16"][0]
    if args.nudged_rtol is not None:
        # The setup's own sensitivity: the unquantized run again, from its
        # initial weights each raised by one fp32 ulp. A bound on the
        # quantized run's losses means something only where this stays well
        # under it.
        exe = os.path.join(args.work, "bf16")
        train(args, "bf16-init", exe, ["--export", exe + "-init.safetensors"],
              steps=0)
        nudge(exe + "-init.safetensors", exe + "-nudged.safetensors")
        nudged = train(args, "bf16-nudged", exe, [
            "--init-from", exe + "-nudged.safetensors"])
        gap = max(step_diffs(ref, nudged))
        if gap > args.nudged_rtol:
            fail("one ulp on every initial weight moves the unquantized loss "
                 "by %.4g > %g: the setup is too sensitive to measure "
                 "quantization" % (gap, args.nudged_rtol))
        print("one ulp on every initial weight: every step within %g of "
              "bf16's" % args.nudged_rtol)
        print("measured: largest step difference %.4f (one ulp)" % gap)
    for name_q in names:
        check(args, ref, runs[name_q][0], name_q)
        sent = runs["bf16"][1]["comm"]["bytes_per_rank"]
        sent_q = runs[name_q][1]["comm"]["bytes_per_rank"]
        print("report: bytes sent per rank per step %d (bf16) %d (%s), "
              "ratio %.3f" % (sent, sent_q, name_q, sent_q / sent))
    print("OK")


def check(args, ref, q, name_q):
    """The quantized run's losses against the unquantized run's."""
    diffs = step_diffs(ref, q)
    worst = max(diffs)
    tail = min(20, args.steps)
    mean_ref = sum(a["loss"] for a in ref[-tail:]) / tail
    mean_q = sum(b["loss"] for b in q[-tail:]) / tail
    final = abs(mean_q - mean_ref) / mean_ref
    if all(a["loss"] == b["loss"] for a, b in zip(ref, q)):
        fail("%s losses are bitwise bf16's: nothing was quantized" % name_q)
    if final > args.rtol:
        fail("%s's mean loss of the last %d steps differs from bf16's by "
             "%.4g > %g" % (name_q, tail, final, args.rtol))
    for i, d in enumerate(diffs):
        if d > args.step_rtol:
            fail("%s's loss of step %d differs from bf16's by %.4g > %g" % (
                name_q, i + 1, d, args.step_rtol))
    print("last %d steps' mean loss within %g of bf16's, every step within "
          "%g" % (tail, args.rtol, args.step_rtol))
    print("measured: last %d steps %.4f (bf16) %.4f (%s), %.4f apart; "
          "largest step difference %.4f (step %d)" % (
              tail, mean_ref, mean_q, name_q, final, worst,
              diffs.index(worst) + 1))


if __name__ == "__main__":
    main()
