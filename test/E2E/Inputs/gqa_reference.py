#!/usr/bin/env python3
"""One causal attention layer whose key/value heads are shared by groups of
query heads, projected to class logits:

  gqa_reference.py model --kv-heads N -o model.mlir
writes it as a zero train step (nn.attention with kv_heads = N of 4 query
heads; 4 is multi-head attention, 1 multi-query);

  gqa_reference.py check --model model.mlir --init ... --log ... --final ...
trains the same layer in PyTorch (float64, autograd; key/value heads shared
as Hugging Face's Llama shares them, repeat_kv) with torch.optim.Adam on the
executable's data order (consecutive rows of the global batch, wrapping),
from the executable's exported initial weights, and compares its logged
losses and final weights."""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_replay  # noqa: E402
from mlp_reference import optimizer  # noqa: E402


BATCH, SEQ, FEATURES, HEADS, HEAD_DIM, CLASSES = 4, 8, 16, 4, 8, 5

MODEL = """\
zero.param @wq : tensor<{c}x{hd}xf32> init normal std 0.3
zero.param @wk : tensor<{c}x{kvd}xf32> init normal std 0.3
zero.param @wv : tensor<{c}x{kvd}xf32> init normal std 0.3
zero.param @wo : tensor<{flat}x{classes}xf32> init normal std 0.1
zero.train_step @step(%x: tensor<{b}x{t}x{c}xf32>, %y: tensor<{b}xi64>)
    optimizer #zero.optimizer<kind = adam, lr = 1.0e-2>
    precision #zero.precision<kind = fp32> {{
  %wq = zero.get_param @wq : tensor<{c}x{hd}xf32>
  %wk = zero.get_param @wk : tensor<{c}x{kvd}xf32>
  %wv = zero.get_param @wv : tensor<{c}x{kvd}xf32>
  %wo = zero.get_param @wo : tensor<{flat}x{classes}xf32>
  %q = nn.matmul %x, %wq : tensor<{b}x{t}x{c}xf32>, tensor<{c}x{hd}xf32> -> tensor<{b}x{t}x{hd}xf32>
  %k = nn.matmul %x, %wk : tensor<{b}x{t}x{c}xf32>, tensor<{c}x{kvd}xf32> -> tensor<{b}x{t}x{kvd}xf32>
  %v = nn.matmul %x, %wv : tensor<{b}x{t}x{c}xf32>, tensor<{c}x{kvd}xf32> -> tensor<{b}x{t}x{kvd}xf32>
  %q4 = nn.reshape %q : tensor<{b}x{t}x{hd}xf32> -> tensor<{b}x{t}x{h}x{d}xf32>
  %k4 = nn.reshape %k : tensor<{b}x{t}x{kvd}xf32> -> tensor<{b}x{t}x{kv}x{d}xf32>
  %v4 = nn.reshape %v : tensor<{b}x{t}x{kvd}xf32> -> tensor<{b}x{t}x{kv}x{d}xf32>
  %qt = nn.transpose %q4 [0, 2, 1, 3] : tensor<{b}x{t}x{h}x{d}xf32> -> tensor<{b}x{h}x{t}x{d}xf32>
  %kt = nn.transpose %k4 [0, 2, 1, 3] : tensor<{b}x{t}x{kv}x{d}xf32> -> tensor<{b}x{kv}x{t}x{d}xf32>
  %vt = nn.transpose %v4 [0, 2, 1, 3] : tensor<{b}x{t}x{kv}x{d}xf32> -> tensor<{b}x{kv}x{t}x{d}xf32>
  %o = nn.attention %qt, %kt, %vt causal : tensor<{b}x{h}x{t}x{d}xf32>, tensor<{b}x{kv}x{t}x{d}xf32>
  %ot = nn.transpose %o [0, 2, 1, 3] : tensor<{b}x{h}x{t}x{d}xf32> -> tensor<{b}x{t}x{h}x{d}xf32>
  %of = nn.reshape %ot : tensor<{b}x{t}x{h}x{d}xf32> -> tensor<{b}x{flat}xf32>
  %logits = nn.matmul %of, %wo : tensor<{b}x{flat}xf32>, tensor<{flat}x{classes}xf32> -> tensor<{b}x{classes}xf32>
  %loss = nn.softmax_cross_entropy %logits, %y : tensor<{b}x{classes}xf32>, tensor<{b}xi64> -> tensor<f32>
  zero.return %loss : tensor<f32>
}}
"""


def cmd_model(args):
    if HEADS % args.kv_heads:
        print("--kv-heads must divide %d" % HEADS, file=sys.stderr)
        return 2
    d = HEAD_DIM
    open(args.o, "w").write(MODEL.format(
        b=BATCH, t=SEQ, c=FEATURES, h=HEADS, kv=args.kv_heads, d=d,
        hd=HEADS * d, kvd=args.kv_heads * d, flat=SEQ * HEADS * d,
        classes=CLASSES))
    return 0


def repeat_kv(x, group):
    """[B, KV, T, D] -> [B, KV * group, T, D], each head repeated group
    times in place (Hugging Face's repeat_kv)."""
    b, kv, t, d = x.shape
    return x[:, :, None].expand(b, kv, group, t, d).reshape(b, kv * group, t, d)


def forward(p, x):
    heads, kv_heads = HEADS, p["wk"].shape[1] // HEAD_DIM
    b, t, _ = x.shape
    q = (x @ p["wq"]).view(b, t, heads, -1).transpose(1, 2)
    k = (x @ p["wk"]).view(b, t, kv_heads, -1).transpose(1, 2)
    v = (x @ p["wv"]).view(b, t, kv_heads, -1).transpose(1, 2)
    k, v = repeat_kv(k, heads // kv_heads), repeat_kv(v, heads // kv_heads)
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    s = s.masked_fill(~mask, float("-inf"))
    o = torch.softmax(s, dim=-1) @ v
    return o.transpose(1, 2).reshape(b, -1) @ p["wo"]


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("model")
    m.add_argument("--kv-heads", type=int, required=True)
    m.add_argument("-o", required=True)
    torch_replay.add_arguments(sub.add_parser("check"))
    args = ap.parse_args()
    return cmd_model(args) if args.cmd == "model" else cmd_check(args)


def cmd_check(args):
    kind, lr, beta1, beta2, eps, wd = optimizer(open(args.model).read())
    assert kind == "adam" and wd == 0.0, (kind, wd)
    names = ["wq", "wk", "wv", "wo"]
    params = torch_replay.load_params(args.init, names)
    opt = torch.optim.Adam(params.values(), lr=lr, betas=(beta1, beta2),
                           eps=eps)

    def loss_of(x, y):
        return torch.nn.functional.cross_entropy(forward(params, x), y)

    steps, _ = torch_replay.replay(args, BATCH, opt, loss_of,
                                   (SEQ, FEATURES))
    worst_weight = torch_replay.weight_difference(args.final, params, names)
    if worst_weight > args.tol:
        print("FAIL: final weights differ from the reference by %.3g" %
              worst_weight)
        return 1
    print("%d steps match the PyTorch reference: losses within %g relative, "
          "weights within %g" % (steps, args.tol, args.tol))
    return 0


if __name__ == "__main__":
    sys.exit(main())
