#!/usr/bin/env python3
"""A GRPO loop in the form of TRL's GRPOTrainer, on a compiled step.

    zero-import examples/grpo/policy.py:make -o policy.mlir
    zero-compile policy.mlir --stage 3 --world-size 2 --emit shared -o step.so
    mpirun -np 2 python examples/grpo/grpo.py --library step.so \\
        --init policy.safetensors --prompts examples/grpo/prompts.txt \\
        --iterations 3 --num-iterations 2 --rollouts rollouts.npz

Each iteration (one generation batch):
  1. the policy's weights are streamed (engine.named_parameters) into a
     transformers Qwen3ForCausalLM on rank 0;
  2. rank 0 samples GROUP completions of each of the iteration's prompts
     (read from --prompts, PROMPT_LEN characters a line) with generate;
  3. the reward of a completion is the count of the target token in it,
     and the advantages are normalised within each prompt's group,
     (r - mean) / (std + 1e-4), as TRL's scale_rewards="group";
  4. with num_iterations > 1 the old per-token log-probabilities are the
     current policy's, computed once, before the first update; with
     beta > 0 the reference log-probabilities are those of the initial
     weights (a frozen copy on rank 0);
  5. rank 0 broadcasts the batch to every rank (engine.broadcast) and each
     takes num_iterations optimizer steps on it (engine.step).
The step's inputs say which log-probabilities it takes (policy.py).
--rollouts writes what the loop generated, its losses and the final
weights, for reference.py to repeat the loop in plain PyTorch.
"""

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import policy  # noqa: E402
from policy import (COMPLETION_LEN, EOS, GROUP, PAD, PROMPT_LEN,  # noqa: E402
                    PROMPTS_PER_BATCH, TARGET)


def read_prompts(path):
    """The prompts file's lines as token ids [N, PROMPT_LEN]."""
    rows = []
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.strip()
        if not line:
            continue
        if len(line) != PROMPT_LEN or any(c not in policy.CHARS for c in line):
            raise SystemExit("%s:%d: a prompt is %d of the characters '%s'"
                             % (path, n, PROMPT_LEN, policy.CHARS))
        rows.append([policy.VOCAB.index(c) for c in line])
    return np.array(rows, dtype=np.int64)


def batch_prompts(prompts, iteration):
    """The iteration's prompts, each GROUP times in a row (TRL's
    RepeatSampler), [PROMPTS_PER_BATCH * GROUP, PROMPT_LEN]."""
    take = [(iteration * PROMPTS_PER_BATCH + k) % len(prompts)
            for k in range(PROMPTS_PER_BATCH)]
    return np.repeat(prompts[take], GROUP, axis=0)


def completion_mask(completion_ids):
    """TRL's: the tokens up to and including the first EOS."""
    is_eos = completion_ids == EOS
    first = np.where(is_eos.any(1), is_eos.argmax(1), COMPLETION_LEN)
    return (np.arange(COMPLETION_LEN)[None, :] <= first[:, None]).astype(
        np.float32)


def rewards(completion_ids, mask):
    """The rule: how many target tokens the completion has (up to its
    EOS)."""
    return ((completion_ids == TARGET) * mask).sum(1).astype(np.float32)


def advantages(r):
    """TRL's group-normalised advantages (scale_rewards="group"): the
    group's unbiased standard deviation, plus 1e-4."""
    grouped = torch.from_numpy(r).view(-1, GROUP)
    mean = grouped.mean(1).repeat_interleave(GROUP)
    std = grouped.std(1).repeat_interleave(GROUP)
    return ((torch.from_numpy(r) - mean) / (std + 1e-4)).numpy()


@torch.no_grad()
def logps(model, input_ids):
    """Per-token log-probabilities of the completions, as the step
    computes them (policy.per_token_logps), without a gradient."""
    ids = torch.from_numpy(input_ids)
    return policy.per_token_logps(model, ids, ids[:, PROMPT_LEN:]).numpy()


def generation_model():
    model = policy.Qwen3ForCausalLM(policy.config())
    model.eval()
    return model


def load_into(model, named):
    """Copies (name, array) pairs into the model's parameters, every one."""
    params = dict(model.named_parameters())
    seen = set()
    for name, array in named:
        with torch.no_grad():
            params[name].copy_(torch.from_numpy(np.array(array)))
        seen.add(name)
    missing = set(params) - seen
    if missing:
        raise SystemExit("not streamed: %s" % sorted(missing))


def generate(model, prompt_ids, seed):
    """GROUP completions of each prompt sampled at temperature 1 (no top-k
    or top-p), COMPLETION_LEN tokens, padded after an early end."""
    torch.manual_seed(seed)
    ids = torch.from_numpy(prompt_ids)
    out = model.generate(ids, attention_mask=torch.ones_like(ids),
                         do_sample=True, temperature=1.0, top_k=0,
                         top_p=1.0, max_new_tokens=COMPLETION_LEN,
                         pad_token_id=PAD, eos_token_id=EOS, use_cache=True)
    completion = out[:, PROMPT_LEN:].numpy()
    pad = COMPLETION_LEN - completion.shape[1]
    return np.pad(completion, ((0, 0), (0, pad)), constant_values=PAD)


def rollout(model, ref_model, prompts, iteration, seed, names):
    """Rank 0's batch of one iteration: {input name: array} and what
    reference.py needs to repeat it."""
    prompt_ids = batch_prompts(prompts, iteration)
    completion_ids = generate(model, prompt_ids, seed + iteration)
    input_ids = np.concatenate([prompt_ids, completion_ids], axis=1)
    mask = completion_mask(completion_ids)
    r = rewards(completion_ids, mask)
    batch = {"input_ids": input_ids, "completion_ids": completion_ids,
             "completion_mask": mask, "advantages": advantages(r)}
    if "old_per_token_logps" in names:
        batch["old_per_token_logps"] = logps(model, input_ids)
    if "ref_per_token_logps" in names:
        batch["ref_per_token_logps"] = logps(ref_model, input_ids)
    return batch, r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--library", required=True, help="the step (.so)")
    ap.add_argument("--init", required=True,
                    help="the initial weights (zero-import's safetensors)")
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--iterations", type=int, default=3,
                    help="generation batches")
    ap.add_argument("--num-iterations", type=int, default=2,
                    help="optimizer steps on each generation batch (TRL's "
                    "num_iterations)")
    ap.add_argument("--seed", type=int, default=0, help="sampling seed")
    ap.add_argument("--rollouts", help="write the rollouts, the losses and "
                    "the final weights here (.npz, rank 0)")
    args = ap.parse_args()
    torch.set_num_threads(1)

    import zero_mlir
    from safetensors.torch import load_file

    prompts = read_prompts(args.prompts)
    with zero_mlir.Engine(args.library, init_from=args.init,
                          quiet=True) as engine:
        root = engine.rank == 0
        names = [i["name"] for i in engine.inputs]
        if ("old_per_token_logps" in names) != (args.num_iterations > 1):
            raise SystemExit("--num-iterations %d: the step %s the old "
                             "log-probabilities (policy.py's variants)" % (
                                 args.num_iterations,
                                 "takes" if "old_per_token_logps" in names
                                 else "does not take"))
        if root:
            print("inputs", names)
            model = generation_model()
            ref_model = None
            if "ref_per_token_logps" in names:
                ref_model = generation_model()
                load_into(ref_model, ((n, t.numpy()) for n, t in
                                      load_file(args.init).items()))
        saved = {}
        losses = []
        for it in range(args.iterations):
            # 1. The policy's weights, gathered to rank 0 a bucket at a time.
            stream = engine.named_parameters(rank=0)
            if root:
                load_into(model, stream)
            else:
                for _ in stream:
                    pass
            # 2-4. Rollouts on rank 0.
            if root:
                batch, r = rollout(model, ref_model, prompts, it, args.seed,
                                   names)
                saved.update({"%d/%s" % (it, k): v for k, v in batch.items()})
                saved["%d/rewards" % it] = r
            # 5. Every rank gets the batch and steps on it.
            arrays = {name: engine.broadcast(batch[name] if root else None,
                                             root=0)
                      for name in names}
            for k in range(args.num_iterations):
                record = engine.step(**arrays)
                losses.append(record["loss"])
                if root:
                    print("iteration %d step %d: mean reward %.3f, loss %.6f"
                          % (it, k, r.mean(), record["loss"]))
        final = engine.named_parameters(rank=0)
        final = {n: np.array(a) for n, a in final} if root else \
            [None for _ in final]
        if root and args.rollouts:
            saved["losses"] = np.array(losses, np.float64)
            saved["iterations"] = np.array(args.iterations)
            saved["num_iterations"] = np.array(args.num_iterations)
            saved["world_size"] = np.array(engine.world_size)
            saved["input_names"] = np.array(names)
            saved.update({"weight/" + n: a for n, a in final.items()})
            np.savez(args.rollouts, **saved)


if __name__ == "__main__":
    main()
