#!/usr/bin/env python3
"""zero-tune's ranking against measured step times (not a test; bench/run.sh
runs it with ONLY=tune).

For examples/mlp.mlir and examples/gpt2-tiny.mlir on 2 and 4 ranks:
`zero-tune --hardware cpu --format json` ranks the best configuration of
each (stage, accumulation) group; for gpt2-tiny, whose blocks can be
recomputed, the rankings with `--remat selective` and `--remat layer` add
configurations of the same search space that the recomputation makes
slower. Of these, --configs per (model, ranks) are measured: the tuner's
top 3 and others at evenly spaced places in the order of predicted steps,
so that they span the predicted range (neighbours predicted within a few
percent of each other rank by noise alone). Each
one's ds_config is compiled with `zero-compile --config` and trained with
mpirun (`--threads 1 --log-json`); every configuration runs once per
round, in an order shuffled anew each round. A run has --steps steps, or
more where the set's fastest prediction is short: enough for --work-ms of
predicted work, the same count for every configuration of the set (an
equal number of samples for each minimum).

Measured step: the minimum `step_ms` (slowest rank) over the steps after
the warm-up of every round (min-of-N: other processes on the shared cores
only ever add time, and the cost model predicts an undisturbed step); the
median over rounds of each round's median is recorded beside it, with the
spread of the per-round minima.

Per (model, ranks): the Spearman rank correlation of predicted and measured
steps (minimum, and median for comparison), and where the measured fastest
configuration sits in the tuner's ranking. Then the tuner's own run time on
Llama-3-70B-shaped steps on 512 ranks (`zero-model-gen llama --preset
llama-3-70b`, bf16) for an H100.

Writes bench/results/tune.json (or --out); bench/update_docs.py turns it
into the table of docs/benchmarks.md.
"""

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import e2e  # noqa: E402  (make_data, run, read_json_lines)


def ranks_of(values):
    """1-based ranks, ties sharing their average rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0 + 1
        i = j + 1
    return ranks


def spearman(xs, ys):
    """Pearson correlation of the ranks."""
    rx, ry = ranks_of(xs), ranks_of(ys)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    return cov / (vx * vy) ** 0.5 if vx and vy else float("nan")


def describe(c):
    cfg = c["ds_config"]["zero_optimization"]
    s = "stage %d, accum %d, bucket %d%s" % (
        c["stage"], c["gradient_accumulation_steps"],
        cfg["reduce_bucket_size"], ", overlap" if cfg["overlap_comm"] else "")
    if c.get("remat", "none") != "none":
        s += ", remat " + c["remat"]
    if c["stage"] == 3:
        s += ", prefetch %d, live %d, persist %d" % (
            cfg["stage3_prefetch_bucket_size"],
            cfg["stage3_max_live_parameters"],
            cfg["stage3_param_persistence_threshold"])
    return s


def spread(candidates, n, keep):
    """`n` of `candidates` (sorted by predicted step): the first `keep`, then
    the others at evenly spaced ranks of the predicted steps."""
    if len(candidates) <= n:
        return candidates
    chosen, rest = candidates[:keep], candidates[keep:]
    want = n - keep
    picks = sorted({round(i * (len(rest) - 1) / max(want - 1, 1))
                    for i in range(want)})
    chosen += [rest[i] for i in picks]
    return sorted(chosen, key=lambda c: c["predicted_step_ms"])


def tune(tune_bin, src, world, budget, remat, top):
    """zero-tune's JSON ranking (stdout; the summary goes to stderr)."""
    cmd = [tune_bin, src, "--world-size", str(world), "--hardware", "cpu",
           "--memory-budget", budget, "--top", str(top), "--format", "json"]
    if remat:
        cmd += ["--remat", remat]
    return json.loads(subprocess.run(cmd, check=True, stdout=subprocess.PIPE,
                                     text=True).stdout)


def time_llama(bindir, work, world, seq, batch, hardware):
    """Generates the Llama-3-70B-shaped step and times zero-tune on it."""
    model = os.path.join(work, "llama-3-70b-%d-%d.mlir" % (seq, batch))
    e2e.run([os.path.join(bindir, "zero-model-gen"), "llama", "--preset",
             "llama-3-70b", "--seq", str(seq), "--batch", str(batch),
             "--dtype", "bf16", "-o", model])
    cmd = [os.path.join(bindir, "zero-tune"), model, "--world-size",
           str(world), "--hardware", hardware, "--format", "json", "--top",
           "3"]
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.monotonic() - start
    best = json.loads(proc.stdout)[0] if proc.returncode == 0 else None
    m = re.search(r"searched (\d+) configurations", proc.stderr)
    return {"evaluated": int(m.group(1)) if m else None,"world": world, "seq": seq, "batch": batch, "hardware": hardware,
            "seconds": seconds, "fits": best is not None,
            "best": best,
            "message": proc.stderr.strip().splitlines()[-1]}


def machine():
    """The CPU model (lscpu) and the core count."""
    cpu = "unknown"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "nproc": os.cpu_count()}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--out", default=os.path.join(HERE, "results", "tune.json"))
    p.add_argument("--steps", type=int, default=25,
                   help="steps per run, at least")
    p.add_argument("--work-ms", type=float, default=100,
                   help="predicted milliseconds of steps per run of the "
                   "set's fastest configuration (more steps, up to 400)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--configs", type=int, default=12,
                   help="configurations measured per model and world size")
    p.add_argument("--budget", default="1GiB")
    p.add_argument("--models", default="mlp,gpt2-tiny")
    p.add_argument("--worlds", default="2,4")
    p.add_argument("--mpirun",
                   default="mpirun --allow-run-as-root --oversubscribe")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--skip-llama", action="store_true")
    p.add_argument("--keep", help="keep the work directory here")
    args = p.parse_args()

    bindir = os.path.join(args.build, "bin")
    tune_bin = os.path.join(bindir, "zero-tune")
    compiler = os.path.join(bindir, "zero-compile")
    work = args.keep or tempfile.mkdtemp(prefix="zero-tune-bench-")
    os.makedirs(work, exist_ok=True)
    data = e2e.make_data(work)

    sets = []
    for model in args.models.split(","):
        src = os.path.join(ROOT, "examples", model + ".mlir")
        for world in (int(w) for w in args.worlds.split(",")):
            # Every group the search keeps (top 64), then the same groups
            # with each recomputation where the model has blocks.
            ranked = tune(tune_bin, src, world, args.budget, None, 64)
            for c in ranked:
                c["source"] = "tuner #%d" % c["rank"]
                c["tuner_rank"] = c["rank"]
            candidates = list(ranked)
            if model != "mlp":
                for remat in ("selective", "layer"):
                    for c in tune(tune_bin, src, world, args.budget, remat,
                                  64):
                        c["source"] = "--remat %s #%d" % (remat, c["rank"])
                        c["tuner_rank"] = None
                        candidates.append(c)
            seen, unique = set(), []
            for c in sorted(candidates,
                            key=lambda c: c["predicted_step_ms"]):
                key = json.dumps(c["ds_config"], sort_keys=True)
                if key not in seen:
                    seen.add(key)
                    unique.append(c)
            top3 = [c for c in unique if c["tuner_rank"] and
                    c["tuner_rank"] <= 3]
            rest = [c for c in unique if c not in top3]
            chosen = spread(top3 + rest, args.configs, len(top3))
            configs = []
            for i, c in enumerate(chosen):
                name = "%s-w%d-c%d" % (model, world, i)
                cfg = os.path.join(work, name + ".json")
                with open(cfg, "w") as f:
                    json.dump(c["ds_config"], f, indent=2)
                exe = os.path.join(work, name)
                e2e.run([compiler, src, "--config", cfg, "--world-size",
                         str(world), "-o", exe])
                configs.append({"model": model, "world": world, "exe": exe,
                                "tuned": c, "steps": [], "round_min": [],
                                "round_median": []})
            fastest = min(c["predicted_step_ms"] for c in chosen)
            steps = min(400, max(args.steps,
                                 int(args.work_ms / fastest + 0.999)))
            for c in configs:
                c["nsteps"] = steps + args.warmup
            sets.append({"model": model, "world": world, "configs": configs,
                         "candidates": len(unique), "steps": steps})
    every = [c for s in sets for c in s["configs"]]
    print("compiled %d configurations in %s" % (len(every), work), flush=True)

    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    rng = random.Random(args.seed)
    loads = [open("/proc/loadavg").read().split()[:3]]
    start = time.time()
    for r in range(args.rounds):
        order = list(every)
        rng.shuffle(order)
        for c in order:
            log = "%s-round%d.log.json" % (c["exe"], r)
            cmd = args.mpirun.split() + [
                "-np", str(c["world"]), c["exe"], "--quiet", "--steps",
                str(c["nsteps"]), "--log-json", log,
                "--threads", str(args.threads)] + data[c["model"]]
            e2e.run(cmd, env=env)
            steps = [l["step_ms"] for l in e2e.read_json_lines(log)]
            steps = steps[args.warmup:]
            c["steps"] += steps
            c["round_min"].append(min(steps))
            c["round_median"].append(statistics.median(steps))
            print("round %d %-9s %d ranks, %s: min %.3f median %.3f ms "
                  "(predicted %.3f)" % (
                      r, c["model"], c["world"], c["tuned"]["source"],
                      c["round_min"][-1], c["round_median"][-1],
                      c["tuned"]["predicted_step_ms"]), flush=True)
        loads.append(open("/proc/loadavg").read().split()[:3])
    minutes = (time.time() - start) / 60

    results = []
    for s in sets:
        rows = []
        for c in s["configs"]:
            t = c["tuned"]
            rows.append({"source": t["source"], "tuner_rank": t["tuner_rank"],
                         "config": describe(t), "ds_config": t["ds_config"],
                         "peak_bytes": t["peak_bytes"],
                         "predicted_step_ms": t["predicted_step_ms"],
                         "measured_step_ms": min(c["steps"]),
                         "median_step_ms": statistics.median(
                             c["round_median"]),
                         "round_min_ms": c["round_min"],
                         "round_median_ms": c["round_median"]})
        predicted = [x["predicted_step_ms"] for x in rows]
        measured = [x["measured_step_ms"] for x in rows]
        medians = [x["median_step_ms"] for x in rows]
        fastest = min(rows, key=lambda x: x["measured_step_ms"])
        # How far one configuration's rounds scatter, against how far the
        # predictions of neighbouring configurations lie apart.
        scatter = statistics.median(max(x["round_min_ms"]) /
                                    min(x["round_min_ms"]) for x in rows)
        gaps = sorted(predicted)
        gap = statistics.median(b / a for a, b in zip(gaps, gaps[1:]))
        results.append({"model": s["model"], "world": s["world"],
                        "candidates": s["candidates"], "rows": rows,
                        "steps": s["steps"],
                        "spearman": spearman(predicted, measured),
                        "spearman_median": spearman(predicted, medians),
                        "predicted_spread": max(predicted) / min(predicted),
                        "round_scatter": scatter,
                        "neighbour_gap": gap,
                        "measured_best_source": fastest["source"],
                        "measured_best_rank": fastest["tuner_rank"]})

    llama = [] if args.skip_llama else [
        time_llama(bindir, work, 512, seq, batch, "h100-sxm")
        for seq, batch in ((8192, 512), (8192, 2048), (2048, 2048))]
    for l in llama:
        print("llama-3-70b, seq %d, batch %d on %d ranks: %.2f s, %s" % (
            l["seq"], l["batch"], l["world"], l["seconds"],
            describe(l["best"]) if l["best"] else l["message"]), flush=True)

    doc = {"steps": args.steps, "warmup": args.warmup, "rounds": args.rounds,
           "threads_per_rank": args.threads, "budget": args.budget,
           "configs": args.configs, "machine": machine(),
           "loadavg": loads[0], "loadavg_rounds": loads[1:],
           "minutes": minutes,
           "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime(start)),
           "results": results, "llama": llama}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=2)
    for res in results:
        print("%-9s %d ranks: Spearman %.3f (medians %.3f) over %d "
              "configurations; measured fastest: %s" % (
                  res["model"], res["world"], res["spearman"],
                  res["spearman_median"], len(res["rows"]),
                  res["measured_best_source"]))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
