#!/usr/bin/env python3
"""The PyTorch reference of test/E2E/moe-torch.test: an input layer, then
transformers' MixtralSparseMoeBlock itself (router, experts, combine) on the model's
tokens, then the output layer, the cross-entropy and transformers'
load_balancing_loss_func times the model's coefficient, as
MixtralForCausalLM adds it, trained with torch.optim.Adam on the
executable's data order (torch_replay), one step on the whole global
batch whatever ranks and micro steps the executable divides it over. Float64 parameters and the eager
experts (grouped_mm takes no float64); the router's softmax and top-k run
in fp32, as transformers writes them. Reads the
initial weights the executable exported and compares the losses of --log,
the weights of --final and the measured peak with the planned one of every
logged step; prints where the first step routed the tokens."""

import argparse
import json
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_replay  # noqa: E402

from transformers import MixtralConfig  # noqa: E402
from transformers.models.mixtral.modeling_mixtral import (  # noqa: E402
    MixtralSparseMoeBlock, load_balancing_loss_func)


def main():
    p = argparse.ArgumentParser()
    torch_replay.add_arguments(p)
    args = p.parse_args()

    text = open(args.model).read()
    top_k = int(re.search(r"nn\.moe_router .* top_k (\d+)", text).group(1))
    # No load-balancing loss when the model has none (moe_model_divided).
    aux_scale = re.search(r"nn\.scale %aux by (\S+)", text)
    coef = float(aux_scale.group(1)) if aux_scale else None
    lr = float(re.search(r"lr = ([^,>]+)", text).group(1))
    batch = int(re.search(r"%x: tensor<(\d+)x", text).group(1))
    names = ["in.weight", "gate.weight", "experts.gate_up_proj", "experts.down_proj",
             "out.weight"]
    init = torch_replay.load_params(args.init, names)
    experts, hidden = init["gate.weight"].shape
    inter = init["experts.down_proj"].shape[2]
    config = MixtralConfig(hidden_size=hidden, intermediate_size=inter,
                           num_local_experts=experts,
                           num_experts_per_tok=top_k, hidden_act="silu",
                           router_jitter_noise=0.0)
    # The experts' loop: grouped_mm takes no float64; the sums are the same.
    config._experts_implementation = "eager"
    block = MixtralSparseMoeBlock(config).to(torch.float64)
    block.train()
    with torch.no_grad():
        block.gate.weight.copy_(init["gate.weight"])
        block.experts.gate_up_proj.copy_(init["experts.gate_up_proj"])
        block.experts.down_proj.copy_(init["experts.down_proj"])
    params = {"in.weight": init["in.weight"],
              "gate.weight": block.gate.weight,
              "experts.gate_up_proj": block.experts.gate_up_proj,
              "experts.down_proj": block.experts.down_proj,
              "out.weight": init["out.weight"]}
    opt = torch.optim.Adam(params.values(), lr=lr)
    routed = []

    def loss_of(x, y):
        x = x @ params["in.weight"].T
        # The router logits as MixtralForCausalLM records them (the gate's
        # first output), for the auxiliary loss.
        router_logits, _, indices = block.gate(x)
        if not routed:
            routed.append(indices.detach())
        h = block(x.unsqueeze(0)).squeeze(0)
        logits = h @ params["out.weight"].T
        ce = torch.nn.functional.cross_entropy(logits, y)
        if coef is None:
            return ce
        aux = load_balancing_loss_func((router_logits,), experts, top_k)
        return ce + coef * aux

    steps, worst = torch_replay.replay(args, batch, opt, loss_of)
    diff = torch_replay.weight_difference(args.final, params, names)
    if diff > args.tol:
        print("FAIL: weights differ from the reference by %g" % diff)
        sys.exit(1)
    for line in (json.loads(l) for l in open(args.log)):
        if line["peak_bytes"] != line["planned_peak_bytes"]:
            print("FAIL: step %d: measured peak %d != planned %d" %
                  (line["step"], line["peak_bytes"],
                   line["planned_peak_bytes"]))
            sys.exit(1)
    first = routed[0]
    counts = torch.bincount(first.reshape(-1), minlength=experts).tolist()
    print("%d steps match transformers' MixtralSparseMoeBlock: losses within "
          "%g relative, weights within %g, every peak == planned; step 1 "
          "sends the experts %s pairs" %
          (steps, args.tol, args.tol, counts))


if __name__ == "__main__":
    main()
