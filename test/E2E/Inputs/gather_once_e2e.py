#!/usr/bin/env python3
"""Stage-3 gathers of frozen partitions, per use and once per optimizer
step (frozen-gather=once): compiles the model both ways, trains each on the
same batches with --trace, and checks that

- the plan (the scheduled step: each value-form gather of a frozen
  partition runs once per micro step, or once per step in phase
  first_micro_step) and the trace of every rank (the gathers waited for
  in each step, attributed to their ops by the trace's op index) agree on
  the count and the bytes of the frozen partitions' gathers per step;
- the report's all-gather count and bytes sent drop by exactly that;
- every measured peak equals its plan, and the losses (and the evaluation
  loss) are bitwise equal.

Prints the counts per step of each policy."""

import argparse
import json
import os
import re
import shlex
import sys

from zrt_e2e import check_peak, fail, read_log, run

BYTES = {"f32": 4, "bf16": 2, "f16": 2}


def parse_plan(path):
    """The scheduled step: frozen partitions, and per top-level op of the
    step body (by index) the frozen partition it gathers (or waits for)
    with its bytes and whether it runs once per step."""
    frozen = set()
    body, in_body = [], False
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*zero\.partition @(\S+) .*\bfrozen\b", line)
            if m:
                frozen.add(m.group(1))
            if line.startswith("  zero.train_step"):
                in_body = True
                continue
            if in_body:
                if line.startswith("  }"):
                    break
                if line.startswith("    ") and not line.startswith("     ") \
                        and not line.startswith("    }"):
                    body.append(line.strip())
    if not frozen:
        fail("%s has no frozen partition" % path)
    tokens = {}
    ops = []
    for text in body:
        m = re.match(r"(%\S+)(?:, (%\S+))? = zero\.(all_gather|prefetch) "
                     r"group @(\S+) .*: tensor<(\d+)x(\w+)>", text)
        if m:
            result, token, kind, group, numel, ty = m.groups()
            gather = {"group": group, "bytes": int(numel) * BYTES[ty],
                      "once": "phase  first_micro_step" in text}
            if kind == "prefetch":
                tokens[token] = gather
                ops.append(None)
            else:
                ops.append(gather)
            continue
        m = re.match(r"zero\.wait (%\S+)", text)
        ops.append(tokens.get(m.group(1)) if m else None)
    return frozen, ops


def planned(frozen, ops, k):
    count = sum(1 if g["once"] else k for g in ops
                if g and g["group"] in frozen)
    size = sum(g["bytes"] * (1 if g["once"] else k) for g in ops
               if g and g["group"] in frozen)
    return count, size


def traced(path, frozen, ops):
    """Frozen-partition gathers (count, bytes) of each step of one rank."""
    with open(path) as f:
        doc = json.load(f)
    events = sorted(doc["traceEvents"], key=lambda e: e["ts"])
    steps = []
    for e in events:
        if e["name"].startswith("step ") and e["ph"] == "X":
            steps.append((e["ts"], e["ts"] + e["dur"], [0, 0]))
    # Attribute each gather's wait to the op running when it started.
    current = -1
    for e in events:
        if e["name"] == "op index":
            current = e["args"]["op"]
            continue
        if e["name"] != "wait gather params":
            continue
        step = [acc for begin, end, acc in steps if begin <= e["ts"] <= end]
        if not step:
            continue  # an evaluation's, which traces no op index
        if not 0 <= current < len(ops) or ops[current] is None:
            fail("%s: a gather waited at op %d, which gathers nothing" %
                 (path, current))
        g = ops[current]
        if g["group"] not in frozen:
            continue
        step[0][0] += 1
        step[0][1] += g["bytes"]
    return [tuple(acc) for _, _, acc in steps]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--compiler", required=True)
    p.add_argument("--opt", required=True, help="zero-opt, for the report")
    p.add_argument("--mpirun", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--accumulation", type=int, default=4)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--compile-args", default="",
                   help="more zero-pipeline options, NAME=VALUE ...")
    p.add_argument("--train-args", default="")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    k = args.accumulation
    options = ["stage=3", "world-size=%d" % args.world,
               "gradient-accumulation-steps=%d" % k] + \
        shlex.split(args.compile_args)
    results = {}
    for policy in ("per-use", "once"):
        name = os.path.join(args.work, policy)
        opts = options + ["frozen-gather=" + policy]
        flags = ["--" + o for o in opts]
        run([args.compiler, args.model, "-o", name] + flags)
        run([args.compiler, args.model, "--emit", "mlir", "-o",
             name + ".mlir"] + flags)
        run([args.opt, args.model, "--zero-pipeline=" + " ".join(opts),
             "--zero-report=format=json out=%s.report.json" % name, "-o",
             os.devnull])
        with open(name + ".report.json") as f:
            report = json.load(f)
        run(shlex.split(args.mpirun) +
            ["-np", str(args.world), name, "--quiet", "--steps",
             str(args.steps), "--log-json", name + ".json", "--trace",
             name + ".trace.json"] + shlex.split(args.train_args),
            log=name + ".out")
        log = read_log(name + ".json")
        check_peak(log, policy)
        frozen, ops = parse_plan(name + ".mlir")
        plan = planned(frozen, ops, k)
        for rank in range(args.world):
            per_step = traced("%s.trace.rank%d.json" % (name, rank), frozen,
                              ops)
            if len(per_step) != args.steps:
                fail("%s rank %d: %d step spans in the trace, not %d" %
                     (policy, rank, len(per_step), args.steps))
            for i, got in enumerate(per_step):
                if got != plan:
                    fail("%s rank %d step %d: traced %d gathers of %d bytes "
                         "of frozen partitions, planned %d of %d" %
                         (policy, rank, i + 1, got[0], got[1], plan[0],
                          plan[1]))
        results[policy] = (len(frozen), plan, report, log)
        print("%s: %d frozen partitions, %d gathers of them per step (%d "
              "bytes), planned == traced on %d ranks; report: %d all-gathers, "
              "%d bytes sent per rank; measured peak %d == planned" %
              (policy, len(frozen), plan[0], plan[1], args.world,
               report["comm"]["collectives"]["all_gather"],
               report["comm"]["bytes_per_rank"], log[-1]["peak_bytes"]))
    n, use, use_report, use_log = results["per-use"]
    _, once, once_report, once_log = results["once"]
    if once[0] != n or use[0] != n * k:
        fail("frozen gathers per step: per-use %d, once %d; expected %d and "
             "%d" % (use[0], once[0], n * k, n))
    drop = (use_report["comm"]["collectives"]["all_gather"] -
            once_report["comm"]["collectives"]["all_gather"])
    if drop != use[0] - once[0]:
        fail("the report's all-gathers drop by %d, the frozen ones by %d" %
             (drop, use[0] - once[0]))
    # Each gather sends this rank's shard: (world - 1) / world of the bytes
    # gathered arrive from the others, 1 / world leaves.
    sent = use_report["comm"]["bytes_per_rank"] - \
        once_report["comm"]["bytes_per_rank"]
    if sent * args.world != use[1] - once[1]:
        fail("the report's bytes sent drop by %d, a rank's shards of the "
             "frozen gathers by %d / %d" % (sent, use[1] - once[1],
                                            args.world))
    for a, b in zip(use_log, once_log):
        for key in ("loss", "grad_norm"):
            if a[key] != b[key]:
                fail("step %d: %s %r per-use, %r once" %
                     (a["step"], key, a[key], b[key]))
        if "eval_loss" in a and a["eval_loss"] != b.get("eval_loss"):
            fail("step %d: eval_loss %r per-use, %r once" %
                 (a["step"], a["eval_loss"], b.get("eval_loss")))
    print("each frozen partition: %d gathers per step -> 1; losses bitwise "
          "equal over %d steps" % (k, len(use_log)))
    print("OK")


if __name__ == "__main__":
    main()
