"""Mixture-of-experts blocks of transformers 5.x onto the `nn` MoE ops.

transformers writes the sparse block of Mixtral, Qwen3-MoE, OLMoE,
Qwen2-MoE and Granite-MoE (and of the families that copy one of them,
Granite-MoE-Shared and Mellum) the same way: a router module (`gate`,
Granite's `router`, a `*TopKRouter`: a linear layer, an fp32 softmax, top-k
and an optional renormalisation) returning (logits, weights, experts), and
an experts module (`experts`, fused 3-D tensors `gate_up_proj` [E, 2I, H]
and `down_proj` [E, H, I] run by the grouped products of
`use_experts_implementation`). Their forwards compute with
data-dependent shapes (sorting, histograms, a loop over the experts hit),
which tracing cannot follow, so both are traced as leaves: the router
becomes `nn.matmul` + `nn.moe_router`, the experts `nn.moe_dispatch`, two
`nn.grouped_matmul`s around `nn.swiglu` and `nn.moe_combine`, whatever the
routing. Each family's `load_balancing_loss_func` (the auxiliary loss that
`output_router_logits` adds) is traced as one call too and becomes
`nn.moe_aux_loss` over the layers' router logits concatenated.

The rest of a block's forward is traced as any module's: Qwen2-MoE's
shared expert (a dense SwiGLU MLP on every token, times the sigmoid of
its `shared_expert_gate`) becomes the ops of its linear layers and
activations, added to the experts' output.

A block whose router or experts this module does not know keeps the
standard refusal naming it (hf.py).
"""

import sys

import torch

# The routers whose forward is exactly linear -> softmax in fp32 -> topk ->
# (renormalise): their class name and whether they renormalise.
_ROUTERS = {
    "MixtralTopKRouter": lambda m: True,
    "Qwen3MoeTopKRouter": lambda m: bool(m.norm_topk_prob),
    "OlmoeTopKRouter": lambda m: bool(m.norm_topk_prob),
    "Qwen2MoeTopKRouter": lambda m: bool(m.norm_topk_prob),
    # Granite's softmax over the top-k logits is the top-k probabilities
    # renormalised (the full softmax's denominator cancels), in the same
    # order (softmax is monotonic).
    "GraniteMoeTopKRouter": lambda m: True,
    "GraniteMoeSharedTopKRouter": lambda m: True,
    "GraniteMoeSWATopKRouter": lambda m: True,
    "MellumTopKRouter": lambda m: bool(m.norm_topk_prob),
}

# The experts modules with transformers' default layout: concatenated
# gate/up, [E, out, in], no bias, silu(gate) * up.
_EXPERTS = ("MixtralExperts", "Qwen3MoeExperts", "OlmoeExperts",
            "Qwen2MoeExperts", "GraniteMoeExperts", "GraniteMoeSharedExperts",
            "GraniteMoeSWAExperts", "MellumExperts")

# The sparse blocks made of one router (`gate`) and one experts module
# (`experts`), whose forward is otherwise traceable: the routing attributes
# each must have (Mixtral's jitter noise draws random numbers in training).
_BLOCKS = {
    "MixtralSparseMoeBlock": lambda m: getattr(m, "jitter_noise", 0) == 0,
    "Qwen3MoeSparseMoeBlock": lambda m: True,
    "OlmoeSparseMoeBlock": lambda m: True,
    "Qwen2MoeSparseMoeBlock": lambda m: True,
    "GraniteMoeMoE": lambda m: True,
    "GraniteMoeSharedMoE": lambda m: True,
    "GraniteMoeSWAMoE": lambda m: True,
    "MellumSparseMoeBlock": lambda m: True,
}

# What the MoE ops lack for blocks of transformers' that otherwise look
# like the ones above, named in their refusal.
_LACKING = {
    "GptOssMLP": "its experts' clamped SwiGLU (swiglu_limit, alpha) over "
                 "interleaved gate/up columns with biases, its router's "
                 "bias, and its attention's sinks",
}

# The blocks whose router is not their `gate`.
_ROUTER_ATTR = {"GraniteMoeMoE": "router", "GraniteMoeSharedMoE": "router",
                "GraniteMoeSWAMoE": "router"}

# The modeling modules whose load_balancing_loss_func the step traces as
# one call.
_AUX_MODULES = ("transformers.models.mixtral.modeling_mixtral",
                "transformers.models.qwen3_moe.modeling_qwen3_moe",
                "transformers.models.olmoe.modeling_olmoe",
                "transformers.models.qwen2_moe.modeling_qwen2_moe",
                "transformers.models.granitemoe.modeling_granitemoe",
                "transformers.models.granitemoeshared."
                "modeling_granitemoeshared",
                "transformers.models.granitemoe_swa.modeling_granitemoe_swa",
                "transformers.models.mellum.modeling_mellum")


def _transformers_module(m):
    return type(m).__module__.startswith("transformers.")


def is_router(m):
    return type(m).__name__ in _ROUTERS and _transformers_module(m)


def is_experts(m):
    return type(m).__name__ in _EXPERTS and _transformers_module(m)


def is_leaf(m):
    """Whether tracing keeps module m as one call (a router or experts)."""
    return is_router(m) or is_experts(m)


def router_of(m):
    """The router module of the sparse block m, or None."""
    return getattr(m, _ROUTER_ATTR.get(type(m).__name__, "gate"), None)


def unsupported_part(m):
    """Why the sparse block m cannot be imported, or None when it can."""
    name = type(m).__name__
    if name in _LACKING and _transformers_module(m):
        return _LACKING[name]
    if name not in _BLOCKS or not _transformers_module(m):
        if isinstance(getattr(m, "shared_expert", None), torch.nn.Module) \
                or isinstance(getattr(m, "shared_experts", None),
                              torch.nn.Module):
            return "its shared expert"
        return "its block"
    if not _BLOCKS[name](m):
        return "its router's jitter noise (random in training)"
    gate, experts = router_of(m), getattr(m, "experts", None)
    if gate is None or not is_router(gate):
        return "its router"
    if experts is None or not is_experts(experts):
        return "its experts"
    return experts_unsupported(experts)


def experts_unsupported(m):
    """Why the experts module m has no lowering, or None."""
    from transformers.integrations import moe as tf_moe
    layout = (getattr(m, "has_gate", True), getattr(m, "has_bias", False),
              getattr(m, "is_transposed", False),
              getattr(m, "is_concatenated", True),
              getattr(m, "has_post_expert_norm", False))
    if layout != (True, False, False, True, False):
        return "its experts' layout (transposed, interleaved, biased or " \
               "normalised experts)"
    if getattr(type(m), "_apply_gate", None) is not getattr(
            tf_moe, "_default_apply_gate", None):
        return "its experts' gating"
    act = getattr(m, "act_fn", None)
    if not isinstance(act, torch.nn.SiLU) and \
            type(act).__name__ not in ("SiLUActivation", "SiLU"):
        return "its experts' activation %s (silu only)" % type(act).__name__
    return None


def leaf_value(m, args, kwargs):
    """The value of leaf m's call for the trace: the experts' output has
    the shape of their input (their forward cannot run on shapes alone);
    None to run the module."""
    if is_experts(m):
        x = args[0] if args else kwargs["hidden_states"]
        return torch.empty_like(x)
    return None


def aux_functions():
    """[(module, load_balancing_loss_func)] of the imported MoE modeling
    modules."""
    out = []
    for name in _AUX_MODULES:
        mod = sys.modules.get(name)
        fn = getattr(mod, "load_balancing_loss_func", None)
        if fn is not None:
            out.append((mod, fn))
    return out


def is_aux_function(fn):
    return any(fn is f for _, f in aux_functions())


# -- lowering -----------------------------------------------------------------

def lower_router(low, c):
    """(logits [T, E], weights [T, k], experts [T, k] i32) of a router."""
    m, where = c.module, c.where
    x = low.float_sym(c.x, where, "the router's input")
    if len(x.shape) != 2:
        x = low.emit("reshape", [x], {}, [(_rows(x.shape), x.shape[-1])],
                     where)
    w = low.param(m.weight, where)
    logits = low.linear(x, w, None, where)
    tokens, experts = logits.shape
    k = int(m.top_k)
    attrs = {"top_k": k}
    if _ROUTERS[type(m).__name__](m):
        attrs["normalize"] = True
    op = low.g.emit("moe_router", [logits], attrs,
                    [((tokens, k), "f32"), ((tokens, k), "i32")], where)
    return (logits,) + tuple(op.results)


def _rows(shape):
    n = 1
    for d in shape[:-1]:
        n *= d
    return n


def lower_experts(low, c):
    """The experts' output [T, H] from their input, experts and weights."""
    m, where = c.module, c.where
    x = low.float_sym(c.arg(0, "hidden_states"), where, "the experts' input")
    idx = c.arg(1, "top_k_index")
    weights = low.float_sym(c.arg(2, "top_k_weights"), where,
                            "the routing weights")
    why = experts_unsupported(m)
    if why:
        where.fail("the MoE routing of %s is not supported: %s" % (
            type(m).__name__, why))
    gu_w = low.param(m.gate_up_proj, where)
    down_w = low.param(m.down_proj, where)
    tokens, hidden = x.shape
    k = idx.shape[1]
    experts, two_inter, _ = gu_w.shape
    inter = two_inter // 2
    s = tokens * k
    op = low.g.emit("moe_dispatch", [x, idx], {"experts": experts},
                    [((s, hidden), "f32"), (tuple(idx.shape), idx.dtype),
                     ((experts,), idx.dtype)], where)
    rows, pos, offs = op.results
    gu = low.emit("grouped_matmul", [rows, gu_w, offs],
                  {"transpose_rhs": True}, [(s, two_inter)], where)
    gate, up = low.g.emit("split", [gu], {"axis": 1},
                          [((s, inter), "f32"), ((s, inter), "f32")],
                          where).results
    a = low.emit("swiglu", [gate, up], {}, [(s, inter)], where)
    h = low.emit("grouped_matmul", [a, down_w, offs],
                 {"transpose_rhs": True}, [(s, hidden)], where)
    return low.emit("moe_combine", [h, pos, weights], {}, [(tokens, hidden)],
                    where)


def lower_aux(low, logits, top_k, mask, where):
    """transformers' load_balancing_loss_func(gate_logits, num_experts,
    top_k, attention_mask): nn.moe_aux_loss of the layers' logits
    concatenated (the same counts and probability sums over all rows)."""
    if mask is not None:
        where.fail("the load-balancing loss with an attention mask (the "
                   "step has none)")
    if not isinstance(logits, (tuple, list)) or not logits:
        where.fail("the load-balancing loss without router logits")
    logits = [low.float_sym(x, where, "router logits") for x in logits]
    rows = sum(x.shape[0] for x in logits)
    cat = logits[0] if len(logits) == 1 else low.emit(
        "concat", logits, {"axis": 0}, [(rows, logits[0].shape[1])], where)
    return low.emit("moe_aux_loss", [cat], {"top_k": int(top_k)}, [()], where)
