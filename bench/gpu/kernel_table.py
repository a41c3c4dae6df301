#!/usr/bin/env python3
"""Where a GPT-2 step spends its GPU time, zero-mlir against PyTorch: sums
the kernel times of scripts/gpu-check.sh's profile part by kernel and by
kind of kernel, per step, into one JSON file that bench/update_docs.py
renders (section gpu_profile).

    bench/gpu/kernel_table.py RESULTS-DIR [-o bench/results/gpu_profile.json]

RESULTS-DIR holds ncu_gpt2_{bf16,f32}.csv (Nsight Compute, metric
gpu__time_duration.sum of every kernel of --steps 2) and, if present,
torch_profile_{bf16,fp32}.txt (torch.profiler's kernel table of two steps).
"""

import argparse
import csv
import json
import os
import re
import sys

STEPS = 2  # both profiles cover two training steps

# (kind, pattern on the kernel name), first match wins.
KINDS = [
    ("attention", r"[fF]orwardKernel|[kK]eyGradKernel|[qQ]ueryGradKernel|"
                  r"deltaKernel|flash|attention|fmha"),
    ("matmul", r"gemm|nvjet|cutlass|xmma|cublas"),
    ("optimizer", r"adam|overflow|multi_tensor|Adam|_foreach"),
    ("layer norm", r"layerNorm|layer_norm|GammaBeta|LayerNorm"),
    ("softmax, cross-entropy", r"crossEntropy|SoftMax|softmax|nll_loss|"
                               r"cross_entropy"),
    ("embedding", r"embedding|indexing_backward|bucketSum|histogram|index_"),
    ("bias and other reductions", r"reduceSum|reduce_kernel"),
    ("layout (transpose, gather, concat)", r"gather|copyRows|transpose|"
                                           r"CatArray|permute|Layout"),
]


def kind_of(name):
    for kind, pat in KINDS:
        if re.search(pat, name):
            return kind
    return "elementwise and other"


def ncu(path):
    """Per-step ms by kernel name (template arguments kept, parameters
    dropped)."""
    by_name = {}
    with open(path) as f:
        rows = csv.DictReader(l for l in f if l.startswith('"'))
        for r in rows:
            if r["Metric Name"] != "gpu__time_duration.sum":
                continue
            scale = {"ns": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0,
                     "nsecond": 1e-6, "msecond": 1.0}[r["Metric Unit"]]
            name = re.sub(r"\(.*", "", r["Kernel Name"]).strip()
            name = re.sub(r"^void ", "", name)
            name = name.replace("<unnamed>::", "")
            ms = float(r["Metric Value"].replace(",", "")) * scale
            c, t = by_name.get(name, (0, 0.0))
            by_name[name] = (c + 1, t + ms)
    return {n: (c / STEPS, t / STEPS) for n, (c, t) in by_name.items()}


def torch_table(path):
    """Per-step ms by (truncated) kernel name from torch.profiler's table;
    what the table's row limit left out is reported as one row."""
    text = open(path).read()
    total = re.search(r"Self CUDA time total: ([0-9.]+)(ms|us|s)", text)
    if not total:
        return None
    unit = {"ms": 1.0, "us": 1e-3, "s": 1e3}
    by_name, listed = {}, 0.0
    for line in text.splitlines():
        cols = re.split(r"\s{2,}", line.strip())
        if len(cols) < 11 or not re.match(r"^[0-9.]+(ms|us|s)$", cols[6]):
            continue
        v = re.match(r"^([0-9.]+)(ms|us|s)$", cols[6])
        ms = float(v.group(1)) * unit[v.group(2)] / STEPS
        if ms <= 0:
            continue  # runtime API calls (cudaLaunchKernel, ...), no kernel
        calls = int(cols[10]) / STEPS
        # Names are cut to 55 characters: rows that share one add up.
        c, t = by_name.get(cols[0], (0, 0.0))
        by_name[cols[0]] = (c + calls, t + ms)
        listed += ms
    rest = float(total.group(1)) * unit[total.group(2)] / STEPS - listed
    if rest > 1e-3:
        by_name["(kernels beyond the table's rows)"] = (0, rest)
    return by_name


def summarize(by_name, top):
    kinds = {}
    for name, (_, ms) in by_name.items():
        k = kind_of(name)
        kinds[k] = kinds.get(k, 0.0) + ms
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1][1])
    return {
        "total_ms": sum(ms for _, ms in by_name.values()),
        "launches": sum(c for c, _ in by_name.values()),
        "kinds": dict(sorted(kinds.items(), key=lambda kv: -kv[1])),
        "top": [{"kernel": n, "calls": c, "ms": ms, "kind": kind_of(n)}
                for n, (c, ms) in ranked[:top]],
    }


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("results")
    p.add_argument("-o", "--out")
    p.add_argument("--top", type=int, default=12)
    args = p.parse_args()
    out = {"steps_profiled": STEPS, "dtypes": {}}
    for dt, tdt in (("bf16", "bf16"), ("f32", "fp32")):
        path = os.path.join(args.results, "ncu_gpt2_%s.csv" % dt)
        if not os.path.exists(path):
            continue
        entry = {"zero": summarize(ncu(path), args.top)}
        tpath = os.path.join(args.results, "torch_profile_%s.txt" % tdt)
        if os.path.exists(tpath):
            t = torch_table(tpath)
            if t:
                entry["torch"] = summarize(t, args.top)
        out["dtypes"][tdt] = entry
    if not out["dtypes"]:
        sys.exit("kernel_table: no ncu_gpt2_*.csv in " + args.results)
    text = json.dumps(out, indent=2)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
