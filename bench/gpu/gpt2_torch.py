#!/usr/bin/env python3
"""One GPT-2 training step in PyTorch eager, the baseline of the zero-mlir
CUDA step (bench/gpu/run.sh runs both on the same GPU).

The model is zero-model-gen's `gpt2` (tools/zero-model-gen): token and
position embeddings, pre-LN blocks (layer norm eps 1e-5, causal multi-head
attention through scaled_dot_product_attention with its default 1/sqrt(D)
scale, a 4x MLP with tanh-approximated GELU), a final layer norm and logits
from the tied token embedding (no lm_head of its own, no bias), mean cross
entropy; no dropout. The optimizer is zero-model-gen's default for gpt2:
torch.optim.AdamW (fused=False, foreach left at its default) with lr 6e-4,
betas (0.9, 0.95), eps 1e-8 and weight decay 0.1 on every parameter.

--dtype bf16 is torch's usual mixed precision, autocast to bf16 over fp32
parameters, gradients and AdamW state (zero-mlir keeps an fp32 master,
moments and 16-bit parameter and gradient copies); fp32 runs in fp32 (TF32
matmuls only with --tf32).

A step is zero_grad, forward, backward and optimizer.step; it is timed with
CUDA events, and the median over --steps steps after --warmup untimed ones
is reported as JSON (stdout, and --json FILE). With --data FILE (nanoGPT's
uint16 tokens) each step takes the batch the zero-mlir driver takes from the
same file (row k is the window of T tokens at k * T, wrapping around; the
targets are shifted by one), uploaded inside the timed step as the driver
does, so the two runs see the same data and their losses compare; without
it every step trains on one fixed batch of random tokens.
"""

import argparse
import json
import math
import statistics
import sys


def build(torch, args):
    nn = torch.nn
    F = torch.nn.functional
    C, H, L, V, T = args.hidden, args.heads, args.layers, args.vocab, args.seq
    proj_std = 0.02 / math.sqrt(2.0 * L)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C, eps=1e-5)
            self.c_attn = nn.Linear(C, 3 * C)
            self.attn_proj = nn.Linear(C, C)
            self.ln_2 = nn.LayerNorm(C, eps=1e-5)
            self.c_fc = nn.Linear(C, 4 * C)
            self.mlp_proj = nn.Linear(4 * C, C)
            for lin, std in ((self.c_attn, 0.02), (self.attn_proj, proj_std),
                             (self.c_fc, 0.02), (self.mlp_proj, proj_std)):
                nn.init.normal_(lin.weight, 0.0, std)
                nn.init.zeros_(lin.bias)

        def forward(self, x):
            B = x.shape[0]
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2)
                       for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).reshape(B, T, C)
            x = x + self.attn_proj(y)
            h = F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")
            return x + self.mlp_proj(h)

    class GPT2(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Parameter(torch.randn(V, C) * 0.02)
            self.wpe = nn.Parameter(torch.randn(T, C) * 0.01)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(C, eps=1e-5)

        def forward(self, tokens, targets):
            x = self.wte[tokens] + self.wpe
            for block in self.h:
                x = block(x)
            logits = self.ln_f(x) @ self.wte.t()
            return F.cross_entropy(logits.float().view(-1, V),
                                   targets.view(-1))

    return GPT2()


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--steps", type=int, default=20,
                   help="timed steps (default 20)")
    p.add_argument("--warmup", type=int, default=3,
                   help="untimed steps first (default 3)")
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--tf32", action="store_true",
                   help="allow TF32 matmuls in fp32 (default: off, as torch)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--data", help="uint16 token file (nanoGPT train.bin)")
    p.add_argument("--profile", help="after the timed steps, profile two "
                   "more with torch.profiler and write the GPU kernel "
                   "table to this file")
    p.add_argument("--json", help="also write the result to this file")
    args = p.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.hidden % args.heads:
        p.error("--steps >= 1, --warmup >= 0, --hidden divisible by --heads")

    try:
        import torch
    except ImportError as e:
        sys.exit("gpt2_torch: PyTorch is not installed (%s)" % e)
    if not torch.cuda.is_available():
        sys.exit("gpt2_torch: no CUDA GPU is available to PyTorch")

    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    dev = torch.device("cuda")
    model = build(torch, args).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95),
                            eps=1e-8, weight_decay=0.1, fused=False)
    B, T = args.batch, args.seq
    if args.data:
        import numpy as np
        data = np.fromfile(args.data, dtype=np.uint16).astype(np.int64)
        if data.size < B * T + 1:
            sys.exit("gpt2_torch: %s holds %d tokens, a batch needs %d" %
                     (args.data, data.size, B * T + 1))
        if int(data.max()) >= args.vocab:
            sys.exit("gpt2_torch: %s has token ids >= --vocab" % args.data)
        offsets = np.arange(T + 1)

        def batch(i):
            k = i * B + np.arange(B)
            start = (k % data.size) * T % data.size
            w = torch.from_numpy(
                data[(start[:, None] + offsets[None, :]) % data.size])
            w = w.pin_memory().to(dev, non_blocking=True)
            return w[:, :-1].contiguous(), w[:, 1:].contiguous()
    else:
        tokens = torch.randint(args.vocab, (B, T + 1), device=dev)
        fixed = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

        def batch(i):
            return fixed
    autocast = torch.autocast("cuda", dtype=torch.bfloat16,
                              enabled=args.dtype == "bf16")

    def step(i):
        x, y = batch(i)
        opt.zero_grad(set_to_none=True)
        with autocast:
            loss = model(x, y)
        loss.backward()
        opt.step()
        return loss

    times, losses = [], []
    for i in range(args.warmup + args.steps):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        loss = step(i)
        stop.record()
        stop.synchronize()
        if i >= args.warmup:
            times.append(start.elapsed_time(stop))
            losses.append(loss.item())
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in range(2):
                step(args.warmup + args.steps + i)
            torch.cuda.synchronize()
        events = prof.key_averages()
        try:
            table = events.table(sort_by="self_device_time_total",
                                 row_limit=200)
        except (AttributeError, KeyError, ValueError):
            table = events.table(sort_by="self_cuda_time_total", row_limit=200)
        with open(args.profile, "w") as f:
            f.write("two steps\n" + table + "\n")
    if not all(math.isfinite(l) for l in losses):
        sys.exit("gpt2_torch: non-finite loss %s" % losses)

    params = sum(t.numel() for t in model.parameters())
    props = torch.cuda.get_device_properties(dev)
    median = statistics.median(times)
    result = {
        "model": "gpt2",
        "params": params,
        "layers": args.layers, "hidden": args.hidden, "heads": args.heads,
        "vocab": args.vocab, "batch": args.batch, "seq": args.seq,
        "dtype": args.dtype,
        "precision": ("autocast bf16, fp32 parameters, gradients and AdamW "
                      "state" if args.dtype == "bf16" else
                      "fp32" + (" (TF32 matmuls)" if args.tf32 else "")),
        "optimizer": "torch.optim.AdamW(lr=6e-4, betas=(0.9, 0.95), "
                     "eps=1e-8, weight_decay=0.1, fused=False)",
        "warmup": args.warmup, "steps": args.steps,
        "step_ms_median": median,
        "step_ms": times,
        "tokens_per_s": args.batch * args.seq / (median / 1000.0),
        "data": args.data or "one fixed batch of random tokens",
        "loss_first": losses[0], "loss_last": losses[-1],
        "device": props.name, "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }
    text = json.dumps(result, indent=2)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
