#!/usr/bin/env python3
"""End-to-end step times of compiled executables and the cost model's
predictions for them (not a test; bench/run.sh runs it).

For each model (examples/mlp.mlir, examples/gpt2-tiny.mlir), ZeRO stage
0-3 and world size 1-4: compile with zero-compile, predict with
`zero-opt --zero-pipeline=... --zero-report=hardware=cpu`, and train with
mpirun, `--log-json` and `--trace`. Every configuration runs once per round,
all configurations of a round back to back (the pair stage 0 / stage 3 of a
world size next to each other, their order alternating between rounds), so
each ratio compares runs taken moments apart on the shared machine.

Measured step time: the median `step_ms` (slowest rank) of the steps after
the warm-up, then the median over rounds. Exposed communication: from the
rank traces, the time spent in `wait ...` spans (the compute thread blocked
on a collective) inside each measured step span, over the step span.

The rank traces record the waits of asynchronous collectives (the
prefetched stage-3 gathers, reductions with overlap-comm) and, as `wait ...`
spans too, the collectives issued synchronously (the default gradient
all-reduce / reduce-scatters), so the trace's share is the exposed
communication. It is cross-checked without the trace: each world size N > 1
gets a communication-free reference: the same model with the per-rank batch
(global batch / N) compiled for one rank, N copies started together as
plain processes (so they share the cores as the N ranks do), same threads
per rank, in the same rounds; exposed ~= step(N ranks) - step(reference),
the slowest copy's step for the slowest rank's. At
stages 1-3 the reference also runs the optimizer over all parameters, where
a rank of N runs it over 1/N of them, so there the estimate is low by that
difference (small next to the step).

Writes bench/results/e2e.json (or --out).
"""

import argparse
import json
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# zero-model-gen arguments that reproduce examples/<model>.mlir (checked
# below) except for the batch.
GEN = {
    "mlp": (["mlp", "--sizes", "784,256,256,10", "--dtype", "f32"], 64),
    "gpt2-tiny": (["gpt2", "--layers", "5", "--hidden", "128", "--heads", "4",
                   "--vocab", "256", "--seq", "64", "--dtype", "f32"], 8),
}


def run(cmd, env=None):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=env)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:])
        raise SystemExit("failed (%d): %s" % (proc.returncode, " ".join(cmd)))
    return proc.stdout


def write_npy(path, descr, shape, fmt, values):
    shape_txt = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1
                                                    else "")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, shape_txt)
    pad = (64 - (10 + len(header) + 1) % 64) % 64
    header += " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        f.write(header.encode("latin1"))
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))


def make_data(work):
    """Byte tokens of the repository's docs (gpt2-tiny: vocab 256) and
    Gaussian features with random labels (mlp: 784 features, 10 classes)."""
    tokens = os.path.join(work, "tokens.bin")
    docs = os.path.join(ROOT, "docs")
    data = b"".join(open(os.path.join(docs, f), "rb").read()
                    for f in sorted(os.listdir(docs)) if f.endswith(".md"))
    with open(tokens, "wb") as f:
        f.write(struct.pack("<%dH" % len(data), *data))
    rng = random.Random(0)
    rows = 1024
    x = os.path.join(work, "x.npy")
    y = os.path.join(work, "y.npy")
    write_npy(x, "<f4", (rows, 784), "f",
              [rng.gauss(0, 1) for _ in range(rows * 784)])
    write_npy(y, "<i8", (rows,), "q", [rng.randrange(10) for _ in range(rows)])
    return {"gpt2-tiny": ["--data", tokens],
            "mlp": ["--inputs", x, "--labels", y]}


def finish(args, doc, work, say=print):
    """Writes doc to --out, says so, and removes the work folder unless
    --keep names it."""
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    say("wrote " + args.out)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


def read_json_lines(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def trace_exposed(trace_path, warmup):
    """Per measured step: (step span us, sum of wait spans inside it us)."""
    doc = json.load(open(trace_path))
    events = doc["traceEvents"]
    steps = sorted((e for e in events if e["name"].startswith("step ")),
                   key=lambda e: e["ts"])
    waits = sorted((e for e in events if e["name"].startswith("wait")),
                   key=lambda e: e["ts"])
    out = []
    for s in steps[warmup:]:
        lo, hi = s["ts"], s["ts"] + s["dur"]
        w = sum(e["dur"] for e in waits if lo <= e["ts"] and e["ts"] < hi)
        out.append((s["dur"], w))
    return out


def run_config(c, base, data, args, env):
    cmd = args.mpirun.split() + [
        "-np", str(c["world"]), c["exe"], "--quiet", "--steps",
        str(args.steps), "--log-json", base + ".log.json",
        "--trace", base + ".trace.json"] + data[c["model"]]
    if args.threads > 0:
        cmd += ["--threads", str(args.threads)]
    run(cmd, env=env)
    log = read_json_lines(base + ".log.json")
    step_ms = [l["step_ms"] for l in log[args.warmup:]]
    spans = []
    for rank in range(c["world"]):
        spans += trace_exposed(base + ".trace.rank%d.json" % rank,
                               args.warmup)
    return {"step_ms": statistics.median(step_ms),
            "exposed_share": statistics.median(w / d for d, w in spans
                                               if d > 0),
            "exposed_ms": statistics.median(w / 1000.0 for d, w in spans),
            "trace_step_ms": statistics.median(d / 1000.0 for d, w in spans)}


def run_reference(c, base, data, args, env):
    """N copies of the one-rank program at the per-rank batch, started
    together (plain processes, no MPI world): the ranks' computation with
    the same sharing of the cores, without any communication. A step's time
    is the slowest copy's, as step_ms is the slowest rank's."""
    n = c["reference_for"]
    procs = []
    for i in range(n):
        cmd = [c["exe"], "--quiet", "--steps", str(args.steps),
               "--log-json", "%s.copy%d.log.json" % (base, i)] + \
            data[c["model"]]
        if args.threads > 0:
            cmd += ["--threads", str(args.threads)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.STDOUT, env=env))
    for p in procs:
        if p.wait() != 0:
            raise SystemExit("reference run failed: " + c["exe"])
    logs = [read_json_lines("%s.copy%d.log.json" % (base, i))
            for i in range(n)]
    step_ms = [max(l[k]["step_ms"] for l in logs)
               for k in range(args.warmup, args.steps)]
    return {"step_ms": statistics.median(step_ms), "exposed_share": 0.0,
            "exposed_ms": 0.0, "trace_step_ms": None}


def predict(opt, model, stage, world, work):
    out = os.path.join(work, "report-%s-s%d-w%d.json" % (
        os.path.basename(model), stage, world))
    run([opt, model, "--zero-pipeline=stage=%d world-size=%d" % (stage, world),
         "--zero-report=format=json hardware=cpu out=%s" % out, "-o",
         os.devnull])
    doc = json.load(open(out))
    if isinstance(doc, list):
        doc = doc[0]
    return doc["predicted_step_ms"], doc["exposed_comm_ms"]


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--out", default=os.path.join(HERE, "results", "e2e.json"))
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--models", default="mlp,gpt2-tiny")
    p.add_argument("--worlds", default="1,2,4")
    p.add_argument("--stages", default="0,1,2,3")
    p.add_argument("--mpirun",
                   default="mpirun --allow-run-as-root --oversubscribe")
    p.add_argument("--threads", type=int, default=1,
                   help="OpenMP threads per rank (--threads of the "
                   "executables; 0: the driver's default, cores / ranks)")
    p.add_argument("--keep", help="keep the work directory here")
    args = p.parse_args()

    bindir = os.path.join(args.build, "bin")
    gen = os.path.join(bindir, "zero-model-gen")
    compiler = os.path.join(bindir, "zero-compile")
    opt = os.path.join(bindir, "zero-opt")
    work = args.keep or tempfile.mkdtemp(prefix="zero-e2e-")
    os.makedirs(work, exist_ok=True)
    data = make_data(work)
    models = args.models.split(",")
    worlds = [int(w) for w in args.worlds.split(",")]
    stages = [int(s) for s in args.stages.split(",")]

    configs = []
    for model in models:
        src = os.path.join(ROOT, "examples", model + ".mlir")
        for world in worlds:
            for stage in stages:
                exe = os.path.join(work, "%s-s%d-w%d" % (model, stage, world))
                run([compiler, src, "--stage", str(stage), "--world-size",
                     str(world), "-o", exe])
                pred, pred_exposed = predict(opt, src, stage, world, work)
                configs.append({"model": model, "stage": stage,
                                "world": world, "exe": exe,
                                "predicted_step_ms": pred,
                                "predicted_exposed_comm_ms": pred_exposed,
                                "runs": []})
        # Communication-free references: per-rank batch on one rank.
        gen_args, batch = GEN[model]
        check = os.path.join(work, model + "-check.mlir")
        run([gen] + gen_args + ["--batch", str(batch), "-o", check])
        if open(check).read() != open(src).read():
            raise SystemExit("zero-model-gen %s does not reproduce %s" %
                             (" ".join(gen_args), src))
        for world in worlds:
            if world == 1:
                continue
            ref = os.path.join(work, "%s-ref-w%d" % (model, world))
            run([gen] + gen_args + ["--batch", str(batch // world), "-o",
                                    ref + ".mlir"])
            run([compiler, ref + ".mlir", "--stage", "0", "--world-size", "1",
                 "-o", ref])
            configs.append({"model": model, "stage": 0, "world": 1,
                            "reference_for": world, "exe": ref,
                            "predicted_step_ms": None,
                            "predicted_exposed_comm_ms": None, "runs": []})
    # Run order within a round: per model and world size, stage 0, stage 3
    # and the reference next to each other, then stages 1 and 2.
    def slot(c):
        if "reference_for" in c:
            return (c["model"], c["reference_for"], 2)
        return (c["model"], c["world"], {0: 0, 3: 1, 1: 3, 2: 4}[c["stage"]])
    configs.sort(key=lambda c: (models.index(c["model"]),) + slot(c)[1:])
    print("compiled %d configurations in %s" % (len(configs), work))

    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)  # the driver picks cores / local ranks
    for r in range(args.rounds):
        order = list(configs)
        # Alternate the direction so that stage 0 and stage 3 of a world
        # size each run first in half of the rounds.
        if r % 2:
            order.reverse()
        for c in order:
            base = "%s-r%d" % (c["exe"], r)
            if "reference_for" in c:
                c["runs"].append(run_reference(c, base, data, args, env))
            else:
                c["runs"].append(run_config(c, base, data, args, env))
            exposed = c["runs"][-1]["exposed_share"]
            print("round %d %-9s stage %d world %d%s: %.3f ms, waits %.1f%%"
                  % (r, c["model"], c["stage"], c["world"],
                     " (reference for %d ranks)" % c["reference_for"]
                     if "reference_for" in c else "",
                     c["runs"][-1]["step_ms"], 100 * exposed), flush=True)

    refs = {(c["model"], c["reference_for"]): c for c in configs
            if "reference_for" in c}
    results = []
    references = []
    for c in configs:
        med = statistics.median(x["step_ms"] for x in c["runs"])
        if "reference_for" in c:
            references.append({"model": c["model"],
                               "for_world": c["reference_for"],
                               "batch": GEN[c["model"]][1] //
                               c["reference_for"],
                               "measured_step_ms": med,
                               "step_ms_per_round": [x["step_ms"]
                                                     for x in c["runs"]]})
            continue
        ref = refs.get((c["model"], c["world"]))
        est = None
        if ref:
            # Per round: this run minus the reference run of the same round.
            est = statistics.median(
                a["step_ms"] - b["step_ms"]
                for a, b in zip(c["runs"], ref["runs"]))
        results.append({
            "model": c["model"], "stage": c["stage"], "world": c["world"],
            "measured_step_ms": med,
            "step_ms_per_round": [x["step_ms"] for x in c["runs"]],
            "wait_share": statistics.median(x["exposed_share"]
                                            for x in c["runs"]),
            "wait_ms": statistics.median(x["exposed_ms"]
                                         for x in c["runs"]),
            "exposed_estimate_ms": est,
            "exposed_estimate_share": est / med if est is not None else None,
            "predicted_step_ms": c["predicted_step_ms"],
            "predicted_exposed_comm_ms": c["predicted_exposed_comm_ms"],
            "predicted_over_measured": c["predicted_step_ms"] / med})

    def per_round(model, world, stage):
        for c in configs:
            if "reference_for" in c:
                continue
            if (c["model"], c["world"], c["stage"]) == (model, world, stage):
                return [x["step_ms"] for x in c["runs"]]
        return None

    ratios = []
    for model in models:
        for world in worlds:
            s0, s3 = per_round(model, world, 0), per_round(model, world, 3)
            if s0 and s3:
                ratios.append({"model": model, "world": world,
                               "stage3_over_stage0": statistics.median(
                                   b / a for a, b in zip(s0, s3))})
    doc = {"threads_per_rank": args.threads, "steps": args.steps, "warmup": args.warmup, "rounds": args.rounds,
           "mpirun": args.mpirun, "results": results,
           "references": references,
           "stage_ratios": ratios}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    finish(args, doc, work)


if __name__ == "__main__":
    main()
