#!/usr/bin/env python3
"""Trains the module a make() function returns with PyTorch itself and
compares every step's loss with what a compiled, imported step logged.

The module is built again by make() (seeded, so the weights zero-import
wrote), trained in fp32 by torch.optim.AdamW (or Adam) with the
hyperparameters and gradient clipping of the imported model's attributes,
on the batches the runtime reads: consecutive windows of a token file
(--tokens; inputs and targets shifted by one) or consecutive rows of an
.npy pair (--inputs/--labels), the global batch being dimension 0 of the
example arguments.

With --hf DIR in place of --make, the model is the Hugging Face causal LM
in DIR as transformers itself loads it (from_pretrained, or from_config
after torch.manual_seed(--seed) when DIR has no weights), and each step's
loss is transformers' own `model(input_ids=w, labels=w).loss` on the
runtime's windows w of T + 1 tokens: the model shifts the labels itself.
"""

import argparse
import importlib.util
import json
import os
import re
import sys

import numpy as np
import torch

# The runtime's token windows, as the E2E references read them.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "E2E", "Inputs"))
import llama_reference  # noqa: E402


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def load_make(spec):
    path, _, name = spec.rpartition(":")
    s = importlib.util.spec_from_file_location("user_model", path)
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    return getattr(mod, name)


def model_settings(text):
    attr = re.search(r"#zero\.optimizer<([^>]*)>", text).group(1)
    values = dict(kv.split(" = ") for kv in attr.split(", "))
    clip = re.search(r"gradient_clipping ([0-9.e+-]+)", text)
    return values, float(clip.group(1)) if clip else 0.0


def token_batches(path, B, T, dtype, steps):
    for x, y in llama_reference.batches(path, B, T, steps):
        yield x.to(dtype), y.to(dtype)


def npy_batches(xpath, ypath, B, ydtype, steps):
    xs, ys = np.load(xpath), np.load(ypath)
    for step in range(1, steps + 1):
        rows = [((step - 1) * B + i) % len(xs) for i in range(B)]
        yield (torch.from_numpy(xs[rows].astype(np.float32)),
               torch.from_numpy(ys[rows]).to(ydtype))


def hf_model(directory, attn, seed):
    """The model in a Hugging Face directory, loaded by transformers."""
    from transformers import AutoConfig, AutoModelForCausalLM
    kwargs = {"dtype": torch.float32, "use_cache": False}
    if attn:
        kwargs["attn_implementation"] = attn
    if any(f.startswith("model.safetensors") for f in os.listdir(directory)):
        return AutoModelForCausalLM.from_pretrained(directory, **kwargs)
    torch.manual_seed(seed)
    config = AutoConfig.from_pretrained(directory, use_cache=False)
    kwargs.pop("use_cache")
    return AutoModelForCausalLM.from_config(config, **kwargs)


class HFStep(torch.nn.Module):
    """loss(x, y) of a causal LM on the window whose inputs are x and whose
    next tokens are y: transformers' loss with labels=."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, y):
        window = torch.cat([x, y[:, -1:]], dim=1)
        return self.model(input_ids=window, labels=window).loss


def hf_make(args, text):
    ids = re.search(r"%input_ids: tensor<(\d+)x(\d+)xi64>", text)
    example = torch.zeros(int(ids.group(1)), int(ids.group(2)),
                          dtype=torch.long)
    return HFStep(hf_model(args.hf, args.attn, args.seed)), (example,
                                                            example)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--make")
    p.add_argument("--hf", metavar="DIR")
    p.add_argument("--attn")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", required=True, help="the imported .mlir")
    p.add_argument("--log", required=True)
    p.add_argument("--tokens")
    p.add_argument("--inputs")
    p.add_argument("--labels")
    p.add_argument("--loss-output", type=int, default=-1)
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--save-state", metavar="FILE",
                   help="torch.save the trained model's state dict")
    args = p.parse_args()

    torch.set_num_threads(1)
    text = open(args.model).read()
    if args.hf:
        module, example = hf_make(args, text)
    else:
        module, example = load_make(args.make)()
    module.train()
    values, clip = model_settings(text)
    opt_cls = {"adamw": torch.optim.AdamW,
               "adam": torch.optim.Adam}[values["kind"]]
    opt = opt_cls(module.parameters(), lr=float(values["lr"]),
                  betas=(float(values["beta1"]), float(values["beta2"])),
                  eps=float(values["eps"]),
                  weight_decay=float(values["weight_decay"]), foreach=False)
    log = [json.loads(line) for line in open(args.log) if line.strip()]
    B = example[0].shape[0]
    if args.tokens:
        batches = token_batches(args.tokens, B, example[0].shape[1],
                                example[0].dtype, len(log))
    else:
        batches = npy_batches(args.inputs, args.labels, B, example[1].dtype,
                              len(log))
    worst = 0.0
    for (x, y), entry in zip(batches, log):
        opt.zero_grad(set_to_none=True)
        out = module(x, y)
        loss = out[args.loss_output] if isinstance(out, tuple) else out
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(module.parameters(), clip)
        opt.step()
        ref, got = loss.item(), entry["loss"]
        rel = abs(got - ref) / abs(ref)
        worst = max(worst, rel)
        if args.verbose:
            print("step %d: loss %.8f, reference %.8f, relative %.3g" % (
                entry["step"], got, ref, rel))
        if rel > args.rtol:
            fail("step %d: loss %.8f, PyTorch's %.8f: relative difference "
                 "%.3g > %g" % (entry["step"], got, ref, rel, args.rtol))
    if args.save_state:
        model = module.model if args.hf else module
        torch.save({k: v.detach().clone() for k, v in
                    model.state_dict().items()}, args.save_state)
    print("%d steps: losses within %g relative of PyTorch's" % (len(log),
                                                                 args.rtol))
    print("worst relative difference %.2g" % worst)


if __name__ == "__main__":
    main()
