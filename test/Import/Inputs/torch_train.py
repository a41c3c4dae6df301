#!/usr/bin/env python3
"""Trains the module a make() function returns with PyTorch itself and
compares every step's loss with what a compiled, imported step logged.

The module is built again by make() (seeded, so the weights zero-import
wrote), trained in fp32 by torch.optim.AdamW (or Adam) with the
hyperparameters and gradient clipping of the imported model's attributes,
on the batches the runtime reads: consecutive windows of a token file
(--tokens; inputs and targets shifted by one, or, for a step with `labels
same_tokens`, whose loss shifts them itself, both the same window) or
consecutive rows of an .npy pair (--inputs/--labels), the global batch
being dimension 0 of the example arguments.

With --mixed bf16 (or f16), the step is trained as zero-import writes a
transformers model that keeps modules in float32: the parameters that
transformers' own loader keeps in float32 at that dtype (its dtype plan of
_keep_in_fp32_modules(_strict), matched by its own glob alternation) stay
float32 and every other one computes in the 16-bit dtype, from float32
masters that AdamW updates with the 16-bit gradients; each outermost
module the plan names computes in float32 (its inputs converted on entry,
its outputs back to the 16-bit dtype on exit).

With --hf DIR in place of --make, the model is the Hugging Face causal LM
in DIR as transformers itself loads it (from_pretrained, or from_config
after torch.manual_seed(--seed) when DIR has no weights), and each step's
loss is transformers' own `model(input_ids=ids, labels=labels).loss`: the
model shifts the labels itself, ignores -100 and takes the mean over the
valid labels. Its batches are the runtime's windows of T tokens, each both
the input ids and the labels (the step's `labels same_tokens`), or rows of
integer [N, T] .npy arrays (--inputs/--labels, the labels possibly -100).
With --lora SPEC (as zero-import's, r=4,alpha=8,target=q_proj,v_proj)
beside --hf, the model is PEFT's get_peft_model of it with that LoraConfig,
its adapters initialised after torch.manual_seed(--seed); a make() that
returns a PeftModel is trained as its loss with labels=, as zero-import
traces it. Either way only the trainable parameters (requires_grad: the
adapters, or what a make() leaves unfrozen) are AdamW's; a frozen one has
no gradient and never changes. --save-adapters DIR writes the trained
adapters with PEFT's save_pretrained.

With --micro K, the global batch is K micro batches (ranks times micro
steps) as the Trainer accumulates them: each micro batch's loss is its sum
over the whole global batch's valid labels (num_items_in_batch), its
gradients added up before the optimizer step; the step's loss is their
sum.
"""

import argparse
import importlib.util
import json
import os
import re
import sys

import numpy as np
import torch

# The runtime's token windows, as the E2E references read them.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "E2E", "Inputs"))
import llama_reference  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "Inputs"))
import ref_cache  # noqa: E402


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def load_make(spec):
    path, _, name = spec.rpartition(":")
    s = importlib.util.spec_from_file_location("user_model", path)
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    return getattr(mod, name)


def model_settings(text):
    attr = re.search(r"#zero\.optimizer<([^>]*)>", text).group(1)
    values = dict(kv.split(" = ") for kv in attr.split(", "))
    clip = re.search(r"gradient_clipping ([0-9.e+-]+)", text)
    return values, float(clip.group(1)) if clip else 0.0


def optimizer(params, values):
    """torch.optim.AdamW (or Adam) with the imported step's settings
    (model_settings' values), one tensor at a time as the step updates."""
    cls = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam}[
        values.get("kind", "adamw")]
    return cls(params, lr=float(values["lr"]),
               betas=(float(values["beta1"]), float(values["beta2"])),
               eps=float(values["eps"]),
               weight_decay=float(values["weight_decay"]), foreach=False)


def token_batches(path, B, T, dtype, steps):
    for x, y in llama_reference.batches(path, B, T, steps):
        yield x.to(dtype), y.to(dtype)


def same_token_batches(path, B, T, steps):
    """The runtime's rows of a `labels same_tokens` step: the window of T
    tokens at row k * T, both the ids and the labels."""
    tokens = torch.from_numpy(np.fromfile(path, dtype="<u2").astype(np.int64))
    n = len(tokens)
    for step in range(1, steps + 1):
        first = (step - 1) * B
        x = torch.stack([tokens[(((first + r) % n) * T % n + torch.arange(T))
                                % n] for r in range(B)])
        yield x, x.clone()


def npy_batches(xpath, ypath, B, xdtype, ydtype, steps, ppath=None):
    """(x, y, positions or None) of each step's rows."""
    xs, ys = np.load(xpath), np.load(ypath)
    ps = np.load(ppath) if ppath else None
    for step in range(1, steps + 1):
        rows = [((step - 1) * B + i) % len(xs) for i in range(B)]
        x = torch.from_numpy(xs[rows])
        yield (x.to(xdtype) if not xdtype.is_floating_point
               else x.to(torch.float32), torch.from_numpy(ys[rows]).to(ydtype),
               None if ps is None else torch.from_numpy(ps[rows]).long())


def hf_model(directory, attn, seed):
    """The model in a Hugging Face directory, loaded by transformers."""
    from transformers import AutoConfig, AutoModelForCausalLM
    kwargs = {"dtype": torch.float32}
    if attn:
        kwargs["attn_implementation"] = attn
    config = AutoConfig.from_pretrained(directory)
    # No cache while training; openai-gpt's config has no use_cache.
    if hasattr(config, "use_cache"):
        config.use_cache = False
    if any(f.startswith("model.safetensors") for f in os.listdir(directory)):
        return AutoModelForCausalLM.from_pretrained(directory, config=config,
                                                    **kwargs)
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config, **kwargs)


class HFStep(torch.nn.Module):
    """loss(ids, labels) of a causal LM: transformers' loss with labels=;
    with packed rows' positions, position_ids= too (no attention mask and
    no cache: transformers masks each document to itself)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, labels, num_items_in_batch=None, positions=None):
        kwargs = {}
        if num_items_in_batch is not None:
            kwargs["num_items_in_batch"] = num_items_in_batch
        if positions is not None:
            kwargs.update(position_ids=positions, use_cache=False)
        return self.model(input_ids=ids, labels=labels, **kwargs).loss


def accumulate(module, x, y, micro, positions=None):
    """The Trainer's gradient accumulation over `micro` micro batches of the
    global batch (x, y): each loss divided by the global batch's valid
    labels (the shifted ones, -100 aside), then backward. Their sum."""
    valid = int((y[:, 1:] != -100).sum())
    total = 0.0
    ps = positions.chunk(micro) if positions is not None else [None] * micro
    for xs, ys, p in zip(x.chunk(micro), y.chunk(micro), ps):
        loss = module(xs, ys, num_items_in_batch=valid, positions=p)
        loss.backward()
        total += loss.item()
    return total


def hf_make(args, text):
    ids = re.search(r"%input_ids: tensor<(\d+)x(\d+)xi64>", text)
    example = torch.zeros(int(ids.group(1)), int(ids.group(2)),
                          dtype=torch.long)
    model = hf_model(args.hf, args.attn, args.seed)
    if args.lora:
        model = lora_model(model, args.lora, args.seed)
    return HFStep(model), (example, example)


def lora_model(model, spec, seed):
    """PEFT's LoRA model of `model` for a --lora spec: key=value pairs,
    target= taking the names up to the next key."""
    from peft import LoraConfig, get_peft_model
    opts, key = {"target": []}, None
    for item in spec.split(","):
        if "=" in item:
            key, item = item.split("=", 1)
        if key == "target":
            opts["target"].append(item)
        else:
            opts[key] = item
    kwargs = {"target_modules": opts["target"], "task_type": "CAUSAL_LM"}
    if "r" in opts:
        kwargs["r"] = int(opts["r"])
    if "alpha" in opts:
        alpha = float(opts["alpha"])
        kwargs["lora_alpha"] = int(alpha) if alpha == int(alpha) else alpha
    if "dropout" in opts:
        kwargs["lora_dropout"] = float(opts["dropout"])
    torch.manual_seed(seed)
    return get_peft_model(model, LoraConfig(**kwargs))


def is_peft(module):
    try:
        from peft import PeftModel
    except ImportError:
        return False
    return isinstance(module, PeftModel)


TORCH_DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}


class Mixed:
    """The 16-bit compute copy of `module` (see --mixed) and the step that
    moves its gradients to the float32 masters."""

    def __init__(self, module, name):
        import copy

        from transformers import PreTrainedModel
        from transformers.core_model_loading import build_glob_alternation
        dtype = TORCH_DTYPES[name]
        self.masters = module
        self.compute = copy.deepcopy(module)
        for p in self.compute.parameters():
            p.data = p.data.to(dtype)
        roots = [(n, m) for n, m in self.compute.named_modules()
                 if isinstance(m, PreTrainedModel)]
        roots = [(n, m) for n, m in roots if not any(
            n.startswith(o + ".") or (o == "" and n) for o, _ in roots)]
        kept = []
        for prefix, root in roots:
            plan = root._get_dtype_plan(dtype)
            if not plan:
                continue
            rx, _, _ = build_glob_alternation(list(plan))
            for n, m in root.named_modules():
                if n and rx.search(n) and not any(
                        n.startswith(k + ".") for k in kept):
                    kept.append(n)
                    m.register_forward_pre_hook(
                        lambda _, a: tuple(_to(x, torch.float32) for x in a))
                    m.register_forward_hook(
                        lambda _, a, out: _to(out, dtype))
            for n, p in root.named_parameters():
                if rx.search(n):
                    p.data = p.data.to(torch.float32)
        self.kept = kept

    def load(self):
        for m, c in zip(self.masters.parameters(),
                        self.compute.parameters()):
            c.data.copy_(m.data)
            c.grad = None

    def gradients(self):
        for m, c in zip(self.masters.parameters(),
                        self.compute.parameters()):
            if c.grad is not None:  # a frozen parameter has none
                m.grad = c.grad.to(torch.float32)


def _to(x, dtype):
    if torch.is_tensor(x) and x.is_floating_point():
        return x.to(dtype)
    return x


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--make")
    p.add_argument("--hf", metavar="DIR")
    p.add_argument("--attn")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", required=True, help="the imported .mlir")
    p.add_argument("--log", required=True)
    p.add_argument("--tokens")
    p.add_argument("--inputs")
    p.add_argument("--labels")
    p.add_argument("--positions",
                   help="packed rows' positions [N, T] beside --inputs and "
                        "--labels (a step imported with --packed)")
    p.add_argument("--loss-output", type=int, default=-1)
    p.add_argument("--micro", type=int, default=1,
                   help="--hf: micro batches of the global batch")
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--mixed", choices=sorted(TORCH_DTYPES))
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--save-state", metavar="FILE",
                   help="torch.save the trained model's state dict")
    p.add_argument("--lora", metavar="SPEC",
                   help="--hf: train PEFT's LoRA adapters of the model")
    p.add_argument("--save-adapters", metavar="DIR",
                   help="PEFT's save_pretrained of the trained adapters")
    args = p.parse_args()

    torch.set_num_threads(1)
    text = open(args.model).read()
    log = [json.loads(line) for line in open(args.log) if line.strip()]
    # The reference reads the module (make()'s file or the Hugging Face
    # directory), the imported model's settings and the batches; the log
    # and the tolerance are what it is compared with. PEFT's adapters are
    # written by the run itself, so --save-adapters always computes.
    make_file = args.make.rpartition(":")[0] if args.make else None
    key = ref_cache.key(__file__, (args.make, args.attn, args.seed,
                                   args.loss_output, args.micro, args.mixed,
                                   args.lora, len(log)),
                        [args.model, make_file, args.hf, args.tokens,
                         args.inputs, args.labels, args.positions])
    ref = None if args.save_adapters else ref_cache.get(key)
    if ref is None:
        ref = reference(args, text, len(log))
        ref_cache.put(key, ref)
    if ref["kept"] is not None:
        print("kept in float32: " + ", ".join(ref["kept"]))
    worst = 0.0
    for entry, ref_loss in zip(log, ref["losses"]):
        got = entry["loss"]
        rel = abs(got - ref_loss) / abs(ref_loss)
        worst = max(worst, rel)
        if args.verbose:
            print("step %d: loss %.8f, reference %.8f, relative %.3g" % (
                entry["step"], got, ref_loss, rel))
        if rel > args.rtol:
            fail("step %d: loss %.8f, PyTorch's %.8f: relative difference "
                 "%.3g > %g" % (entry["step"], got, ref_loss, rel, args.rtol))
    if args.save_state:
        torch.save(ref["state"], args.save_state)
    print("%d steps: losses within %g relative of PyTorch's" % (len(log),
                                                                 args.rtol))
    print("worst relative difference %.2g" % worst)


def reference(args, text, steps):
    """PyTorch's run of `steps` steps: its losses, the parameters kept in
    float32 under --mixed (else None) and the final state dict; with
    --save-adapters it writes the trained adapters too."""
    if args.hf:
        module, example = hf_make(args, text)
    else:
        module, example = load_make(args.make)()
        if is_peft(module):
            module = HFStep(module)
    module.train()
    mixed = Mixed(module, args.mixed) if args.mixed else None
    if mixed:
        mixed.compute.train()
    values, clip = model_settings(text)
    trainable = [p for p in module.parameters() if p.requires_grad]
    opt = optimizer(trainable, values)
    B = example[0].shape[0]
    if args.micro < 1 or (args.micro > 1 and not args.hf) or \
            B % args.micro:
        fail("--micro %d: a divisor of the global batch %d, with --hf" % (
            args.micro, B))
    if args.tokens and re.search(r"\blabels same_tokens\b", text):
        batches = same_token_batches(args.tokens, B, example[0].shape[1],
                                     steps)
    elif args.tokens:
        batches = token_batches(args.tokens, B, example[0].shape[1],
                                example[0].dtype, steps)
    else:
        batches = npy_batches(args.inputs, args.labels, B, example[0].dtype,
                              example[1].dtype, steps, args.positions)
    if args.micro > 1 and mixed:
        fail("--micro and --mixed together are not a reference here")
    losses = []
    if args.positions and not args.hf:
        fail("--positions: a packed Hugging Face step (--hf)")
    for x, y, *rest in batches:
        pos = rest[0] if rest else None
        opt.zero_grad(set_to_none=True)
        if args.micro > 1:
            ref = accumulate(module, x, y, args.micro, pos)
        else:
            if mixed:
                mixed.load()
            step = mixed.compute if mixed else module
            out = step(x, y) if pos is None else step(x, y, positions=pos)
            loss = out[args.loss_output] if isinstance(out, tuple) else out
            loss.backward()
            if mixed:
                mixed.gradients()
            ref = loss.item()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(trainable, clip)
        opt.step()
        losses.append(ref)
    if args.save_adapters:
        module.model.save_pretrained(args.save_adapters)
    model = module.model if isinstance(module, HFStep) else module
    return {"losses": losses, "kept": mixed.kept if mixed else None,
            "state": {k: v.detach().clone() for k, v in
                      model.state_dict().items()}}


if __name__ == "__main__":
    main()
