"""A custom loss over the global batch: a GRPO-style clipped surrogate
whose forward takes (input_ids, completion_mask, advantages) and divides the
masked token sum by the mask's sum, as TRL's "bnpo"/"dapo" losses do over
the whole batch.

    make()                       the module and an example batch (zero-import)
    custom_loss.py STEPS LIB...  (under mpirun) trains each compiled LIB
                                 through zero_mlir.Engine for STEPS steps on
                                 the global batch and compares every step's
                                 loss and gradient norm, and the weights
                                 after the last, with PyTorch's AdamW on the
                                 same module and global batches.

Rows 0-1 (rank 0's half of each global batch) have most of their tokens in
the mask, rows 2-3 (rank 1's) few, so the ranks' counts differ: a mean of
the ranks' own ratios would not be the global batch's ratio.
"""

import math
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "Import", "Inputs"))
from torch_train import model_settings, optimizer  # noqa: E402

VOCAB, DIM, B, T = 24, 16, 4, 8
EPS = 0.2


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.mix = nn.Linear(DIM, DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, input_ids, completion_mask, advantages):
        logits = self.head(torch.tanh(self.mix(self.emb(input_ids))))
        picked = torch.gather(logits, -1, input_ids.unsqueeze(-1)).squeeze(-1)
        logps = picked - torch.logsumexp(logits, dim=-1)
        # The rollout's own log-probabilities (one iteration per batch).
        ratio = torch.exp(logps - logps.detach())
        clipped = torch.clamp(ratio, 1 - EPS, 1 + EPS)
        per_token = -torch.min(ratio * advantages[:, None],
                               clipped * advantages[:, None])
        return (per_token * completion_mask).sum() / \
            completion_mask.sum().clamp(min=1.0)


def batch(step):
    g = torch.Generator().manual_seed(100 + step)
    ids = torch.randint(0, VOCAB, (B, T), generator=g)
    keep = torch.tensor([0.9, 0.8, 0.25, 0.15])[:, None]
    mask = (torch.rand(B, T, generator=g) < keep).float()
    adv = torch.randn(B, generator=g)
    return ids, mask, adv


def make():
    torch.manual_seed(0)
    return Policy(), batch(0)


def torch_run(values, steps):
    module, _ = make()
    opt = optimizer(module.parameters(), values)
    records = []
    for s in range(1, steps + 1):
        opt.zero_grad(set_to_none=True)
        loss = module(*batch(s))
        loss.backward()
        norm = math.sqrt(sum(float((p.grad.double() ** 2).sum())
                             for p in module.parameters()))
        opt.step()
        records.append((loss.item(), norm))
    return records, dict(module.named_parameters())


def main():
    import zero_mlir
    torch.set_num_threads(1)
    steps = int(sys.argv[1])
    ok = True
    for spec in sys.argv[2:]:
        library, model = spec.split(",")
        with zero_mlir.Engine(library, init_from=os.path.splitext(model)[0] +
                              ".safetensors", quiet=True) as engine:
            names = [i["name"] for i in engine.inputs]
            got = []
            for s in range(1, steps + 1):
                arrays = [t.numpy() for t in batch(s)]
                r = engine.step(**dict(zip(names, arrays)))
                got.append((r["loss"], r["grad_norm"]))
            weights = dict(engine.named_parameters())
            rank = engine.rank
        want, params = torch_run(model_settings(open(model).read())[0], steps)
        ids, mask, adv = batch(1)
        counts = [int(mask[r * B // 2:(r + 1) * B // 2].sum())
                  for r in range(2)]
        # What the ranks' own ratios would give: their mean is not the
        # global batch's ratio, by far more than the tolerance.
        with torch.no_grad():
            module, _ = make()
            halves = [module(ids[h], mask[h], adv[h])
                      for h in (slice(0, B // 2), slice(B // 2, B))]
            apart = abs(float(sum(halves)) / 2 / want[0][0] - 1)
        worst = 0.0
        for s, ((gl, gn), (wl, wn)) in enumerate(zip(got, want), 1):
            err = max(abs(gl - wl) / abs(wl), abs(gn - wn) / abs(wn))
            worst = max(worst, err)
            if err > 1e-5:
                ok = False
                print("FAIL: %s step %d: loss %.8f grad_norm %.8f, PyTorch's "
                      "%.8f %.8f" % (library, s, gl, gn, wl, wn))
        rms = math.sqrt(sum(float(((torch.from_numpy(weights[n]) -
                                    p.detach()) ** 2).sum())
                            for n, p in params.items()) /
                        sum(p.numel() for p in params.values()))
        if rms > 1e-5 or set(weights) != set(params):
            ok = False
            print("FAIL: %s weights RMS %.3g from PyTorch's" % (library, rms))
        if rank == 0:
            print("%s: ranks' mask counts at step 1 %s (the mean of their "
                  "ratios off by %.0f%%); %d steps: losses and grad norms "
                  "within 1e-05 relative of PyTorch's on the global batch "
                  "(worst %.2g), weights RMS %.2g" % (
                      library, counts, 100 * apart, steps, worst, rms))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
