"""The harness of the PyTorch references that replay an executable's run in
float64 (gqa_reference.py, rms_norm_reference.py, rope_swiglu_reference.py):
their command line, the initial weights the executable exported, and the
logged steps replayed on the executable's data order (consecutive rows of
the global batch, wrapping), each loss checked against --log. A reference
gives its parameters, its optimizer and its loss."""

import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mlp_reference import load_safetensors  # noqa: E402


def add_arguments(p):
    """--model, --init, --x, --y, --log, --final and --tol on parser p."""
    for name in ("--model", "--init", "--x", "--y", "--log", "--final"):
        p.add_argument(name, required=True)
    p.add_argument("--tol", type=float, default=1e-5)


def parse_args():
    """A reference's command line: add_arguments' options."""
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args()


def load_params(path, names):
    """The tensors `names` of the safetensors file at path in float64, each
    a leaf that autograd tracks."""
    init = load_safetensors(path)
    return {n: torch.tensor(init[n], dtype=torch.float64, requires_grad=True)
            for n in names}


def replay(args, batch, opt, loss_of, row_shape=()):
    """Runs each step of --log: loss_of(x, y) on the step's `batch` rows
    (each of row_shape when given), its backward and opt's step. Fails on a
    loss further than --tol relative from the logged one; returns how many
    steps ran and the worst relative difference."""
    x_all = torch.tensor(np.load(args.x), dtype=torch.float64)
    if row_shape:
        x_all = x_all.view(-1, *row_shape)
    y_all = torch.tensor(np.load(args.y).astype(np.int64))
    log = [json.loads(line) for line in open(args.log)]
    worst = 0.0
    for step, entry in enumerate(log, start=1):
        rows = [((step - 1) * batch + i) % len(x_all) for i in range(batch)]
        loss = loss_of(x_all[rows], y_all[rows])
        opt.zero_grad()
        loss.backward()
        opt.step()
        diff = abs(entry["loss"] - loss.item()) / abs(loss.item())
        worst = max(worst, diff)
        if diff > args.tol:
            print("FAIL: step %d: loss %.9g, reference %.9g" %
                  (step, entry["loss"], loss.item()))
            sys.exit(1)
    return len(log), worst


def weight_difference(path, params, names):
    """The largest absolute difference between the tensors `names` of the
    safetensors file at path and params'."""
    final = load_safetensors(path)
    return max(np.abs(final[n] - params[n].detach().numpy()).max()
               for n in names)
