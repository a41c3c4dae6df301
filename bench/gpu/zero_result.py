#!/usr/bin/env python3
"""The result file of a zero-mlir CUDA step that bench/gpu/run.sh timed:
the median step_ms (the slowest rank's) of the --log-json lines after the
warm-up, tokens/s, and the model FLOPs utilization counted as
gpt2_torch.py counts it (6 x parameters + 12 x layers x hidden x seq FLOPs
a token, over the dense peak of the GPU's name).

    zero_result.py LOG OUT --warmup N --batch B --seq T --dtype D
        --model gpt2|llama --layers L --hidden C --heads H --vocab V
        [--kv-heads K --ffn F --tied] [--gpu NAME] [--planned-batches JSON]

The parameters are counted from the dimensions as zero-model-gen builds
the model (GPT-2: tied, positions = seq, biases; Llama: no biases), the
unpadded model's, as gpt2_torch.py counts PyTorch's.
"""

import argparse
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_torch import peak_tflops  # noqa: E402


def params_of(a):
    """The model's parameters, from its dimensions."""
    C, L, V = a.hidden, a.layers, a.vocab
    if a.model == "gpt2":
        # wte, wpe, per block two layer norms, c_attn, attn_proj, c_fc and
        # mlp_proj with biases, and ln_f.
        return V * C + a.seq * C + L * (12 * C * C + 13 * C) + 2 * C
    if not a.kv_heads or not a.ffn:
        sys.exit("zero_result: --model llama needs --kv-heads and --ffn")
    D = C // a.heads
    block = (2 * C * a.heads * D + 2 * C * a.kv_heads * D + 3 * C * a.ffn +
             2 * C)
    return V * C * (1 if a.tied else 2) + L * block + C


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("log")
    p.add_argument("out")
    for name in ("warmup", "batch", "seq", "layers", "hidden", "heads",
                 "vocab"):
        p.add_argument("--" + name, type=int, required=True)
    p.add_argument("--kv-heads", type=int)
    p.add_argument("--ffn", type=int)
    p.add_argument("--tied", action="store_true")
    p.add_argument("--dtype", required=True)
    p.add_argument("--model", choices=["gpt2", "llama"], required=True)
    p.add_argument("--gpu", default="")
    p.add_argument("--attention-precision", default="fp32",
                   choices=["fp32", "16bit"],
                   help="train's --attention-precision of the run")
    p.add_argument("--cuda-graphs", action="store_true",
                   help="the run used train's --cuda-graphs")
    p.add_argument("--planned-batches",
                   help="JSON of the batches tried: their planned peaks")
    a = p.parse_args()
    a.params = params_of(a)
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
        "target": "cuda", "attention_precision": a.attention_precision,
        "cuda_graphs": a.cuda_graphs,
        "warmup": a.warmup, "steps": len(timed),
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
