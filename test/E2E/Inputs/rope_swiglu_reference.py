#!/usr/bin/env python3
"""A PyTorch implementation of Inputs/rope-swiglu.mlir in float64 with
Hugging Face Llama's rotary embedding (LlamaRotaryEmbedding's fp32 inverse
frequencies, angles, cosines and sines, then apply_rotary_pos_emb), a SwiGLU
feed-forward (silu(gate) * up) and torch.optim.Adam, on the executable's data
order (consecutive rows of the global batch, wrapping). Compares the losses
of --log and the weights of --final, starting from --init."""

import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_replay  # noqa: E402


def rotate_half(x):
    x1 = x[..., :x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotary_cos_sin(dim, base, seq, dtype):
    """LlamaRotaryEmbedding: fp32 throughout, then cast to the input dtype."""
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64)
                                .float() / dim))
    position_ids = torch.arange(seq)[None, :]
    inv_freq_expanded = inv_freq[None, :, None].float().expand(1, -1, 1)
    freqs = (inv_freq_expanded.float()
             @ position_ids[:, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def main():
    args = torch_replay.parse_args()

    text = open(args.model).read()
    lr = float(re.search(r"lr = ([0-9.e+-]+)", text).group(1))
    batch, features = map(int, re.search(
        r"%x: tensor<(\d+)x(\d+)xf32>", text).groups())
    _, heads, seq, dim = map(int, re.search(
        r"nn.rope %\w+ theta [0-9.e+-]+ : tensor<(\d+)x(\d+)x(\d+)x(\d+)xf32>",
        text).groups())
    theta = float(re.search(r"nn.rope %\w+ theta ([0-9.e+-]+)", text).group(1))

    names = ["proj.weight", "gate.weight", "up.weight", "head.weight"]
    params = torch_replay.load_params(args.init, names)
    opt = torch.optim.Adam(params.values(), lr=lr)
    cos, sin = rotary_cos_sin(dim, theta, seq, torch.float64)

    def loss_of(x, y):
        h = (x @ params["proj.weight"]).view(batch, heads, seq, dim)
        r = (h * cos + rotate_half(h) * sin).reshape(batch, features)
        s = (torch.nn.functional.silu(r @ params["gate.weight"])
             * (r @ params["up.weight"]))
        return torch.nn.functional.cross_entropy(s @ params["head.weight"], y)

    steps, worst = torch_replay.replay(args, batch, opt, loss_of)
    worst_weight = torch_replay.weight_difference(args.final, params, names)
    if worst_weight > args.tol:
        print("FAIL: weights differ from the reference by %g" % worst_weight)
        sys.exit(1)
    print("%d steps match the PyTorch reference: losses within %g relative, "
          "weights within %g" % (steps, args.tol, args.tol))
    print("worst loss difference %.2g relative, weight difference %.2g" %
          (worst, worst_weight))


if __name__ == "__main__":
    main()
