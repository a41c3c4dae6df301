#!/usr/bin/env python3
"""The CPU roofline of one of our training steps, per op family.

The bound of an op is its FLOPs at the calibrated GEMM rate (matmuls,
attention) or its bytes at the calibrated STREAM-triad bandwidth (every
other kernel), the larger of the two where it has both; FLOPs and bytes are
the cost model's (`zero-opt --zero-report=... trace=FILE`: the predicted
timeline's per-op `flops` and `bytes`, rank 0). The rates are
zrt-bench-calibrate's per-rank figures for the run's rank count
(bench/results/calibration_npN.json from `ONLY=calibrate bench/run.sh`),
else the `cpu` preset's row, which holds the last calibration. A
calibration at the model's own matmuls (zrt-bench-calibrate --gemm-shapes,
as bench/peers/peers.py runs it) bounds them at the rate the GEMM library
reaches on those shapes; its `fma_peak_flops` is the core's ceiling.

Measured per family: the kernels' spans in the runtime's `--trace` files
(every rank, the steps after the warm-up, mean per step), the time blocked
in `wait ...` spans (communication, bound 0), and the rest of the step span
(between kernels: the runtime's own work, bound 0).

  roofline.py --trace run.trace.rank0.json [...] --predicted p.json
              [--calibration calibration_np2.json] [--warmup 5]
"""

import argparse
import json
import os
import re
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PRESET = os.path.join(ROOT, "lib", "Dialect", "Zero", "Analysis",
                      "CpuPresetShares.inc")

FAMILIES = {
    "matmul": "matmul",
    "attention": "attention", "attention_grad": "attention",
    "layer_norm": "layer norm", "layer_norm_grad": "layer norm",
    "gelu": "GELU", "gelu_grad": "GELU",
    "softmax_cross_entropy": "cross-entropy",
    "softmax_cross_entropy_grad": "cross-entropy",
    "embedding": "embedding", "embedding_grad": "embedding",
    "add": "elementwise and sums", "reduce_sum": "elementwise and sums",
    "fill": "elementwise and sums", "mul": "elementwise and sums",
    "transpose": "layout (transpose, split, concat)",
    "split": "layout (transpose, split, concat)",
    "concat": "layout (transpose, split, concat)",
    "adam": "optimizer (Adam, overflow check)",
    "check_overflow": "optimizer (Adam, overflow check)",
    "update_loss_scale": "optimizer (Adam, overflow check)",
}
WAITS = "communication (waits)"
BETWEEN = "between kernels (runtime)"
ORDER = ["matmul", "attention", "layer norm", "GELU", "cross-entropy",
         "embedding", "elementwise and sums",
         "layout (transpose, split, concat)",
         "optimizer (Adam, overflow check)", WAITS, BETWEEN]


def family(name):
    base = re.sub(r"^(nn\.|zero\.|zrt_)", "", name.split(" ")[0])
    return FAMILIES.get(base, base)


def calibration(path, ranks=2):
    """GEMM FLOP/s and triad bytes/s of one rank of `ranks`."""
    if path and os.path.exists(path):
        doc = json.load(open(path))
        cal = {"gemm_flops": doc["gemm_flops"],
               "memory_bandwidth": doc["memory_bandwidth"],
               "source": "zrt-bench-calibrate, " + os.path.basename(path)}
        for key in ("gemm_shapes", "fma_peak_flops"):
            if key in doc:
                cal[key] = doc[key]
        return cal
    text = open(PRESET).read()
    for row in re.findall(r"\{([^{}]*)\}", text):
        fields = dict(re.findall(r"/\*(\w+)=\*/([-+.\deE]+)", row))
        if int(float(fields.get("ranks", -1))) == ranks:
            return {"gemm_flops": float(fields["gemmFlops"]),
                    "memory_bandwidth": float(fields["memoryBandwidth"]),
                    "source": "the cpu preset's row, the last calibration"}
    raise SystemExit("no calibration for %d ranks in %s" % (ranks, PRESET))


def bounds(predicted, cal):
    """Per family: FLOPs, bytes and bound (ms) of rank 0's predicted step."""
    doc = json.load(open(predicted))
    out = {}
    for e in doc["traceEvents"]:
        if e.get("ph") != "X" or e.get("pid") != 0 or \
                e.get("cat") != "compute":
            continue
        # "complete ..." is the reduction the cost model puts after a
        # reduce-scatter; the runtime's collective does it (in the waits).
        if e["name"].startswith("complete"):
            continue
        a = e.get("args", {})
        flops, nbytes = a.get("flops", 0), a.get("bytes", 0)
        t = nbytes / cal["memory_bandwidth"]
        if flops:
            t = max(t, flops / cal["gemm_flops"])
        f = out.setdefault(family(e["name"]),
                           {"flops": 0, "bytes": 0, "bound_ms": 0.0})
        f["flops"] += flops
        f["bytes"] += nbytes
        f["bound_ms"] += t * 1e3
    return out


def measured(traces, warmup):
    """Per family: mean ms per measured step over ranks and steps."""
    per_rank = []
    for path in traces:
        events = json.load(open(path))["traceEvents"]
        steps = sorted((e for e in events if e.get("ph") == "X" and
                        e["name"].startswith("step ")),
                       key=lambda e: e["ts"])[warmup:]
        spans = sorted((e for e in events if e.get("ph") == "X" and
                        (e.get("cat") == "kernel" or
                         e["name"].startswith("wait"))),
                       key=lambda e: e["ts"])
        sums = {}
        total = 0.0
        i = 0
        for s in steps:
            lo, hi = s["ts"], s["ts"] + s["dur"]
            total += s["dur"]
            inside = 0.0
            while i < len(spans) and spans[i]["ts"] < lo:
                i += 1
            j = i
            while j < len(spans) and spans[j]["ts"] < hi:
                e = spans[j]
                f = WAITS if e["name"].startswith("wait") else \
                    family(e["name"])
                sums[f] = sums.get(f, 0.0) + e["dur"]
                inside += e["dur"]
                j += 1
            sums[BETWEEN] = sums.get(BETWEEN, 0.0) + s["dur"] - inside
        n = max(len(steps), 1)
        per_rank.append(({k: v / n / 1e3 for k, v in sums.items()},
                         total / n / 1e3))
    fams = set().union(*(r[0] for r in per_rank))
    mean = {f: statistics.mean(r[0].get(f, 0.0) for r in per_rank)
            for f in fams}
    return mean, statistics.mean(r[1] for r in per_rank)


def analyze(traces, predicted, cal_path, warmup, step_ms=None, ranks=2):
    cal = cal_path if isinstance(cal_path, dict) else \
        calibration(cal_path, ranks)
    b = bounds(predicted, cal)
    m, trace_step = measured(traces, warmup)
    rows = []
    for f in ORDER + sorted((set(b) | set(m)) - set(ORDER)):
        if f not in b and f not in m:
            continue
        bound = b.get(f, {}).get("bound_ms", 0.0)
        got = m.get(f, 0.0)
        rows.append({"family": f, "measured_ms": got, "bound_ms": bound,
                     "flops": b.get(f, {}).get("flops", 0),
                     "bytes": b.get(f, {}).get("bytes", 0),
                     "measured_over_bound": got / bound if bound > 0
                     else None,
                     "excess_ms": got - bound})
    total_bound = sum(r["bound_ms"] for r in rows)
    step = step_ms if step_ms is not None else trace_step
    return {"calibration": cal, "bound_ms": total_bound,
            "step_ms": step, "trace_step_ms": trace_step,
            "measured_over_bound": step / total_bound,
            "flops": sum(r["flops"] for r in rows),
            "families": rows}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--trace", action="append", required=True)
    p.add_argument("--predicted", required=True)
    p.add_argument("--calibration")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--warmup", type=int, default=5)
    args = p.parse_args()
    doc = analyze(args.trace, args.predicted, args.calibration, args.warmup,
                  ranks=args.ranks)
    print("bound %.2f ms, traced step %.2f ms, measured / bound %.3f" % (
        doc["bound_ms"], doc["trace_step_ms"], doc["measured_over_bound"]))
    for r in doc["families"]:
        print("%-36s %9.3f ms  bound %9.3f ms  %s" % (
            r["family"], r["measured_ms"], r["bound_ms"],
            "%.2fx" % r["measured_over_bound"]
            if r["measured_over_bound"] else "-"))


if __name__ == "__main__":
    main()
