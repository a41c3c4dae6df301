#!/usr/bin/env python3
"""The result file of a zero-mlir CUDA step that bench/gpu/run.sh timed:
the median step_ms (the slowest rank's) of the --log-json lines after the
warm-up, tokens/s, and the model FLOPs utilization counted as
gpt2_torch.py counts it (6 x parameters + 12 x layers x hidden x seq FLOPs
a token, over the dense peak of the GPU's name).

    zero_result.py LOG OUT --warmup N --batch B --seq T --dtype D
        --model NAME --params P --layers L --hidden C [--heads H]
        [--kv-heads K] [--ffn F] [--vocab V] [--gpu NAME]
        [--planned-batches JSON]
"""

import argparse
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_torch import peak_tflops  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("log")
    p.add_argument("out")
    for name in ("warmup", "batch", "seq", "params", "layers", "hidden"):
        p.add_argument("--" + name, type=int, required=True)
    for name in ("heads", "kv_heads", "ffn", "vocab"):
        p.add_argument("--" + name.replace("_", "-"), type=int)
    p.add_argument("--dtype", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--gpu", default="")
    p.add_argument("--planned-batches",
                   help="JSON of the batches tried: their planned peaks")
    a = p.parse_args()
    lines = [json.loads(l) for l in open(a.log) if l.strip()]
    timed = lines[a.warmup:]
    if not timed:
        sys.exit("zero_result: no steps after the warm-up in " + a.log)
    ms = [l["step_ms"] for l in timed]
    losses = [l["loss"] for l in timed]
    if not all(math.isfinite(x) for x in losses):
        sys.exit("zero_result: non-finite loss: %s" % losses)
    median = statistics.median(ms)
    tokens_per_s = a.batch * a.seq / (median / 1000.0)
    flops = 6 * a.params + 12 * a.layers * a.hidden * a.seq
    peak = peak_tflops(a.gpu, a.dtype)
    result = {
        "model": a.model, "params": a.params, "layers": a.layers,
        "hidden": a.hidden, "heads": a.heads, "kv_heads": a.kv_heads,
        "ffn": a.ffn,
        "vocab": a.vocab, "batch": a.batch, "seq": a.seq, "dtype": a.dtype,
        "target": "cuda", "warmup": a.warmup, "steps": len(timed),
        "step_ms_median": median, "step_ms": ms,
        "tokens_per_s": tokens_per_s, "flops_per_token": flops,
        "peak_tflops": peak,
        "mfu": tokens_per_s * flops / (peak * 1e12) if peak else None,
        "loss_first": losses[0], "loss_last": losses[-1],
        "skipped_steps": sum(1 for l in timed if l.get("skipped")),
        "peak_bytes": max(l.get("peak_bytes", 0) for l in timed),
        "planned_peak_bytes": max(l.get("planned_peak_bytes", 0)
                                  for l in timed),
        "data": "repository text",
    }
    if a.planned_batches:
        result["planned_batches"] = json.loads(a.planned_batches)
    json.dump(result, open(a.out, "w"), indent=2)
    print("zero-mlir %s: median step %.2f ms, %.0f tokens/s" %
          (a.model, median, tokens_per_s))


if __name__ == "__main__":
    main()
