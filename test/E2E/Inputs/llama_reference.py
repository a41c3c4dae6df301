#!/usr/bin/env python3
"""A PyTorch reference of zero-model-gen's Llama.

LlamaForCausalLM with Hugging Face's module names and semantics, written
here so that nothing from Hugging Face is needed: LlamaRMSNorm (fp32
normalization, rounded to the input dtype before the weight multiply),
rotary embeddings (inv_freq in fp32, cos/sin over both halves,
rotate_half), grouped-query causal attention (repeat_kv, 1/sqrt(head_dim),
softmax in fp32), SiLU-gated MLP, linears without bias in [out, in], the
head tied when the file has no lm_head.weight. The labels are given (the
runtime's targets), so the loss is a plain mean cross-entropy, as Hugging
Face's after its shift. Against transformers' own LlamaForCausalLM (eager
attention) its losses and gradients are bitwise equal in fp32, and in bf16
when the inv_freq buffer is kept in fp32 as nn.rope computes it.

  train ...   loads --export'ed weights strictly, trains them with
              torch.optim.AdamW (or, for kind = lion, the NumPy Lion
              below; for kind = sgd, torch.optim.SGD; for kind = muon,
              torch.optim.Muon on the 2-D hidden matrices and
              torch.optim.AdamW on the rest; for kind = adafactor,
              torch.optim.Adafactor; for kind = nadam, torch.optim.NAdam) configured from the model's optimizer attribute on
              the runtime's batches, and compares every step's
              loss with a --log-json file (and the final weights with an
              --export file)
  write ...   weights with the names and shapes of a file, drawn larger
              than the initializer's so that RoPE, the norms and the
              attention scale move the loss
"""

import argparse
import json
import os
import re
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "Inputs"))
import ref_cache  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_gpt2 import read_safetensors, write_safetensors  # noqa: E402


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


# --- LlamaForCausalLM -------------------------------------------------------


class LlamaRMSNorm(nn.Module):
    def __init__(self, C, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))
        self.eps = eps

    def forward(self, h):
        dtype = h.dtype
        h = h.to(torch.float32)
        variance = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(variance + self.eps)
        return self.weight * h.to(dtype)


def rotary(T, D, theta, dtype):
    """cos and sin [T, D] as LlamaRotaryEmbedding computes them."""
    inv_freq = 1.0 / (theta ** (
        torch.arange(0, D, 2, dtype=torch.int64).float() / D))
    pos = torch.arange(T, dtype=torch.int64).float()
    freqs = inv_freq[:, None].float() @ pos[None, :].float()  # [D/2, T]
    emb = torch.cat((freqs.t(), freqs.t()), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x):
    x1, x2 = x[..., :x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, n):
    B, KV, T, D = x.shape
    if n == 1:
        return x
    return x[:, :, None, :, :].expand(B, KV, n, T, D).reshape(B, KV * n, T, D)


class LlamaAttention(nn.Module):
    def __init__(self, C, H, KV):
        super().__init__()
        self.H, self.KV, self.D = H, KV, C // H
        self.q_proj = nn.Linear(C, H * self.D, bias=False)
        self.k_proj = nn.Linear(C, KV * self.D, bias=False)
        self.v_proj = nn.Linear(C, KV * self.D, bias=False)
        self.o_proj = nn.Linear(H * self.D, C, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        heads = lambda t, n: t.view(B, T, n, self.D).transpose(1, 2)
        q = heads(self.q_proj(x), self.H)
        k = heads(self.k_proj(x), self.KV)
        v = heads(self.v_proj(x), self.KV)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = repeat_kv(k, self.H // self.KV)
        v = repeat_kv(v, self.H // self.KV)
        w = (q @ k.transpose(2, 3)) * self.D**-0.5
        mask = torch.full((T, T), torch.finfo(w.dtype).min,
                          dtype=w.dtype).triu(1)
        w = F.softmax(w + mask, dim=-1, dtype=torch.float32).to(q.dtype)
        a = (w @ v).transpose(1, 2).reshape(B, T, -1)
        return self.o_proj(a)


class LlamaMLP(nn.Module):
    def __init__(self, C, Fd):
        super().__init__()
        self.gate_proj = nn.Linear(C, Fd, bias=False)
        self.up_proj = nn.Linear(C, Fd, bias=False)
        self.down_proj = nn.Linear(Fd, C, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, C, H, KV, Fd, eps):
        super().__init__()
        self.self_attn = LlamaAttention(C, H, KV)
        self.mlp = LlamaMLP(C, Fd)
        self.input_layernorm = LlamaRMSNorm(C, eps)
        self.post_attention_layernorm = LlamaRMSNorm(C, eps)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, V, C, H, KV, Fd, L, eps):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, C)
        self.layers = nn.ModuleList(
            LlamaDecoderLayer(C, H, KV, Fd, eps) for _ in range(L))
        self.norm = LlamaRMSNorm(C, eps)


class LlamaForCausalLM(nn.Module):
    def __init__(self, V, C, H, KV, Fd, L, eps, theta, tied):
        super().__init__()
        self.model = LlamaModel(V, C, H, KV, Fd, L, eps)
        self.lm_head = nn.Linear(C, V, bias=False)
        if tied:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.D, self.theta = C // H, theta

    def forward(self, tokens, targets):
        x = self.model.embed_tokens(tokens)
        cos, sin = rotary(tokens.shape[1], self.D, self.theta, x.dtype)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        logits = self.lm_head(self.model.norm(x))
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                               targets.reshape(-1))


# --- Lion -------------------------------------------------------------------


class NumpyLion:
    """DeepSpeed's Lion (deepspeed/ops/lion, cpu_lion) in NumPy fp32, in its
    operation order, over the torch parameters' .grad:
    c = beta1*m + (1-beta1)*g; p = p*(1 - lr*wd) - lr*sign(c);
    m = beta2*m + (1-beta2)*g, with sign(0) = 0 and one fp32 state."""

    def __init__(self, groups, lr, betas):
        self.groups = groups
        f = np.float32
        self.lr = f(lr)
        self.beta1, self.beta2 = f(betas[0]), f(betas[1])
        self.one_minus = (f(1.0 - betas[0]), f(1.0 - betas[1]))
        self.m = {}

    def step(self):
        with torch.no_grad():
            for g in self.groups:
                decay = np.float32(1.0 - float(self.lr) * g["weight_decay"])
                for p in g["params"]:
                    grad = p.grad.detach().numpy().astype(np.float32)
                    m = self.m.setdefault(id(p), np.zeros_like(grad))
                    w = p.detach().numpy()
                    c = self.beta1 * m + self.one_minus[0] * grad
                    w = w * decay - self.lr * np.sign(c).astype(np.float32)
                    self.m[id(p)] = self.beta2 * m + self.one_minus[1] * grad
                    p.copy_(torch.from_numpy(w.astype(np.float32)))

    def zero_grad(self, set_to_none=True):
        for g in self.groups:
            for p in g["params"]:
                p.grad = None


class MuonWithAdamW:
    """torch.optim.Muon on the 2-D hidden matrices (the projections of the
    attention and the MLP) and torch.optim.AdamW on every other parameter
    (embeddings, head, norms): DeepSpeed's split, chosen here by module
    name, independently of the compiler's isMuonMatrix."""

    def __init__(self, model, groups, muon, lr, betas, eps):
        decay = {id(p): d for d, ps in groups.items() for p in ps}
        matrices, others = {}, {}
        for n, p in model.named_parameters():
            hidden = p.dim() == 2 and ".layers." in n
            (matrices if hidden else others).setdefault(
                decay[id(p)], []).append(p)
        self.opts = [torch.optim.Muon(
            [{"params": ps, "weight_decay": d} for d, ps in matrices.items()],
            **muon)]
        if others:
            self.opts.append(torch.optim.AdamW(
                [{"params": ps, "weight_decay": d}
                 for d, ps in others.items()],
                lr=lr, betas=betas, eps=eps, foreach=False))

    def step(self):
        for o in self.opts:
            o.step()

    def zero_grad(self, set_to_none=True):
        for o in self.opts:
            o.zero_grad(set_to_none=set_to_none)


# --- commands ---------------------------------------------------------------


def model_config(text):
    """The batch, sequence length and optimizer of a generated model."""
    m = re.search(r"%tokens: tensor<(\d+)x(\d+)xi(?:32|64)>", text)
    attr = re.search(r"#zero\.optimizer<([^>]*)>", text).group(1)
    values = dict(kv.split(" = ") for kv in attr.split(", "))
    get = lambda k, d: float(values.get(k, d))
    opt = (values["kind"], get("lr", 1e-3), get("beta1", 0.9),
           get("beta2", 0.999), get("eps", 1e-8), get("weight_decay", 0.0))
    sgd = {"momentum": get("momentum", 0.0),
           "dampening": get("dampening", 0.0),
           "nesterov": values.get("nesterov", "false") == "true"}
    if values["kind"] == "muon":
        # torch.optim.Muon's keywords, its defaults where the attribute
        # leaves them out.
        adjust = values.get("adjust_lr_fn", "original")
        sgd = {"lr": get("muon_lr", 1e-3),
               "momentum": get("muon_momentum", 0.95),
               "nesterov": values.get("muon_nesterov", "true") == "true",
               "ns_coefficients": (get("ns_a", 3.4445), get("ns_b", -4.775),
                                   get("ns_c", 2.0315)),
               "eps": get("ns_eps", 1e-7),
               "ns_steps": int(get("ns_steps", 5)),
               "adjust_lr_fn": None if adjust == "original" else adjust}
    if values["kind"] == "nadam":
        # torch.optim.NAdam's own keywords.
        sgd = {"momentum_decay": get("momentum_decay", 4e-3),
               "decoupled_weight_decay":
                   values.get("decoupled_weight_decay", "false") == "true"}
    if values["kind"] == "adafactor":
        # torch.optim.Adafactor's keywords; eps1 < 0 is its None.
        eps1 = get("eps1", -1.0)
        sgd = {"beta2_decay": get("beta2_decay", -0.8),
               "eps": (None if eps1 < 0 else eps1, get("eps2", 1e-3)),
               "d": get("d", 1.0),
               "maximize": values.get("maximize", "false") == "true"}
    return int(m.group(1)), int(m.group(2)), opt, sgd


def load_model(path, args, dtype=torch.float32):
    _, tensors = read_safetensors(path)
    V, C = tensors["model.embed_tokens.weight"].shape
    L = len({n.split(".")[2] for n in tensors
             if n.startswith("model.layers.")})
    Fd = tensors["model.layers.0.mlp.gate_proj.weight"].shape[0]
    tied = "lm_head.weight" not in tensors
    model = LlamaForCausalLM(V, C, args.heads, args.kv_heads, Fd, L,
                             args.norm_eps, args.rope_theta, tied)
    state = {n: torch.from_numpy(a) for n, a in tensors.items()}
    if tied:
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    model.load_state_dict(state, strict=True)
    return model.to(dtype), len(tensors), tied


def batches(path, B, T, steps):
    """The rows the runtime's --data reader gives each step."""
    tokens = np.fromfile(path, dtype="<u2").astype(np.int64)
    n = len(tokens)
    for step in range(1, steps + 1):
        first = (step - 1) * B
        x = np.empty((B, T), np.int64)
        y = np.empty((B, T), np.int64)
        for r in range(B):
            start = ((first + r) % n) * T % n
            idx = (start + np.arange(T + 1)) % n
            x[r], y[r] = tokens[idx[:-1]], tokens[idx[1:]]
        yield torch.from_numpy(x), torch.from_numpy(y)


def reference(args, steps):
    """The reference run of `steps` steps: its losses, the number of tensors
    loaded, whether the head is tied, the weight-decay groups (decay, number
    of tensors) and the final fp32 weights."""
    torch.manual_seed(0)
    B, T, (kind, lr, beta1, beta2, eps, wd), sgd = model_config(
        open(args.model).read())
    if kind not in ("adamw", "lion", "sgd", "muon", "adafactor", "nadam"):
        fail("the model's optimizer is %s, not adamw, lion, sgd, muon, "
             "adafactor or nadam" % kind)
    if args.nesterov is not None:
        sgd["nesterov"] = args.nesterov == "true"
    master, count, tied = load_model(args.init, args)
    # Mixed precision as the runtime does it: fp32 masters and AdamW, the
    # forward and backward of a 16-bit copy.
    compute = {"f32": torch.float32, "bf16": torch.bfloat16}[args.compute]
    work = master if compute == torch.float32 else load_model(
        args.init, args, compute)[0]
    # Weight-decay groups: a zero.param with its own weight_decay is in its
    # value's group, the others in the optimizer's.
    text = open(args.model).read()
    decays = {m.group(1): float(m.group(2)) for m in re.finditer(
        r"zero\.param @(\S+) : .* weight_decay (\S+)", text)}
    groups = {}
    for n, p in master.named_parameters():
        groups.setdefault(decays.get(n, wd), []).append(p)
    if kind == "lion":
        opt = NumpyLion([{"params": ps, "weight_decay": d}
                         for d, ps in groups.items()], lr, (beta1, beta2))
    elif kind == "sgd":
        # PyTorch's own SGD, its single-tensor loop.
        opt = torch.optim.SGD([{"params": ps, "weight_decay": d}
                               for d, ps in groups.items()],
                              lr=lr, foreach=False, **sgd)
    elif kind == "muon":
        opt = MuonWithAdamW(master, groups, sgd, lr, (beta1, beta2), eps)
    elif kind == "adafactor":
        # PyTorch's own Adafactor, its single-tensor loop.
        opt = torch.optim.Adafactor([{"params": ps, "weight_decay": d}
                                     for d, ps in groups.items()],
                                    lr=lr, foreach=False, **sgd)
    elif kind == "nadam":
        # PyTorch's own NAdam, its single-tensor loop.
        opt = torch.optim.NAdam([{"params": ps, "weight_decay": d}
                                 for d, ps in groups.items()],
                                lr=lr, betas=(beta1, beta2), eps=eps,
                                foreach=False, **sgd)
    else:
        opt = torch.optim.AdamW([{"params": ps, "weight_decay": d}
                                 for d, ps in groups.items()],
                                lr=lr, betas=(beta1, beta2), eps=eps,
                                foreach=False)
    losses = []
    for x, y in batches(args.tokens, B, T, steps):
        if work is not master:
            with torch.no_grad():
                for w, p in zip(work.parameters(), master.parameters()):
                    w.copy_(p)
        work.zero_grad(set_to_none=True)
        loss = work(x, y)
        loss.backward()
        if work is not master:
            for w, p in zip(work.parameters(), master.parameters()):
                p.grad = w.grad.float()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    state = master.state_dict()
    if tied:
        del state["lm_head.weight"]
    return {"losses": losses, "count": count, "tied": tied,
            "groups": sorted((d, len(ps)) for d, ps in groups.items())
            if decays else [],
            "state": {n: t.detach().numpy().copy() for n, t in state.items()}}


def cmd_train(args):
    log = [json.loads(line) for line in open(args.log) if line.strip()]
    # The reference reads the model, its weights and the tokens; the log
    # and the tolerances are what it is compared with.
    key = ref_cache.key(__file__, (args.heads, args.kv_heads, args.rope_theta,
                                   args.norm_eps, args.compute, args.nesterov,
                                   len(log)),
                        [args.model, args.init, args.tokens])
    ref = ref_cache.get(key)
    if ref is None:
        ref = reference(args, len(log))
        ref_cache.put(key, ref)
    worst = 0.0
    for entry, ref_loss in zip(log, ref["losses"]):
        if args.check_peak and entry["peak_bytes"] != entry[
                "planned_peak_bytes"]:
            fail("step %d: measured peak %d != planned %d" %
                 (entry["step"], entry["peak_bytes"],
                  entry["planned_peak_bytes"]))
        got = entry["loss"]
        rel = abs(got - ref_loss) / abs(ref_loss)
        worst = max(worst, rel)
        if args.verbose:
            print("step %d: loss %.8f, reference %.8f, relative %.3g" %
                  (entry["step"], got, ref_loss, rel))
        if rel > args.rtol:
            fail("step %d: loss %.8f, reference %.8f: relative difference "
                 "%.3g > %g" % (entry["step"], got, ref_loss, rel, args.rtol))
    print("%d tensors loaded (strict, head %s); %d steps: losses within %g "
          "relative" % (ref["count"], "tied" if ref["tied"] else "untied",
                        len(log), args.rtol))
    if args.check_peak:
        print("measured peak %d == planned" % log[-1]["peak_bytes"])
    if ref["groups"]:
        print("weight-decay groups: %s" % ", ".join(
            "%d tensors with %g" % (n, d) for d, n in ref["groups"]))
    if args.final:
        _, final = read_safetensors(args.final)
        state = ref["state"]
        if set(final) != set(state):
            fail("the final file has other tensors: %s" %
                 sorted(set(final) ^ set(state)))
        diff = max(np.abs(final[n] - state[n]).max() for n in final)
        if diff > args.weight_atol:
            fail("final weights differ by %.3g > %g" % (diff,
                                                        args.weight_atol))
        print("final weights within %g" % args.weight_atol)


def cmd_write(args):
    rng = np.random.default_rng(args.seed)
    _, like = read_safetensors(args.like)
    entries = []
    for name in sorted(like):
        shape = like[name].shape
        if len(shape) == 1:
            a = 1.0 + rng.normal(0.0, 0.2, shape)
        else:
            a = rng.normal(0.0, args.std, shape)
        entries.append((name, "F32", shape, a.astype("<f4").tobytes()))
    write_safetensors(args.out, entries, {"format": "pt"})
    print("wrote %d tensors" % len(entries))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("train")
    s.add_argument("--model", required=True, help="the generated .mlir")
    s.add_argument("--init", required=True, help="the initial weights")
    s.add_argument("--tokens", required=True)
    s.add_argument("--log", required=True)
    s.add_argument("--final", help="weights the run exported at its end")
    s.add_argument("--heads", type=int, required=True)
    s.add_argument("--kv-heads", type=int, required=True)
    s.add_argument("--rope-theta", type=float, required=True)
    s.add_argument("--norm-eps", type=float, required=True)
    s.add_argument("--compute", choices=["f32", "bf16"], default="f32")
    s.add_argument("--rtol", type=float, default=1e-5)
    s.add_argument("--weight-atol", type=float, default=1e-5)
    s.add_argument("--verbose", action="store_true")
    s.add_argument("--nesterov", choices=["true", "false"],
                   help="SGD: override the model's nesterov (a reference "
                        "that must not match)")
    s.add_argument("--check-peak", action="store_true",
                   help="every step's measured peak must be its plan's")
    s = sub.add_parser("write")
    s.add_argument("out")
    s.add_argument("--like", required=True,
                   help="a file with the names and shapes to write")
    s.add_argument("--std", type=float, default=0.2)
    s.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.cmd == "train":
        cmd_train(args)
    else:
        cmd_write(args)


if __name__ == "__main__":
    main()
