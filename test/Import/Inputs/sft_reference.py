#!/usr/bin/env python3
"""Supervised fine-tuning batches and their PyTorch reference.

  sft_reference.py batches IDS LABELS --rows N --seq T --seed S
      Random token ids [N, T] and their labels: the ids, -100 on a random
      prefix of each row (the prompt; lengths differ row to row, one row
      masked whole), as .npy int64.

  sft_reference.py check --hf DIR --model STEP.mlir --inputs IDS
                         --labels LABELS --log LOG --world W --micro K
      Trains the Hugging Face causal LM in DIR (transformers'
      from_pretrained, fp32) with torch.optim on the rows the runtime reads
      (global batch g = consecutive rows, wrapping) and compares each step
      of LOG (the run's --log-json) with it. The reference loss is the
      token mean over the global batch: (the sum of the cross-entropies of
      its valid labels, shifted as a causal LM shifts them) / (their
      count), whose gradient the optimizer takes. Each `loss` must be
      within --atol of it, and each `tokens` equal to that count. The
      per-micro-batch mean, the mean over the W x K micro batches (rank r
      of micro step m reads rows m*W*b + r*b, b = g / (W*K)) of each one's
      own token mean (a micro batch without a valid label adds 0), as
      gradient accumulation computed it before the Trainer counted
      num_items_in_batch, is computed on the same weights:
      the test fails unless it differs from the token mean, and from the
      run's loss, by more than --apart on at least one step.
"""

import argparse
import json
import re
import sys

import numpy as np
import torch


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def batches(args):
    rng = np.random.default_rng(args.seed)
    ids = rng.integers(0, 256, (args.rows, args.seq), dtype=np.int64)
    labels = ids.copy()
    prompts = rng.integers(1, args.seq - 1, args.rows)
    prompts[args.rows // 3] = args.seq
    for row, length in enumerate(prompts):
        labels[row, :length] = -100
    np.save(args.ids, ids)
    np.save(args.labels, labels)


def optimizer(model, text):
    attr = re.search(r"#zero\.optimizer<([^>]*)>", text).group(1)
    values = dict(kv.split(" = ") for kv in attr.split(", "))
    cls = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam}[values["kind"]]
    clip = re.search(r"gradient_clipping ([0-9.e+-]+)", text)
    return cls(model.parameters(), lr=float(values["lr"]),
               betas=(float(values["beta1"]), float(values["beta2"])),
               eps=float(values["eps"]),
               weight_decay=float(values["weight_decay"]),
               foreach=False), float(clip.group(1)) if clip else 0.0


def token_losses(model, ids, labels):
    """Each shifted label's cross-entropy (0 where ignored) and whether it
    counts."""
    logits = model(input_ids=ids).logits.float()[:, :-1]
    target = labels[:, 1:]
    loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
        ignore_index=-100, reduction="none").view(target.shape)
    return loss, target != -100


def check(args):
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(
        args.hf, dtype=torch.float32, use_cache=False)
    model.train()
    opt, clip = optimizer(model, open(args.model).read())
    xs, ys = np.load(args.inputs), np.load(args.labels)
    log = [json.loads(line) for line in open(args.log) if line.strip()]
    g = int(re.search(r"%input_ids: tensor<(\d+)x",
                      open(args.model).read()).group(1))
    micro = args.world * args.micro
    b = g // micro
    worst, apart, counts = 0.0, [], []
    for step, entry in enumerate(log, start=1):
        rows = [((step - 1) * g + i) % len(xs) for i in range(g)]
        ids = torch.from_numpy(xs[rows])
        labels = torch.from_numpy(ys[rows])
        opt.zero_grad(set_to_none=True)
        loss, valid = token_losses(model, ids, labels)
        count = int(valid.sum())
        ref = loss.sum() / count
        # Micro batch (m, r) is rows m*W*b + r*b .. + b: consecutive slices
        # of b rows, in that order.
        with torch.no_grad():
            means = [float(loss[i:i + b].sum() / valid[i:i + b].sum())
                     for i in range(0, g, b) if valid[i:i + b].any()]
        per_micro = sum(means) / micro
        ref.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        ref = float(ref)
        got = entry["loss"]
        diff = abs(got - ref)
        worst = max(worst, diff)
        if args.verbose:
            print("step %d: loss %.8f, token mean %.8f, per-micro-batch "
                  "mean %.8f, tokens %d" % (step, got, ref, per_micro, count))
        if diff > args.atol:
            fail("step %d: loss %.8f, the token mean over the global batch "
                 "%.8f: difference %.3g > %g" % (step, got, ref, diff,
                                                 args.atol))
        if entry["tokens"] != count:
            fail("step %d: tokens %s, the global batch has %d valid labels"
                 % (step, entry["tokens"], count))
        counts.append(count)
        if abs(per_micro - ref) > args.apart and \
                abs(per_micro - got) > args.apart:
            apart.append(abs(per_micro - ref))
    print("%d steps: losses within %g of the token mean over the global "
          "batch" % (len(log), args.atol))
    print("tokens per step: %s" % " ".join(map(str, counts)))
    if not apart:
        fail("the per-micro-batch mean is within %g of the token mean at "
             "every step: the test cannot tell them apart" % args.apart)
    print("the per-micro-batch mean differs by more than %g at %d step(s) "
          "(up to %.2g)" % (args.apart, len(apart), max(apart)))
    print("worst difference %.2g" % worst)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("batches")
    s.add_argument("ids")
    s.add_argument("labels")
    s.add_argument("--rows", type=int, required=True)
    s.add_argument("--seq", type=int, required=True)
    s.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("check")
    c.add_argument("--hf", required=True)
    c.add_argument("--model", required=True)
    c.add_argument("--inputs", required=True)
    c.add_argument("--labels", required=True)
    c.add_argument("--log", required=True)
    c.add_argument("--world", type=int, required=True)
    c.add_argument("--micro", type=int, required=True)
    c.add_argument("--atol", type=float, default=1e-5)
    c.add_argument("--apart", type=float, default=1e-4)
    c.add_argument("--verbose", action="store_true")
    args = p.parse_args()
    {"batches": batches, "check": check}[args.cmd](args)


if __name__ == "__main__":
    main()
