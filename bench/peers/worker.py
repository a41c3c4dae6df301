#!/usr/bin/env python3
"""One peer's training run for bench/peers/peers.py (runs in the peers venv).

  worker.py torch --compile 0|1 ...     one process, torch eager or
                                         torch.compile
  worker.py deepspeed --stage S ...     one DeepSpeed rank; the launcher sets
                                         RANK, WORLD_SIZE, MASTER_ADDR and
                                         MASTER_PORT (gloo, CPU accelerator)

Both build transformers' GPT2LMHeadModel (gelu_new, LayerNorm eps 1e-5, no
dropout, head tied to the token embedding), load the initial weights that
our program exported (Hugging Face names), and train it with
torch.optim.AdamW (the model's lr, betas, eps, weight decay; bias
correction) on the batches our runtime's --data reader gives: global row k
of step s is the window at ((s - 1) * B + k) * T of the token file, its
labels the next tokens. The loss is the mean cross-entropy over the global
batch; a DeepSpeed rank takes its contiguous half of the rows, DeepSpeed
averages the gradients, and the logged loss is the mean over the ranks.

Writes --out (JSON): the losses, each step's wall time, the absolute time
the first step ended, and the process's peak RSS.
"""

import argparse
import json
import os
import resource
import sys
import time


def batches(tokens, B, T, steps, rows):
    """Steps 1..steps of the --data reader; only the rows in `rows`."""
    import numpy as np
    import torch
    n = len(tokens)
    for step in range(1, steps + 1):
        first = (step - 1) * B
        x = np.empty((len(rows), T), np.int64)
        y = np.empty((len(rows), T), np.int64)
        for i, r in enumerate(rows):
            start = ((first + r) % n) * T % n
            idx = (start + np.arange(T + 1)) % n
            x[i], y[i] = tokens[idx[:-1]], tokens[idx[1:]]
        yield torch.from_numpy(x), torch.from_numpy(y)


def build_model(args):
    import torch
    from safetensors.torch import load_file
    from transformers import GPT2Config, GPT2LMHeadModel
    config = GPT2Config(
        vocab_size=args.vocab, n_positions=args.seq, n_embd=args.hidden,
        n_layer=args.layers, n_head=args.heads,
        activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0, layer_norm_epsilon=1e-5, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=None)
    model = GPT2LMHeadModel(config).float()
    state = load_file(args.init)
    missing, unexpected = model.load_state_dict(state, strict=False)
    # The head is the token embedding (tied); nothing else may be missing.
    missing = [m for m in missing if m != "lm_head.weight"]
    if missing or unexpected:
        raise SystemExit("weights do not match the model: missing %s, "
                         "unexpected %s" % (missing, unexpected))
    if model.lm_head.weight.data_ptr() != \
            model.transformer.wte.weight.data_ptr():
        raise SystemExit("the head is not tied to the token embedding")
    model.train()
    return model


def loss_fn(model, x, y):
    import torch.nn.functional as F
    logits = model(input_ids=x).logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                           y.reshape(-1))


def adamw(params, args):
    import torch
    return torch.optim.AdamW(params, lr=args.lr, betas=(args.beta1,
                                                        args.beta2),
                             eps=args.eps, weight_decay=args.weight_decay)


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_torch(args, tokens):
    import torch
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = build_model(args)
    opt = adamw(model.parameters(), args)
    step_fn = loss_fn
    if args.compile:
        step_fn = torch.compile(loss_fn)
    losses, times, first_end = [], [], None
    rows = list(range(args.batch))
    for x, y in batches(tokens, args.batch, args.seq, args.steps, rows):
        t = time.perf_counter()
        loss = step_fn(model, x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        value = loss.item()
        times.append((time.perf_counter() - t) * 1e3)
        if first_end is None:
            first_end = time.time()
        losses.append(value)
    return {"losses": losses, "step_ms": times, "first_step_end": first_end,
            "peak_rss_bytes": peak_rss_bytes(), "threads": args.threads}


def run_deepspeed(args, tokens):
    import torch
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    import deepspeed
    import deepspeed.comm as dist
    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch % world:
        raise SystemExit("batch %d does not split over %d ranks" %
                         (args.batch, world))
    local = args.batch // world
    model = build_model(args)
    config = {
        "train_batch_size": args.batch,
        "train_micro_batch_size_per_gpu": local,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": 0.0,
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
        "zero_optimization": {"stage": args.stage},
    }
    engine, _, _, _ = deepspeed.initialize(
        model=model, optimizer=adamw(model.parameters(), args),
        config=config)
    losses, times, first_end = [], [], None
    rows = list(range(rank * local, (rank + 1) * local))
    for x, y in batches(tokens, args.batch, args.seq, args.steps, rows):
        t = time.perf_counter()
        loss = loss_fn(engine, x, y)
        engine.backward(loss)
        engine.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        value = mean.item() / world
        times.append((time.perf_counter() - t) * 1e3)
        if first_end is None:
            first_end = time.time()
        losses.append(value)
    doc = {"losses": losses, "step_ms": times, "first_step_end": first_end,
           "peak_rss_bytes": peak_rss_bytes(), "threads": args.threads,
           "rank": rank, "world": world}
    dist.barrier()
    return doc


def versions():
    out = {"python": sys.version.split()[0]}
    for name in ("torch", "deepspeed", "transformers", "numpy"):
        try:
            out[name] = __import__(name).__version__
        except ImportError:
            pass
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("system", choices=["torch", "deepspeed", "versions"])
    p.add_argument("--compile", type=int, default=0)
    p.add_argument("--stage", type=int, default=3)
    p.add_argument("--init")
    p.add_argument("--tokens")
    p.add_argument("--layers", type=int)
    p.add_argument("--hidden", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--vocab", type=int)
    p.add_argument("--seq", type=int)
    p.add_argument("--batch", type=int)
    p.add_argument("--lr", type=float)
    p.add_argument("--beta1", type=float)
    p.add_argument("--beta2", type=float)
    p.add_argument("--eps", type=float)
    p.add_argument("--weight-decay", type=float)
    p.add_argument("--steps", type=int)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    if args.system == "versions":
        doc = versions()
    else:
        import numpy as np
        tokens = np.fromfile(args.tokens, dtype="<u2").astype(np.int64)
        doc = (run_torch if args.system == "torch" else run_deepspeed)(
            args, tokens)
    with open(args.out, "w") as f:
        json.dump(doc, f)


if __name__ == "__main__":
    main()
