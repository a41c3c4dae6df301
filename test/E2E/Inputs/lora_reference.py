#!/usr/bin/env python3
"""zero-model-gen llama --lora against PEFT: the PyTorch Llama of
llama_reference.py wrapped by peft.get_peft_model with the same LoraConfig
(r, lora_alpha, target_modules, lora_dropout 0), loaded from the weights
the executable --export'ed (every name of the file is PEFT's state-dict
name without its `base_model.model.` prefix, and every one is loaded),
trained with torch.optim.AdamW over the adapters (the only parameters
PEFT leaves trainable) on the runtime's batches. Every step's loss agrees
within --rtol relative, the final adapters within --weight-atol, and the
base weights of the final file equal the initial ones bitwise.
"""

import argparse
import os
import re
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_gpt2 import read_safetensors  # noqa: E402
from llama_reference import (LlamaForCausalLM, batches, fail,  # noqa: E402
                             model_config)

from peft import LoraConfig, get_peft_model  # noqa: E402

PREFIX = "base_model.model."


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--init", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--final", required=True)
    p.add_argument("--tokens", required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--kv-heads", type=int, required=True)
    p.add_argument("--rope-theta", type=float, default=1e4)
    p.add_argument("--norm-eps", type=float, default=1e-5)
    p.add_argument("--r", type=int, required=True)
    p.add_argument("--alpha", type=float, required=True)
    p.add_argument("--targets", required=True)
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--weight-atol", type=float, default=1e-5)
    args = p.parse_args()
    torch.manual_seed(0)
    import json
    B, T, (kind, lr, beta1, beta2, eps, wd), _ = model_config(
        open(args.model).read())
    _, init = read_safetensors(args.init)
    V, C = init["model.embed_tokens.weight"].shape
    L = len({n.split(".")[2] for n in init if n.startswith("model.layers.")})
    Fd = init["model.layers.0.mlp.gate_proj.weight"].shape[0]
    base = LlamaForCausalLM(V, C, args.heads, args.kv_heads, Fd, L,
                            args.norm_eps, args.rope_theta,
                            "lm_head.weight" not in init)
    model = get_peft_model(base, LoraConfig(
        r=args.r, lora_alpha=args.alpha, lora_dropout=0.0,
        target_modules=args.targets.split(",")))
    state = model.state_dict()
    names = {PREFIX + n for n in init}
    if names != set(state):
        fail("names differ from PEFT's: %s" % sorted(names ^ set(state)))
    model.load_state_dict({PREFIX + n: torch.from_numpy(a)
                           for n, a in init.items()}, strict=True)
    trainable = [n[len(PREFIX):] for n, q in model.named_parameters()
                 if q.requires_grad]
    frozen_in_file = set(re.findall(r"zero\.param @(\S+) : .* frozen\n",
                                    open(args.model).read()))
    if set(trainable) != set(init) - frozen_in_file:
        fail("PEFT trains %s, the model %s" %
             (sorted(trainable), sorted(set(init) - frozen_in_file)))
    decays = {m.group(1): float(m.group(2)) for m in re.finditer(
        r"zero\.param @(\S+) : .* weight_decay (\S+)",
        open(args.model).read())}
    groups = {}
    for n, q in model.named_parameters():
        if q.requires_grad:
            groups.setdefault(decays.get(n[len(PREFIX):], wd), []).append(q)
    opt = torch.optim.AdamW([{"params": ps, "weight_decay": d}
                             for d, ps in groups.items()],
                            lr=lr, betas=(beta1, beta2), eps=eps,
                            foreach=False)
    log = [json.loads(line) for line in open(args.log) if line.strip()]
    for (x, y), entry in zip(batches(args.tokens, B, T, len(log)), log):
        model.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        opt.step()
        ref, got = loss.item(), entry["loss"]
        rel = abs(got - ref) / abs(ref)
        if rel > args.rtol:
            fail("step %d: loss %.8f, PEFT %.8f: relative difference %.3g "
                 "> %g" % (entry["step"], got, ref, rel, args.rtol))
    _, final = read_safetensors(args.final)
    state = {n[len(PREFIX):]: t for n, t in model.state_dict().items()}
    diff = max(np.abs(final[n] - state[n].numpy()).max() for n in trainable)
    if diff > args.weight_atol:
        fail("final adapters differ by %.3g > %g" % (diff, args.weight_atol))
    moved = [n for n in init if n not in trainable and
             final[n].tobytes() != init[n].tobytes()]
    if moved:
        fail("base weights changed: %s" % moved)
    print("%d tensors loaded under PEFT's names, %d adapters trained; %d "
          "steps: losses within %g relative, adapters within %g, %d base "
          "tensors bitwise unchanged" %
          (len(init), len(trainable), len(log), args.rtol, args.weight_atol,
           len(init) - len(trainable)))


if __name__ == "__main__":
    main()
