#!/usr/bin/env python3
"""Step times of ZeRO++ and MiCS beside ZeRO-3 on 4 CPU ranks simulated as
2 nodes x 2 (not a test; bench/run.sh runs it with ONLY=zeropp).

gpt2-tiny in bf16 at stage 3, compiled with zero-compile --ranks-per-node 2
(every layer gathered again in the backward: --max-reuse-distance 0
--param-persistence-threshold 0, so that hpZ has backward gathers to keep
in the node) once per option: ZeRO-3, hpZ 2, qwZ, qgZ, qwZ + qgZ, MiCS 2.
Every round trains each executable (the order rotating between rounds)
with mpirun, --ranks-per-node 2, --threads 1 and --log-json; a run's step
time is the median `step_ms` (slowest rank) of the steps after the
warm-up, the result the median over rounds, and each option's ratio to
ZeRO-3 the median of the per-round ratios. The bytes a rank sends within
and across nodes are the report's (zero-report) and the run's measured
ones.

On one machine every "node" shares the same memory: this measures the
kernels (quantization, the secondary's copy) and the schedule's overheads,
not link speed.

Writes bench/results/zeropp.json (or --out).
"""

import json
import os
import shlex
import shutil
import statistics
import subprocess
import tempfile
import time

from gather_once import (cpu_model, loadavg, parse_run_args, read_steps, run,
                         run_fields, save_json, tokens)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

COMMON = ["--stage", "3", "--world-size", "4", "--dtype", "bf16",
          "--ranks-per-node", "2", "--max-reuse-distance", "0",
          "--param-persistence-threshold", "0"]
OPTIONS = {
    "ZeRO-3": [],
    "hpZ 2": ["--hpz-partition-size", "2"],
    "qwZ": ["--quantized-weights=true"],
    "qgZ": ["--quantized-gradients=true"],
    "qwZ + qgZ": ["--quantized-weights=true", "--quantized-gradients=true"],
    "MiCS 2": ["--mics-shard-size", "2"],
}


def main():
    args = parse_run_args(__doc__, "zeropp.json", 5, 20, 5)
    bin_dir = os.path.join(args.build, "bin")
    model = os.path.join(ROOT, "examples", "gpt2-tiny.mlir")
    work = tempfile.mkdtemp(prefix="zero-zeropp-")
    data = os.path.join(work, "tokens.bin")
    tokens(data, 256)
    names = list(OPTIONS)
    report = {}
    for i, name in enumerate(names):
        exe = os.path.join(work, "opt%d" % i)
        flags = COMMON + OPTIONS[name]
        run([os.path.join(bin_dir, "zero-compile"), model, "-o", exe] + flags)
        run([os.path.join(bin_dir, "zero-compile"), model, "--emit", "mlir",
             "-o", exe + ".mlir"] + flags)
        out = exe + ".report.json"
        run([os.path.join(bin_dir, "zero-opt"), exe + ".mlir",
             "--zero-report=format=json hardware=cpu out=" + out,
             "-o", os.devnull])
        with open(out) as f:
            report[name] = json.load(f)
    cpu = cpu_model()
    start, date = loadavg(), time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    times = {n: [] for n in names}
    ratios = {n: [] for n in names}
    last = {}
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        got = {}
        for name in order:
            exe = os.path.join(work, "opt%d" % names.index(name))
            log = exe + ".%d.jsonl" % r
            run(shlex.split(args.mpirun) +
                ["-np", "4", exe, "--quiet", "--threads", "1",
                 "--ranks-per-node", "2", "--steps", str(args.steps),
                 "--data", data, "--log-json", log])
            lines, got[name] = read_steps(log, args.warmup)
            times[name].append(got[name])
            last[name] = lines[-1]
        for name in names:
            ratios[name].append(got[name] / got["ZeRO-3"])
        print("round %d: %s" % (r + 1, ", ".join(
            "%s %.2f ms" % (n, got[n]) for n in names)), flush=True)
    result = {
        "model": "examples/gpt2-tiny.mlir",
        "common": " ".join(COMMON),
        **run_fields(args, cpu, start, date),
        "options": [],
    }
    for name in names:
        rep, line = report[name], last[name]
        result["options"].append({
            "name": name,
            "flags": " ".join(OPTIONS[name]),
            "step_ms": statistics.median(times[name]),
            "ratio_to_zero3": statistics.median(ratios[name]),
            "predicted_step_ms": rep["predicted_step_ms"],
            "planned_intra_node_bytes": rep["comm"][
                "intra_node_bytes_per_rank"],
            "planned_inter_node_bytes": rep["comm"][
                "inter_node_bytes_per_rank"],
            "measured_intra_node_bytes": sum(
                k["intra_node_bytes"] for k in line["comm"].values()),
            "measured_inter_node_bytes": sum(
                k["inter_node_bytes"] for k in line["comm"].values()),
            "peak_bytes": line["peak_bytes"],
            "planned_peak_bytes": line["planned_peak_bytes"],
        })
    shutil.rmtree(work)
    save_json(args.out, result)
    print("written to %s" % args.out)


if __name__ == "__main__":
    main()
