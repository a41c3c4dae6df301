#!/usr/bin/env python3
"""A PyTorch reference of test/E2E/rms-norm-torch.test's model: a bias-free
linear layer, Hugging Face's LlamaRMSNorm over [4, 4, hidden] (the batch
reshaped to three dimensions), a bias-free output layer in nn.Linear's
[out, in] layout and the mean softmax cross-entropy, trained with
torch.optim.Adam on the same data order as the executable (consecutive rows
of the global batch, wrapping). Float64 and autograd: the gradients come
from PyTorch, not from a hand-written backward. Reads the initial weights
the executable exported and compares the losses of --log and the weights of
--final."""

import argparse
import json
import os
import re
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mlp_reference import load_safetensors  # noqa: E402


class LlamaRMSNorm(torch.nn.Module):
    """transformers.models.llama.modeling_llama.LlamaRMSNorm; the upcast is
    to float64 here (the reference's dtype) instead of float32."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float64)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance +
                                                    self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--init", required=True)
    p.add_argument("--x", required=True)
    p.add_argument("--y", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--final", required=True)
    p.add_argument("--tol", type=float, default=1e-5)
    args = p.parse_args()

    text = open(args.model).read()
    eps = float(re.search(r"nn\.rms_norm .* eps (\S+)", text).group(1))
    lr = float(re.search(r"lr = ([^,>]+)", text).group(1))
    init = load_safetensors(args.init)
    names = ["fc1.weight", "norm.weight", "fc2.weight"]
    params = {n: torch.tensor(init[n], dtype=torch.float64,
                              requires_grad=True) for n in names}
    hidden = params["norm.weight"].shape[0]
    norm = LlamaRMSNorm(hidden, eps)
    with torch.no_grad():
        norm.weight.copy_(params["norm.weight"])
    params["norm.weight"] = norm.weight
    # The executable's defaults: betas (0.9, 0.999), eps 1e-8, no decay.
    opt = torch.optim.Adam(params.values(), lr=lr)
    x_all = torch.tensor(np.load(args.x), dtype=torch.float64)
    y_all = torch.tensor(np.load(args.y).astype(np.int64))
    log = [json.loads(line) for line in open(args.log)]
    batch = int(re.search(r"%x: tensor<(\d+)x", text).group(1))

    for step, entry in enumerate(log, start=1):
        rows = [((step - 1) * batch + i) % len(x_all) for i in range(batch)]
        x, y = x_all[rows], y_all[rows]
        h = x @ params["fc1.weight"]
        n = norm(h.reshape(4, batch // 4, hidden)).reshape(batch, hidden)
        logits = n @ params["fc2.weight"].T
        loss = torch.nn.functional.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        diff = abs(entry["loss"] - loss.item()) / abs(loss.item())
        if diff > args.tol:
            print("FAIL: step %d: loss %.9g, reference %.9g" %
                  (step, entry["loss"], loss.item()))
            sys.exit(1)

    final = load_safetensors(args.final)
    for n in names:
        got = torch.tensor(final[n], dtype=torch.float64)
        worst = (got - params[n].detach()).abs().max().item()
        if worst > args.tol:
            print("FAIL: %s differs from the reference by %g" % (n, worst))
            sys.exit(1)
    moved = (params["norm.weight"].detach() - 1).abs().max().item()
    print("%d steps match the PyTorch LlamaRMSNorm reference: losses within "
          "%g relative, weights within %g; the norm weight moved by %.3g" %
          (len(log), args.tol, args.tol, moved))


if __name__ == "__main__":
    main()
