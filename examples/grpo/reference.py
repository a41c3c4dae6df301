#!/usr/bin/env python3
"""The GRPO loop of grpo.py in plain PyTorch, on the rollouts it generated.

    reference.py ROLLOUTS.npz POLICY.mlir [--make NAME] [--tolerance 1e-5]

Repeats grpo.py's loop from the same initial weights (policy.py's make
function NAME, seeded as zero-import built them) with the completions it
sampled (ROLLOUTS, which grpo.py --rollouts writes; sampling is the one
thing taken from it): the rewards, the group-normalised advantages, the
old log-probabilities (the current policy's, before each generation
batch's first step) and the reference ones (the initial policy's) computed
here, then num_iterations steps of torch.optim.AdamW with the imported
step's hyper-parameters (POLICY.mlir's #zero.optimizer) on the whole
batch. Each loss must agree with the loop's within the tolerance, and so
must the RMS of the difference between the final weights.
"""

import argparse
import os
import re
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpo  # noqa: E402
import policy  # noqa: E402


def optimizer_settings(text):
    """The imported step's AdamW: {lr, beta1, beta2, eps, weight_decay}."""
    attr = re.search(r"#zero\.optimizer<([^>]*)>", text).group(1)
    values = dict(kv.split(" = ") for kv in attr.split(", "))
    if values.get("kind", "adamw") != "adamw" or \
            re.search(r"gradient_clipping", text):
        raise SystemExit("the reference repeats AdamW without clipping")
    return values


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rollouts")
    ap.add_argument("model", help="the imported step (.mlir)")
    ap.add_argument("--make", default="make")
    ap.add_argument("--tolerance", type=float, default=1e-5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    run = np.load(args.rollouts)
    names = [str(n) for n in run["input_names"]]
    iterations = int(run["iterations"])
    num_iterations = int(run["num_iterations"])

    model, _ = getattr(policy, args.make)()
    ref_model = grpo.generation_model()
    ref_model.load_state_dict(model.state_dict())
    v = optimizer_settings(open(args.model).read())
    opt = torch.optim.AdamW(model.parameters(), lr=float(v["lr"]),
                            betas=(float(v["beta1"]), float(v["beta2"])),
                            eps=float(v["eps"]),
                            weight_decay=float(v["weight_decay"]),
                            foreach=False)
    losses, inputs_diff = [], 0.0
    for it in range(iterations):
        input_ids = run["%d/input_ids" % it]
        completion_ids = input_ids[:, policy.PROMPT_LEN:]
        mask = grpo.completion_mask(completion_ids)
        batch = {"input_ids": input_ids, "completion_ids": completion_ids,
                 "completion_mask": mask,
                 "advantages": grpo.advantages(grpo.rewards(completion_ids,
                                                            mask))}
        if "old_per_token_logps" in names:
            batch["old_per_token_logps"] = grpo.logps(model, input_ids)
        if "ref_per_token_logps" in names:
            batch["ref_per_token_logps"] = grpo.logps(ref_model, input_ids)
        for k, value in batch.items():
            if k in ("old_per_token_logps", "ref_per_token_logps"):
                inputs_diff = max(inputs_diff, float(np.abs(
                    value - run["%d/%s" % (it, k)]).max()))
            elif not np.array_equal(value, run["%d/%s" % (it, k)]):
                raise SystemExit("iteration %d: %s differs from the loop's"
                                 % (it, k))
        tensors = [torch.from_numpy(np.ascontiguousarray(batch[n]))
                   for n in names]
        for _ in range(num_iterations):
            opt.zero_grad(set_to_none=True)
            loss = model(*tensors)
            loss.backward()
            opt.step()
            losses.append(loss.item())

    got = run["losses"]
    loss_diff = max(abs(a - b) for a, b in zip(got, losses))
    sq, count, worst = 0.0, 0, 0.0
    for name, p in model.named_parameters():
        d = p.detach().double().numpy() - run["weight/" + name]
        sq += float((d * d).sum())
        count += d.size
        worst = max(worst, float(np.sqrt((d * d).mean())))
    rms = np.sqrt(sq / count)
    moved = np.sqrt(sum(float(((p.detach().double() - q.detach().double())
                               ** 2).sum()) for p, q in
                        zip(model.parameters(), ref_model.parameters()))
                    / count)
    print("%d iterations x %d steps, world size %d, inputs %s" % (
        iterations, num_iterations, int(run["world_size"]), names))
    print("losses: loop %s" % " ".join("%.6f" % x for x in got))
    print("losses: torch %s" % " ".join("%.6f" % x for x in losses))
    print("old/ref log-probabilities: largest difference %.2g" % inputs_diff)
    print("largest loss difference %.2g" % loss_diff)
    print("weights: RMS difference %.2g (largest tensor's %.2g); moved by "
          "training %.2g RMS" % (rms, worst, moved))
    ok = len(got) == len(losses) and loss_diff <= args.tolerance and \
        rms <= args.tolerance
    print("%s: losses and weights within %g of PyTorch's" % (
        "ok" if ok else "FAIL", args.tolerance))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
