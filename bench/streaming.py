#!/usr/bin/env python3
"""Streaming a 124M-parameter model's weights out of a session on 2 CPU
ranks (not a test; bench/run.sh runs it with ONLY=streaming).

GPT-2 124M (zero-model-gen: 12 layers, hidden 768, vocabulary 50,257)
compiled at stage 3 for 2 ranks with `zero-compile --emit shared`, opened by
zero_mlir.Engine on each rank (`threads=1`, weights from the seed), after
one step (so that the device's peak is measured). Each round streams every
parameter with engine.named_parameters(bucket_bytes=B): B of 64 MiB to
every rank and to rank 0 only, then 512 MiB (the whole model in one bucket)
to every rank; the first round is a warm-up. A pass's time is rank 0's, from
the first call to the last tensor (the collectives end together); bandwidth
is the model's fp32 bytes over that time. The held bytes are the most the
stream kept at once (engine.stream_peak_bytes, which only grows: read after
each case's first pass), beside the plan's device peak, which streaming does
not raise (the gathers go through host memory).

Writes bench/results/streaming.json (or --out).
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import tempfile
import time

from gather_once import (ROOT, add_output_options, cpu_model, loadavg,
                         run, run_fields, save_json)


# The stream's held bytes only grow: the smaller buckets go first.
CASES = (("every rank, 64 MiB buckets", 64 << 20, None),
         ("rank 0 only, 64 MiB buckets", 64 << 20, 0),
         ("every rank, 512 MiB buckets", 512 << 20, None))


def rank_main(library, rounds, out):
    """Runs on each rank under mpirun: times the cases, rank 0 writes out."""
    import zero_mlir
    import numpy as np
    with zero_mlir.Engine(library, threads=1, quiet=True) as engine:
        # One step first, so that the device's peak is measured.
        engine.step(**{i["name"]: np.zeros(i["shape"], np.int64)
                       for i in engine.inputs})
        total = None
        times = {name: [] for name, _, _ in CASES}
        held = {}
        for r in range(rounds + 1):
            for name, bucket, rank in CASES:
                start = time.perf_counter()
                n = 0
                for _, array in engine.named_parameters(bucket_bytes=bucket,
                                                        rank=rank):
                    n += 0 if array is None else array.nbytes
                seconds = time.perf_counter() - start
                if engine.rank == 0:
                    total = n
                    if r == 0:
                        held[name] = engine.stream_peak_bytes
                    if r > 0:
                        times[name].append(seconds)
        if engine.rank == 0:
            with open(out, "w") as f:
                json.dump({"bytes": total, "times": times, "held": held,
                           "stream_peak_bytes": engine.stream_peak_bytes,
                           "device_peak_bytes": engine.last_peak_bytes,
                           "planned_peak_bytes": engine.plan["peak_bytes"]},
                          f)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    add_output_options(p, "streaming.json")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--mpirun",
                   default="mpirun --allow-run-as-root --oversubscribe")
    p.add_argument("--python", default=os.path.join(ROOT, ".venv", "bin",
                                                    "python"))
    p.add_argument("--rank", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rank:
        rank_main(args.rank[0], args.rounds, args.rank[1])
        return
    start, date = loadavg(), time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    with tempfile.TemporaryDirectory() as tmp:
        step = os.path.join(tmp, "gpt2.mlir")
        run([os.path.join(args.build, "bin", "zero-model-gen"), "gpt2",
             "--layers", "12", "--hidden", "768", "--heads", "12",
             "--vocab", "50257", "--seq", "64", "--batch", "2", "-o", step])
        library = os.path.join(tmp, "step.so")
        run([os.path.join(args.build, "bin", "zero-compile"), step,
             "--stage", "3", "--world-size", "2", "--emit", "shared", "-o",
             library])
        result = os.path.join(tmp, "result.json")
        env = dict(os.environ, PYTHONPATH=os.path.join(args.build,
                                                       "python_packages"),
                   OMP_NUM_THREADS="1")
        run(shlex.split(args.mpirun) +
            ["-np", "2", args.python, os.path.abspath(__file__), "--rank",
             library, result, "--rounds", str(args.rounds)], env=env)
        with open(result) as f:
            measured = json.load(f)
    doc = dict(run_fields(argparse.Namespace(rounds=args.rounds, steps=0,
                                             warmup=0), cpu_model(), start,
                          date))
    doc.update(model="GPT-2 124M (zero-model-gen), stage 3, 2 ranks",
               parameter_bytes=measured["bytes"],
               stream_peak_bytes=measured["stream_peak_bytes"],
               device_peak_bytes=measured["device_peak_bytes"],
               planned_peak_bytes=measured["planned_peak_bytes"],
               cases=[{"case": name, "bucket_bytes": bucket,
                       "held_bytes": measured["held"][name],
                       "seconds": statistics.median(measured["times"][name]),
                       "gb_per_s": measured["bytes"] / 1e9 /
                       statistics.median(measured["times"][name])}
                      for name, bucket, _ in CASES])
    save_json(args.out, doc)
    for c in doc["cases"]:
        print("%-30s %.3f s  %.2f GB/s" % (c["case"], c["seconds"],
                                           c["gb_per_s"]))


if __name__ == "__main__":
    main()
