#!/usr/bin/env python3
"""One GPT-2 or Llama training step in PyTorch, eager or torch.compile'd,
the baselines of the zero-mlir CUDA step (bench/gpu/run.sh runs them all on
the same GPU).

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

--model llama is zero-model-gen's `llama` (--layers, --hidden, --heads,
--kv-heads, --ffn, --vocab, --rope-theta; --tied: the LM head is the token
embedding): RMSNorm (eps 1e-5), rotary q and k (half-split, as Hugging
Face's Llama), grouped-query causal attention, a SwiGLU MLP, no biases,
every weight normal(0, 0.02), AdamW lr 3e-4, betas (0.9, 0.95), eps 1e-8,
weight decay 0.1.

--compile is the torch.compile baseline: the model compiled (default mode),
AdamW with fused=True, and scaled_dot_product_attention held to its flash
backend. --batch auto takes the largest micro batch that fits the GPU: from
--max-batch down, halving after each out-of-memory step.

A step is zero_grad, forward, backward and optimizer.step; it is timed with
CUDA events, and the median over --steps steps after --warmup untimed ones
is reported as JSON (stdout, and --json FILE), with the model FLOPs
utilization: 6 x parameters + 12 x layers x hidden x seq FLOPs a token
(PaLM's count, which nanoGPT's estimate_mfu uses) over --peak-tflops (the
dense bf16 or TF32 tensor-core peak of the GPU's name where it is known).
With --data FILE (nanoGPT's
uint16 tokens) each step takes the batch the zero-mlir driver takes from the
same file (row k is the window of T tokens at k * T, wrapping around; the
targets are shifted by one), uploaded inside the timed step as the driver
does, so the two runs see the same data and their losses compare; without
it every step trains on one fixed batch of random tokens.
"""

import argparse
import contextlib
import gc
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


def build_llama(torch, args):
    nn = torch.nn
    F = torch.nn.functional
    C, H, KV, L, V = args.hidden, args.heads, args.kv_heads, args.layers, \
        args.vocab
    D = C // H

    def linear(n_in, n_out):
        lin = nn.Linear(n_in, n_out, bias=False)
        nn.init.normal_(lin.weight, 0.0, 0.02)
        return lin

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(C))

        def forward(self, x):
            h = x.float()
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5)
            return self.weight * h.to(x.dtype)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm = RMSNorm()
            self.q_proj, self.k_proj = linear(C, H * D), linear(C, KV * D)
            self.v_proj, self.o_proj = linear(C, KV * D), linear(H * D, C)
            self.post_attention_layernorm = RMSNorm()
            self.gate_proj, self.up_proj = linear(C, args.ffn), \
                linear(C, args.ffn)
            self.down_proj = linear(args.ffn, C)

        def forward(self, x, cos, sin):
            B, T = x.shape[:2]
            h = self.input_layernorm(x)
            q = self.q_proj(h).view(B, T, H, D).transpose(1, 2)
            k = self.k_proj(h).view(B, T, KV, D).transpose(1, 2)
            v = self.v_proj(h).view(B, T, KV, D).transpose(1, 2)

            def rotate(t):
                a, b = t[..., :D // 2], t[..., D // 2:]
                return t * cos + torch.cat((-b, a), dim=-1) * sin
            q, k = rotate(q), rotate(k)
            if KV != H:
                k = k.repeat_interleave(H // KV, dim=1)
                v = v.repeat_interleave(H // KV, dim=1)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.o_proj(y.transpose(1, 2).reshape(B, T, C))
            h = self.post_attention_layernorm(x)
            return x + self.down_proj(F.silu(self.gate_proj(h)) *
                                      self.up_proj(h))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Parameter(torch.randn(V, C) * 0.02)
            self.layers = nn.ModuleList(Block() for _ in range(L))
            self.norm = RMSNorm()
            self.lm_head = None if args.tied else linear(C, V)
            inv = 1.0 / (args.rope_theta **
                         (torch.arange(0, D, 2).float() / D))
            angles = torch.outer(torch.arange(args.seq).float(), inv)
            angles = torch.cat((angles, angles), dim=-1)
            self.register_buffer("cos", angles.cos(), persistent=False)
            self.register_buffer("sin", angles.sin(), persistent=False)

        def forward(self, tokens, targets):
            x = self.embed_tokens[tokens]
            cos, sin = self.cos.to(x.dtype), self.sin.to(x.dtype)
            for block in self.layers:
                x = block(x, cos, sin)
            h = self.norm(x)
            logits = (h @ self.embed_tokens.t() if self.lm_head is None
                      else self.lm_head(h))
            return F.cross_entropy(logits.float().view(-1, V),
                                   targets.view(-1))

    return Llama()


# Dense tensor-core peaks (TFLOP/s) by GPU name: bf16, and TF32 for fp32.
PEAKS = (("H200", 989.4, 494.7), ("H100 SXM", 989.4, 494.7),
         ("H100 NVL", 835.0, 417.5), ("H100", 756.0, 378.0),
         ("A100", 312.0, 156.0), ("L4", 121.0, 60.0),
         ("RTX 4090", 165.2, 82.6))


def peak_tflops(name, dtype):
    for key, bf16, tf32 in PEAKS:
        if key in name:
            return bf16 if dtype == "bf16" else tf32
    return None


def measure(torch, args, batch):
    """Builds the model and its optimizer and times --steps steps at this
    micro batch after --warmup; the model, step times, losses and the
    profile table (with --profile)."""
    torch.manual_seed(args.seed)
    dev = torch.device("cuda")
    model = (build if args.model == "gpt2" else build_llama)(torch, args)
    model = model.to(dev)
    opt = torch.optim.AdamW(model.parameters(),
                            lr=6e-4 if args.model == "gpt2" else 3e-4,
                            betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1,
                            fused=args.compile)
    run = torch.compile(model) if args.compile else model
    B, T = batch, args.seq
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
    attention = contextlib.nullcontext()
    if args.compile:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        attention = sdpa_kernel(SDPBackend.FLASH_ATTENTION)

    def step(i):
        x, y = batch(i)
        opt.zero_grad(set_to_none=True)
        with autocast, attention:
            loss = run(x, y)
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
    profile = None
    if args.profile:
        from torch.profiler import ProfilerActivity, profile as profiler
        with profiler(activities=[ProfilerActivity.CUDA]) as prof:
            for i in range(2):
                step(args.warmup + args.steps + i)
            torch.cuda.synchronize()
        events = prof.key_averages()
        try:
            profile = events.table(sort_by="self_device_time_total",
                                   row_limit=200)
        except (AttributeError, KeyError, ValueError):
            profile = events.table(sort_by="self_cuda_time_total",
                                   row_limit=200)
    return model, times, losses, profile


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", choices=["gpt2", "llama"], default="gpt2")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile, fused AdamW and flash attention")
    p.add_argument("--batch", default="8",
                   help="micro batch, or auto: the largest that fits, from "
                   "--max-batch down")
    p.add_argument("--max-batch", type=int, default=64,
                   help="with --batch auto, the first tried (default 64)")
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
    p.add_argument("--kv-heads", type=int, help="llama (default: --heads)")
    p.add_argument("--ffn", type=int, help="llama: MLP width (default 4x)")
    p.add_argument("--rope-theta", type=float, default=500000.0)
    p.add_argument("--tied", action="store_true",
                   help="llama: the LM head is the token embedding")
    p.add_argument("--peak-tflops", type=float,
                   help="the GPU's dense peak for the MFU (default: by name)")
    p.add_argument("--tf32", action="store_true",
                   help="allow TF32 matmuls in fp32 (default: off, as torch)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--data", help="uint16 token file (nanoGPT train.bin)")
    p.add_argument("--profile", help="after the timed steps, profile two "
                   "more with torch.profiler and write the GPU kernel "
                   "table to this file")
    p.add_argument("--json", help="also write the result to this file")
    args = p.parse_args()
    args.kv_heads = args.kv_heads or args.heads
    args.ffn = args.ffn or 4 * args.hidden
    if args.steps < 1 or args.warmup < 0 or args.hidden % args.heads or \
            args.heads % args.kv_heads:
        p.error("--steps >= 1, --warmup >= 0, --hidden divisible by --heads, "
                "--heads by --kv-heads")
    if args.batch != "auto" and not (args.batch.isdigit() and
                                     int(args.batch) > 0):
        p.error("--batch is a positive count or auto")

    try:
        import torch
    except ImportError as e:
        sys.exit("gpt2_torch: PyTorch is not installed (%s)" % e)
    if not torch.cuda.is_available():
        sys.exit("gpt2_torch: no CUDA GPU is available to PyTorch")

    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    if args.batch != "auto":
        model, times, losses, profile = measure(torch, args, int(args.batch))
    else:
        batch = args.max_batch
        while True:
            try:
                model, times, losses, profile = measure(torch, args, batch)
                break
            except torch.cuda.OutOfMemoryError:
                pass
            # Outside the except block, whose traceback holds the failed
            # try's tensors: free them, and the compiled graphs, first.
            gc.collect()
            if args.compile:
                torch._dynamo.reset()
            torch.cuda.empty_cache()
            if batch == 1:
                sys.exit("gpt2_torch: one row does not fit the GPU")
            print("gpt2_torch: batch %d does not fit, trying %d" %
                  (batch, batch // 2), file=sys.stderr)
            batch //= 2
        args.batch = batch
    args.batch = int(args.batch)
    if profile:
        with open(args.profile, "w") as f:
            f.write("two steps\n" + profile + "\n")
    if not all(math.isfinite(l) for l in losses):
        sys.exit("gpt2_torch: non-finite loss %s" % losses)

    params = sum(t.numel() for t in model.parameters())
    props = torch.cuda.get_device_properties(torch.device("cuda"))
    median = statistics.median(times)
    tokens_per_s = args.batch * args.seq / (median / 1000.0)
    flops_per_token = 6 * params + 12 * args.layers * args.hidden * args.seq
    peak = args.peak_tflops or peak_tflops(props.name, args.dtype)
    result = {
        "model": args.model,
        "mode": "torch.compile" if args.compile else "eager",
        "params": params,
        "layers": args.layers, "hidden": args.hidden, "heads": args.heads,
        "kv_heads": args.kv_heads, "ffn": args.ffn,
        "vocab": args.vocab, "batch": args.batch, "seq": args.seq,
        "dtype": args.dtype,
        "precision": ("autocast bf16, fp32 parameters, gradients and AdamW "
                      "state" if args.dtype == "bf16" else
                      "fp32" + (" (TF32 matmuls)" if args.tf32 else "")),
        "optimizer": "torch.optim.AdamW(lr=%g, betas=(0.9, 0.95), "
                     "eps=1e-8, weight_decay=0.1, fused=%s)" % (
                         6e-4 if args.model == "gpt2" else 3e-4,
                         args.compile),
        "warmup": args.warmup, "steps": args.steps,
        "step_ms_median": median,
        "step_ms": times,
        "tokens_per_s": tokens_per_s,
        "flops_per_token": flops_per_token,
        "peak_tflops": peak,
        "mfu": (tokens_per_s * flops_per_token / (peak * 1e12)
                if peak else None),
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
