#!/usr/bin/env python3
"""Long-context step times on 2 CPU ranks (not a test; bench/run.sh runs it
with ONLY=long_context).

Two comparisons, each between executables compiled from one generated
Llama (zero-model-gen llama) and trained in the same rounds:

- Ulysses sequence parallelism against data parallelism at the same global
  tokens: DP 2 (each rank one of the batch's rows), SP 2 on the same rows
  (each rank half of every row, the all-to-alls around attention), and SP 2
  on one row twice as long (the reason SP exists: a sequence no rank holds
  whole).
- The loss without the logits: the output projection and cross-entropy in
  chunks of rows (--loss-chunk) against the whole logits, at a vocabulary of
  32,000.

Every round trains each executable (the order rotating between rounds) with
mpirun, --threads 1 and --log-json; a run's step time is the median
`step_ms` (slowest rank) of the steps after the warm-up, the result the
median over rounds, and each ratio the median of the per-round ratios to
the comparison's baseline. Peaks are the run's measured and planned ones.

Writes bench/results/long_context.json (or --out).
"""

import json
import os
import shlex
import shutil
import statistics
import tempfile
import time

from gather_once import (cpu_model, loadavg, parse_run_args, read_steps, run,
                         run_fields, save_json, tokens)

LLAMA = ["llama", "--layers", "2", "--hidden", "256", "--heads", "8",
         "--kv-heads", "4", "--ffn", "688"]
# name -> (model flags, compile flags); the first of each group is its
# baseline.
GROUPS = {
    "sp": {
        "DP 2": (["--vocab", "4096", "--seq", "1024", "--batch", "2"],
                 ["--stage", "0", "--world-size", "2"]),
        "SP 2, same rows": (["--vocab", "4096", "--seq", "1024", "--batch",
                             "2"],
                            ["--stage", "0", "--world-size", "2",
                             "--sp-size", "2"]),
        "SP 2, one row of twice the length": (
            ["--vocab", "4096", "--seq", "2048", "--batch", "1"],
            ["--stage", "0", "--world-size", "2", "--sp-size", "2"]),
    },
    "loss": {
        "whole logits": (["--vocab", "32000", "--seq", "512", "--batch",
                          "2"],
                         ["--stage", "0", "--world-size", "2"]),
        "loss chunk 128": (["--vocab", "32000", "--seq", "512", "--batch",
                            "2"],
                           ["--stage", "0", "--world-size", "2",
                            "--loss-chunk", "128"]),
    },
}


def main():
    args = parse_run_args(__doc__, "long_context.json", 3, 8, 3)
    bin_dir = os.path.join(args.build, "bin")
    work = tempfile.mkdtemp(prefix="zero-long-context-")
    data = {}
    for vocab in ("4096", "32000"):
        data[vocab] = os.path.join(work, "tokens%s.bin" % vocab)
        tokens(data[vocab], int(vocab))
    runs = []  # (group, name, exe, data)
    for group, entries in GROUPS.items():
        for i, (name, (gen, flags)) in enumerate(entries.items()):
            base = os.path.join(work, "%s%d" % (group, i))
            run([os.path.join(bin_dir, "zero-model-gen")] + LLAMA + gen +
                ["-o", base + ".model.mlir"])
            run([os.path.join(bin_dir, "zero-compile"), base + ".model.mlir",
                 "-o", base] + flags)
            runs.append((group, name, base, data[gen[gen.index("--vocab") +
                                                      1]]))
    cpu = cpu_model()
    start, date = loadavg(), time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    times = {(g, n): [] for g, n, _, _ in runs}
    ratios = {(g, n): [] for g, n, _, _ in runs}
    last = {}
    for r in range(args.rounds):
        order = runs[r % len(runs):] + runs[:r % len(runs)]
        got = {}
        for group, name, exe, tok in order:
            log = exe + ".%d.jsonl" % r
            run(shlex.split(args.mpirun) +
                ["-np", "2", exe, "--quiet", "--threads", "1", "--steps",
                 str(args.steps), "--data", tok, "--log-json", log])
            lines, got[(group, name)] = read_steps(log, args.warmup)
            times[(group, name)].append(got[(group, name)])
            last[(group, name)] = lines[-1]
        for group, entries in GROUPS.items():
            baseline = got[(group, next(iter(entries)))]
            for name in entries:
                ratios[(group, name)].append(got[(group, name)] / baseline)
        print("round %d: %s" % (r + 1, ", ".join(
            "%s %.1f ms" % (n, got[(g, n)]) for g, n, _, _ in runs)),
              flush=True)
    result = {
        "model": "zero-model-gen " + " ".join(LLAMA),
        **run_fields(args, cpu, start, date),
        "groups": {},
    }
    for group, entries in GROUPS.items():
        rows = []
        for name, (gen, flags) in entries.items():
            line = last[(group, name)]
            rows.append({
                "name": name,
                "model_flags": " ".join(gen),
                "flags": " ".join(flags),
                "tokens_per_step": line["tokens"],
                "step_ms": statistics.median(times[(group, name)]),
                "ratio": statistics.median(ratios[(group, name)]),
                "peak_bytes": line["peak_bytes"],
                "planned_peak_bytes": line["planned_peak_bytes"],
                "loss": line["loss"],
            })
        result["groups"][group] = rows
    shutil.rmtree(work)
    save_json(args.out, result)
    print("written to %s" % args.out)


if __name__ == "__main__":
    main()
