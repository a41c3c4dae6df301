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

import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_replay  # noqa: E402


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
    args = torch_replay.parse_args()

    text = open(args.model).read()
    eps = float(re.search(r"nn\.rms_norm .* eps (\S+)", text).group(1))
    lr = float(re.search(r"lr = ([^,>]+)", text).group(1))
    names = ["fc1.weight", "norm.weight", "fc2.weight"]
    params = torch_replay.load_params(args.init, names)
    hidden = params["norm.weight"].shape[0]
    norm = LlamaRMSNorm(hidden, eps)
    with torch.no_grad():
        norm.weight.copy_(params["norm.weight"])
    params["norm.weight"] = norm.weight
    # The executable's defaults: betas (0.9, 0.999), eps 1e-8, no decay.
    opt = torch.optim.Adam(params.values(), lr=lr)
    batch = int(re.search(r"%x: tensor<(\d+)x", text).group(1))

    def loss_of(x, y):
        h = x @ params["fc1.weight"]
        n = norm(h.reshape(4, batch // 4, hidden)).reshape(batch, hidden)
        logits = n @ params["fc2.weight"].T
        return torch.nn.functional.cross_entropy(logits, y)

    steps, _ = torch_replay.replay(args, batch, opt, loss_of)
    worst = torch_replay.weight_difference(args.final, params, names)
    if worst > args.tol:
        print("FAIL: weights differ from the reference by %g" % worst)
        sys.exit(1)
    moved = (params["norm.weight"].detach() - 1).abs().max().item()
    print("%d steps match the PyTorch LlamaRMSNorm reference: losses within "
          "%g relative, weights within %g; the norm weight moved by %.3g" %
          (steps, args.tol, args.tol, moved))


if __name__ == "__main__":
    main()
