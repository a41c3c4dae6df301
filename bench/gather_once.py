#!/usr/bin/env python3
"""Step time of a stage-3 LoRA-like fine-tune with the frozen partitions
gathered per use against once per optimizer step (zero-param-gather
frozen-gather; not a test, bench/run.sh runs it).

The model: a Llama from zero-model-gen (--args) whose base weights are
frozen (--freeze), q_proj and v_proj training, compiled with zero-compile
at stage 3 on --world ranks with --accumulation micro steps and the
pipeline's other defaults, once per policy. Every round trains both
executables back to back (their order alternating between rounds) with
mpirun, --threads 1, --log-json and --trace; a run's step time is the
median `step_ms` (slowest rank) of the steps after the warm-up, the
result the median over rounds, and the ratio the median of the per-round
ratios. The all-gathers per step and the bytes a rank sends come from the
report (zero-report), the gathers waited for per step from rank 0's trace.

Writes bench/results/gather_once.json (or --out).
"""

import argparse
import json
import os
import shlex
import statistics
import struct
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

MODEL = ("llama --layers 4 --hidden 256 --heads 4 --kv-heads 2 --ffn 768 "
         "--vocab 512 --seq 32 --batch 16")
FREEZE = "embed|norm|k_proj|o_proj|mlp|lm_head"


def add_output_options(p, out):
    """--build (the build folder) and --out (results/OUT), as the benchmarks
    that import this module take them."""
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--out", default=os.path.join(HERE, "results", out))


def add_round_options(p, rounds, steps, warmup):
    """--rounds, --steps, --warmup (the steps left out of the median) and
    --mpirun, with each benchmark's defaults."""
    p.add_argument("--rounds", type=int, default=rounds)
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--warmup", type=int, default=warmup)
    p.add_argument("--mpirun",
                   default="mpirun --allow-run-as-root --oversubscribe")


def parse_run_args(description, out, rounds, steps, warmup):
    """The options of a benchmark that takes just the output and round
    options."""
    p = argparse.ArgumentParser(description=description)
    add_output_options(p, out)
    add_round_options(p, rounds, steps, warmup)
    return p.parse_args()


def save_json(path, doc):
    """Writes doc to path, making its folder."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


def read_steps(log, warmup):
    """A run's --log-json lines and its median step_ms after `warmup`
    steps."""
    lines = [json.loads(l) for l in open(log) if l.strip()]
    return lines, statistics.median(l["step_ms"] for l in lines[warmup:])


def run_fields(args, cpu, start, date):
    """The results' fields that say where and when the rounds ran (the load
    from `start` to now) and how many steps they timed."""
    return {
        "machine": {"cpu": cpu, "nproc": os.cpu_count()},
        "date": date,
        "loadavg": start,
        "loadavg_end": loadavg(),
        "rounds": args.rounds,
        "steps": args.steps,
        "warmup": args.warmup,
    }


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, **kw).stdout


def loadavg():
    """The 1, 5 and 15 minute load averages, as /proc/loadavg writes them."""
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


def cpu_model():
    """lscpu's model name of this machine's CPU."""
    for line in run(["lscpu"]).splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def tokens(path, vocab):
    data = b"".join(open(os.path.join(ROOT, "docs", f), "rb").read()
                    for f in sorted(os.listdir(os.path.join(ROOT, "docs")))
                    if f.endswith(".md"))
    with open(path, "wb") as f:
        f.write(struct.pack("<%dH" % len(data), *(b % vocab for b in data)))


def traced_gathers(path):
    """Gathers waited for in each step span of one rank's trace."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in events
             if e["ph"] == "X" and e["name"].startswith("step ")]
    waits = [e["ts"] for e in events if e["name"] == "wait gather params"]
    return [sum(1 for t in waits if b <= t <= e) for b, e in steps]


def main():
    p = argparse.ArgumentParser(description=__doc__)
    add_output_options(p, "gather_once.json")
    p.add_argument("--args", default=MODEL)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--accumulation", type=int, default=4)
    add_round_options(p, 5, 20, 5)
    args = p.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    work = tempfile.mkdtemp(prefix="zero-gather-once-")
    model = os.path.join(work, "lora.mlir")
    run([os.path.join(bin_dir, "zero-model-gen")] + shlex.split(args.args) +
        ["--freeze", FREEZE, "-o", model])
    vocab = int(shlex.split(args.args)[shlex.split(args.args).index(
        "--vocab") + 1])
    data = os.path.join(work, "tokens.bin")
    tokens(data, vocab)
    policies = ["per-use", "once"]
    options = {}
    report = {}
    for policy in policies:
        opts = ["stage=3", "world-size=%d" % args.world,
                "gradient-accumulation-steps=%d" % args.accumulation,
                "frozen-gather=" + policy]
        options[policy] = opts
        exe = os.path.join(work, policy)
        run([os.path.join(bin_dir, "zero-compile"), model, "-o", exe] +
            ["--" + o for o in opts])
        out = os.path.join(work, policy + ".report.json")
        run([os.path.join(bin_dir, "zero-opt"), model,
             "--zero-pipeline=" + " ".join(opts),
             "--zero-report=format=json hardware=cpu out=" + out,
             "-o", os.devnull])
        with open(out) as f:
            report[policy] = json.load(f)
    times = {p: [] for p in policies}
    ratios = []
    gathers = {}
    peaks = {}
    for r in range(args.rounds):
        order = policies if r % 2 == 0 else policies[::-1]
        got = {}
        for policy in order:
            exe = os.path.join(work, policy)
            log = exe + ".%d.jsonl" % r
            trace = exe + ".%d.trace.json" % r
            run(shlex.split(args.mpirun) +
                ["-np", str(args.world), exe, "--quiet", "--threads", "1",
                 "--steps", str(args.steps), "--data", data, "--log-json",
                 log, "--trace", trace])
            lines, got[policy] = read_steps(log, args.warmup)
            times[policy].append(got[policy])
            gathers[policy] = traced_gathers(trace.replace(
                ".json", ".rank0.json"))
            peaks[policy] = (lines[-1]["peak_bytes"],
                             lines[-1]["planned_peak_bytes"])
        ratios.append(got["once"] / got["per-use"])
        print("round %d: per-use %.2f ms, once %.2f ms" %
              (r + 1, got["per-use"], got["once"]), flush=True)
    result = {
        "model": "zero-model-gen " + args.args + " --freeze '" + FREEZE + "'",
        "world": args.world,
        "accumulation": args.accumulation,
        "rounds": args.rounds,
        "steps": args.steps,
        "warmup": args.warmup,
        "policies": {
            p: {
                "options": " ".join(options[p]),
                "step_ms": statistics.median(times[p]),
                "all_gathers": report[p]["comm"]["collectives"]["all_gather"],
                "bytes_per_rank": report[p]["comm"]["bytes_per_rank"],
                "traced_gathers_per_step": statistics.median(gathers[p]),
                "peak_bytes": peaks[p][0],
                "planned_peak_bytes": peaks[p][1],
                "predicted_step_ms": report[p]["predicted_step_ms"],
            } for p in policies
        },
        "ratio_once_over_per_use": statistics.median(ratios),
    }
    save_json(args.out, result)
    print("once / per-use: %.3f; written to %s" %
          (result["ratio_once_over_per_use"], args.out))


if __name__ == "__main__":
    main()
