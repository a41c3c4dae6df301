#!/usr/bin/env python3
"""Trains imported GRPO steps through zero_mlir.Engine and compares every
step's loss with PyTorch's own training of the same module.

    grpo_train.py STEPS SPEC=LIB.so,MODEL.mlir,WEIGHTS.safetensors ...

SPEC is a make function of Inputs/grpo.py (make, make_where, ...). Step s
(from 1) feeds both the batch grpo.batch(s): the completion ids, the mask,
the advantages and the reference log-probabilities, passed to the engine
under its input names in the step's argument order. PyTorch trains the
module make() builds (seeded: the weights zero-import wrote) with
torch.optim.AdamW and the imported model's hyperparameters. The losses
must agree within 1e-5 relative.
"""

import os
import sys

import torch
import zero_mlir

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import grpo  # noqa: E402
from torch_train import model_settings, optimizer  # noqa: E402


def torch_losses(make, text, steps):
    module, _ = make()
    module.train()
    opt = optimizer(module.parameters(), model_settings(text)[0])
    losses = []
    for s in range(1, steps + 1):
        opt.zero_grad(set_to_none=True)
        loss = module(*grpo.batch(s))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def engine_losses(library, weights, steps):
    losses = []
    with zero_mlir.Engine(library, init_from=weights, quiet=True) as engine:
        names = [i["name"] for i in engine.inputs]
        print("inputs", [(i["name"], tuple(i["shape"])) for i in engine.inputs])
        for s in range(1, steps + 1):
            arrays = [t.numpy() for t in grpo.batch(s)]
            losses.append(engine.step(**dict(zip(names, arrays)))["loss"])
    return losses


def main():
    steps = int(sys.argv[1])
    torch.set_num_threads(1)
    ok = True
    for spec in sys.argv[2:]:
        name, files = spec.split("=")
        library, model, weights = files.split(",")
        got = engine_losses(library, weights, steps)
        want = torch_losses(getattr(grpo, name), open(model).read(), steps)
        worst = max(abs(g - w) / abs(w) for g, w in zip(got, want))
        for s, (g, w) in enumerate(zip(got, want), 1):
            if abs(g - w) > 1e-5 * abs(w):
                print("FAIL: %s step %d: loss %.8f, PyTorch's %.8f" % (
                    name, s, g, w))
                ok = False
        print("%s: %d steps: losses within 1e-05 relative of PyTorch's "
              "(worst %.2g)" % (name, steps, worst))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
