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

DeepSeek-V3's block (`DeepseekV3MoE`, and the families that copy it:
GLM-4-MoE, dots.llm1, Solar-Open, EXAONE-MoE, ...) routes with a sigmoid:
the top k of sigmoid(logits) plus a correction bias (a buffer that only
chooses; a checkpoint's nonzero one is the op's bias operand, a frozen
parameter read from the weights and exported unchanged), within the best
`topk_group` of `n_group` groups of experts, the chosen sigmoids
renormalised (+ 1e-20) and times `routed_scaling_factor`
(`nn.moe_router`'s sigmoid, normalize, eps, scale and groups), and adds
ungated shared experts, a dense SwiGLU MLP traced as any module. Laguna's,
Flint's and DeepSeek-V2's routers are the same op with other attributes.

gpt-oss's block (`GptOssMLP`) is the same router with a bias and a softmax
over the top-k logits (the renormalised top k of the full softmax), and
experts stored as [E, in, out] with biases, gate and up interleaved, and a
clamped SwiGLU (`nn.clamped_swiglu`). Its attention adds a learned sink
per head to each softmax's denominator: gpt-oss's eager attention
function is traced as one call too and becomes `nn.attention` with
`sinks` (so are Granite-SWA's and MiMo-V2-Flash's, which compute the
same).

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
    # gpt-oss's softmax over its top-k logits, as Granite's.
    "GptOssTopKRouter": lambda m: True,
}

# The routers whose forward is DeepSeek-V3's (DeepseekV3TopkRouter):
# linear in fp32 -> sigmoid -> top k of the sigmoids plus
# e_score_correction_bias within the best topk_group of n_group groups ->
# the chosen sigmoids (renormalised with + 1e-20) times
# routed_scaling_factor.
_DEEPSEEK_ROUTERS = ("DeepseekV3TopkRouter", "DeepseekV32TopkRouter",
                     "Glm4MoeTopkRouter", "Glm4MoeLiteTopkRouter",
                     "GlmMoeDsaTopkRouter", "Dots1TopkRouter",
                     "Dots3NoteTextTopkRouter", "SolarOpenTopkRouter",
                     "ExaoneMoeTopkRouter", "AXK1TopkRouter",
                     "MiMoV2FlashTopkRouter", "HYV4TopkRouter",
                     "AXK2TopkRouter")

# Other routers: {class name: (nn.moe_router's attributes besides top_k,
# None) of the module, or (None, why it has none)}. Flint's and Laguna's:
# linear in fp32 -> top k of the sigmoids (sorted: the same set) ->
# renormalised by their plain sum; Flint's has no bias and renormalises
# when norm_topk_prob; Laguna's always renormalises and chooses by the
# sigmoids plus e_score_correction_bias, a frozen parameter (the op's bias
# operand). DeepSeek-V2's "greedy" one: the top k of the softmax, not
# renormalised, times routed_scaling_factor.
_OTHER_ROUTERS = {
    "FlintTopKRouter": lambda m: (
        {"sigmoid": True, "normalize": bool(m.norm_topk_prob)}, None),
    "LagunaTopKRouter": lambda m: (
        ({"sigmoid": True, "normalize": True}, None)
        if float(m.router_logit_softcapping) <= 0.0 else
        (None, "its router's logit soft-capping")),
    "DeepseekV2TopkRouter": lambda m: (
        (_scale(m), None) if m.topk_method == "greedy" else
        (None, "its router's %s top-k" % m.topk_method)),
}
_ROUTER_BIAS = {"LagunaTopKRouter": "e_score_correction_bias"}

# The experts modules with transformers' default layout: concatenated
# gate/up, [E, out, in], no bias, silu(gate) * up.
_EXPERTS = ("MixtralExperts", "Qwen3MoeExperts", "OlmoeExperts",
            "Qwen2MoeExperts", "GraniteMoeExperts", "GraniteMoeSharedExperts",
            "GraniteMoeSWAExperts", "MellumExperts", "DeepseekV3Experts",
            "DeepseekV32Experts", "Glm4MoeExperts", "Glm4MoeLiteExperts",
            "GlmMoeDsaExperts", "Dots1Experts", "Dots3NoteExperts",
            "SolarOpenExperts", "ExaoneMoeExperts", "AXK1Experts",
            "MiMoV2FlashExperts", "HYV4Experts", "FlintExperts",
            "LagunaExperts", "AXK2Experts", "DeepseekV2Experts")

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
    "GptOssMLP": lambda m: True,
    # DeepSeek-V3's forward: the routed experts plus the shared experts
    # (A.X-K1's then RMS-normalised, MiMo-V2-Flash's without them).
    "DeepseekV3MoE": lambda m: True,
    "DeepseekV32MoE": lambda m: True,
    "Glm4MoeMoE": lambda m: True,
    "Glm4MoeLiteMoE": lambda m: True,
    "GlmMoeDsaMoE": lambda m: True,
    "Dots1MoE": lambda m: True,
    "Dots3NoteTextMoE": lambda m: True,
    "SolarOpenMoE": lambda m: True,
    "ExaoneMoeSparseMoEBlock": lambda m: True,
    "AXK1MoE": lambda m: True,
    "MiMoV2FlashMoE": lambda m: True,
    "HYV4MoE": lambda m: True,
    "AXK2MoE": lambda m: True,
    "DeepseekV2Moe": lambda m: True,
    # Ungated shared experts; Laguna's routed experts' sum scaled.
    "FlintSparseMoeBlock": lambda m: True,
    "LagunaSparseMoeBlock": lambda m: True,
}

# gpt-oss's experts: [E, in, out] weights with biases, gate and up
# interleaved in gate_up_proj's columns, and its own clamped SwiGLU.
_GPT_OSS_EXPERTS = "GptOssExperts"

# What the MoE ops lack for blocks of transformers' that otherwise look
# like the ones above, named in their refusal.
_LACKING = {}

# The blocks whose router is not their `gate`.
_ROUTER_ATTR = {"GraniteMoeMoE": "router", "GraniteMoeSharedMoE": "router",
                "GraniteMoeSWAMoE": "router", "GptOssMLP": "router"}

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
                "transformers.models.mellum.modeling_mellum",
                "transformers.models.gpt_oss.modeling_gpt_oss")

# gpt-oss's modeling module (its experts' gating, its rotary embedding).
_SINK_ATTENTION_MODULE = "transformers.models.gpt_oss.modeling_gpt_oss"
# The modeling modules whose eager attention (with sinks) the step traces as
# one call. gpt-oss's appends the head's sink to each row of logits before
# the softmax; Granite-SWA's (and its MoE sibling's) scales the softmax by
# sigmoid(logsumexp(logits) - sink): both are exp(s_j) / (sum_i exp(s_i) +
# exp(sink)), nn.attention's sinks. MiMo-V2-Flash's is gpt-oss's on its
# sliding layers and a plain softmax on its full ones (sinks None); its
# values' head dim is not its queries' and keys' (lower.py pads one).
_SINK_ATTENTION_MODULES = (
    _SINK_ATTENTION_MODULE,
    "transformers.models.granite_swa.modeling_granite_swa",
    "transformers.models.granitemoe_swa.modeling_granitemoe_swa",
    "transformers.models.mimo_v2_flash.modeling_mimo_v2_flash")


def _transformers_module(m):
    return type(m).__module__.startswith("transformers.")


def is_router(m):
    name = type(m).__name__
    return (name in _ROUTERS or name in _DEEPSEEK_ROUTERS or
            name in _OTHER_ROUTERS) and _transformers_module(m)


def _deepseek_router(m):
    """(nn.moe_router's attributes, None) of a DeepSeek-V3 router, or
    (None, why it has none)."""
    bias = getattr(m, "e_score_correction_bias", None)
    if bias is not None and bias.is_meta:
        return None, "its router's e_score_correction_bias on the meta " \
            "device"
    attrs = {"sigmoid": True}
    if m.norm_topk_prob:
        attrs["normalize"], attrs["norm_eps"] = True, 1e-20
    attrs.update(_scale(m))
    # Keeping all n_group groups (or the one, or A.X-K2's None) chooses from
    # every expert.
    if m.num_group is None:
        return attrs, None
    groups, top = int(m.num_group), int(m.topk_group)
    if 1 < groups and top < groups:
        if type(m).__name__ == "AXK2TopkRouter":
            return None, "its router's group-limited top-k scoring the " \
                "other groups' experts 0, not -inf"
        attrs["n_group"], attrs["topk_group"] = groups, top
    return attrs, None


def _deepseek_bias(m):
    """The nonzero e_score_correction_bias buffer of a DeepSeek-V3 router
    (a checkpoint's), the op's bias operand as a frozen parameter; None
    when it has none or it is zero (it then adds nothing to the sigmoids,
    and the step has no bias, as from_config's models)."""
    if type(m).__name__ not in _DEEPSEEK_ROUTERS:
        return None
    bias = getattr(m, "e_score_correction_bias", None)
    if bias is None or not bool((bias != 0).any()):
        return None
    return bias


def _scale(m):
    f = float(m.routed_scaling_factor)
    return {} if f == 1.0 else {"scale": f}


def _router_attrs(m):
    """(nn.moe_router's attributes besides top_k, None) of the router m, or
    (None, why it has none)."""
    name = type(m).__name__
    if name in _DEEPSEEK_ROUTERS:
        return _deepseek_router(m)
    if name in _OTHER_ROUTERS:
        return _OTHER_ROUTERS[name](m)
    return ({"normalize": True} if _ROUTERS[name](m) else {}), None


def router_unsupported(m):
    """Why the router m has no lowering, or None."""
    return _router_attrs(m)[1]


def is_experts(m):
    return type(m).__name__ in _EXPERTS + (_GPT_OSS_EXPERTS,) and \
        _transformers_module(m)


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
    why = router_unsupported(gate)
    if why:
        return why
    if experts is None or not is_experts(experts):
        return "its experts"
    return experts_unsupported(experts)


def experts_unsupported(m):
    """Why the experts module m has no lowering, or None."""
    if type(m).__name__ == _GPT_OSS_EXPERTS:
        return _gpt_oss_experts_unsupported(m)
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


def _gpt_oss_experts_unsupported(m):
    layout = (getattr(m, "has_gate", True), getattr(m, "has_bias", False),
              getattr(m, "is_transposed", False),
              getattr(m, "is_concatenated", True),
              getattr(m, "has_post_expert_norm", False))
    if layout != (True, True, True, False, False):
        return "its experts' layout"
    gate = getattr(type(m), "_apply_gate", None)
    if gate is None or gate.__module__ != _SINK_ATTENTION_MODULE:
        return "its experts' gating"
    return None


def leaf_value(m, args, kwargs):
    """The value of leaf m's call for the trace: the experts' output has
    the shape of their input (their forward cannot run on shapes alone),
    a DeepSeek-V3 router's outputs their shapes; None to run the module."""
    if is_experts(m):
        x = args[0] if args else kwargs["hidden_states"]
        return torch.empty_like(x)
    if type(m).__name__ in _DEEPSEEK_ROUTERS:
        # Its correction bias is a buffer off the meta device.
        x = args[0] if args else kwargs["hidden_states"]
        rows, k = x.numel() // x.shape[-1], int(m.top_k)
        return (x.new_empty(rows, int(m.num_experts), dtype=torch.float32),
                x.new_empty(rows, k, dtype=torch.float32),
                x.new_empty(rows, k, dtype=torch.long))
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
    b = getattr(m, "bias", None)
    logits = low.linear(x, w, None if b is None else low.param(b, where),
                        where)
    tokens, experts = logits.shape
    k = int(m.top_k)
    attrs = {"top_k": k}
    more, why = _router_attrs(m)
    if why:
        # hf.py refuses these before tracing; a make() module's, here.
        where.fail("the MoE routing of %s is not supported: %s" % (
            type(m).__name__, why))
    attrs.update(more)
    operands = [logits]
    if type(m).__name__ in _ROUTER_BIAS:
        operands.append(low.param(
            getattr(m, _ROUTER_BIAS[type(m).__name__]), where))
    elif _deepseek_bias(m) is not None:
        operands.append(low.buffer(_deepseek_bias(m), where))
    op = low.g.emit("moe_router", operands, attrs,
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
    if type(m).__name__ == _GPT_OSS_EXPERTS:
        return _lower_gpt_oss_experts(low, m, x, idx, weights, where)
    gu_w = low.param(m.gate_up_proj, where)
    down_w = low.param(m.down_proj, where)
    tokens, hidden = x.shape
    experts, two_inter, _ = gu_w.shape
    s, rows, pos, offs = _dispatch(low, x, idx, experts, where)
    gu = low.emit("grouped_matmul", [rows, gu_w, offs],
                  {"transpose_rhs": True}, [(s, two_inter)], where)
    inter = two_inter // 2
    gate, up = low.g.emit("split", [gu], {"axis": 1},
                          [((s, inter), "f32"), ((s, inter), "f32")],
                          where).results
    a = low.emit("swiglu", [gate, up], {}, [(s, inter)], where)
    h = low.emit("grouped_matmul", [a, down_w, offs],
                 {"transpose_rhs": True}, [(s, hidden)], where)
    return low.emit("moe_combine", [h, pos, weights], {}, [(tokens, hidden)],
                    where)


def _dispatch(low, x, idx, experts, where):
    """nn.moe_dispatch of x [T, H] by the top-k indices idx [T, k]: the
    number of routed rows S = T * k, the rows [S, H] grouped by expert,
    each row's position and the experts' offsets."""
    tokens, hidden = x.shape
    s = tokens * idx.shape[1]
    op = low.g.emit("moe_dispatch", [x, idx], {"experts": experts},
                    [((s, hidden), "f32"), (tuple(idx.shape), idx.dtype),
                     ((experts,), idx.dtype)], where)
    rows, pos, offs = op.results
    return s, rows, pos, offs


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


def _ones_column(low, weights, where):
    """[T * k, 1] ones, one per routed row, computed from the routing
    weights (weights * 0 + 1, exact for finite weights) so that a batch
    divided over ranks or micro steps re-infers their shape, as an
    nn.fill's would not."""
    tokens, k = weights.shape
    col = low.emit("reshape", [weights], {}, [(tokens * k, 1)], where)
    zero = low.g.emit("fill", [], {"value": 0.0}, [((1,), "f32")],
                      where).results[0]
    one = low.g.emit("fill", [], {"value": 1.0}, [((1,), "f32")],
                     where).results[0]
    z = low.emit("mul", [col, zero], {}, [(tokens * k, 1)], where)
    return low.emit("add", [z, one], {}, [(tokens * k, 1)], where)


def _expert_bias(low, rows, ones, bias, offs, where):
    """rows + bias[e] on the rows of each expert e: the bias [E, F] is the
    grouped product of a column of ones with its [E, 1, F] form (1 * b is
    exact, and its weight gradient sums each expert's rows)."""
    s, f = rows.shape
    experts = bias.shape[0]
    # bias + 0, a copy: at stage 3 a parameter is freed after its last use,
    # and a reshape of the parameter itself would be a view of it read
    # after that.
    zero = low.g.emit("fill", [], {"value": 0.0}, [((f,), "f32")],
                      where).results[0]
    copy = low.emit("add", [bias, zero], {}, [(experts, f)], where)
    b3 = low.emit("reshape", [copy], {}, [(experts, 1, f)], where)
    b = low.emit("grouped_matmul", [ones, b3, offs], {}, [(s, f)], where)
    return low.emit("add", [rows, b], {}, [(s, f)], where)


def _lower_gpt_oss_experts(low, m, x, idx, weights, where):
    """GptOssExperts: gate_up = x W[e] + b[e] ([E, H, 2I], gate and up
    interleaved), the clamped SwiGLU, down = h Wd[e] + bd[e] ([E, I, H]),
    each token's rows weighted and summed."""
    gu_w = low.param(m.gate_up_proj, where)
    gu_b = low.param(m.gate_up_proj_bias, where)
    down_w = low.param(m.down_proj, where)
    down_b = low.param(m.down_proj_bias, where)
    tokens, hidden = x.shape
    experts, _, two_inter = gu_w.shape
    inter = two_inter // 2
    s, rows, pos, offs = _dispatch(low, x, idx, experts, where)
    gu = low.emit("grouped_matmul", [rows, gu_w, offs], {}, [(s, two_inter)],
                  where)
    ones = _ones_column(low, weights, where)
    gu = _expert_bias(low, gu, ones, gu_b, offs, where)
    # Column 2i is gate i and 2i + 1 up i: [S, I, 2] split on its last axis.
    pairs = low.emit("reshape", [gu], {}, [(s, inter, 2)], where)
    gate, up = low.g.emit("split", [pairs], {"axis": 2},
                          [((s, inter, 1), "f32"), ((s, inter, 1), "f32")],
                          where).results
    gate = low.emit("reshape", [gate], {}, [(s, inter)], where)
    up = low.emit("reshape", [up], {}, [(s, inter)], where)
    a = low.emit("clamped_swiglu", [gate, up],
                 {"alpha": float(m.alpha), "limit": float(m.limit)},
                 [(s, inter)], where)
    h = low.emit("grouped_matmul", [a, down_w, offs], {}, [(s, hidden)],
                 where)
    h = _expert_bias(low, h, ones, down_b, offs, where)
    return low.emit("moe_combine", [h, pos, weights], {}, [(tokens, hidden)],
                    where)


# -- attentions with sinks -----------------------------------------------------

def sink_attention(query, key, value, sinks, mask, scaling, sliding_window,
                   groups, dropout, origin=_SINK_ATTENTION_MODULE):
    """The eager attention with sinks (or None) of modeling module
    `origin`: its output ([batch, seq, heads, value head_dim]) for the
    trace's values; lower.py lowers it."""
    class _Attn:
        pass
    a = _Attn()
    a.sinks, a.num_key_value_groups, a.training = sinks, groups, False
    return _ORIGINAL_SINK_ATTENTION[origin](a, query, key, value, mask,
                                            scaling=scaling, dropout=0.0)[0]


# {modeling module name: its eager_attention_forward}
_ORIGINAL_SINK_ATTENTION = {}


def attention_calls(tracer, is_traced):
    """[(module, name, original, replacement)] of the functions traced as
    one call each when their tensors are traced: the eager attentions with
    sinks (_SINK_ATTENTION_MODULES) and gpt-oss's rotary embedding (halves
    rotated by [.., d / 2] tables, which no pattern of fuse.py takes)."""
    out = []
    for name in _SINK_ATTENTION_MODULES:
        mod = sys.modules.get(name)
        attn = getattr(mod, "eager_attention_forward", None)
        if attn is not None:
            _ORIGINAL_SINK_ATTENTION[name] = attn
            out.append((mod, "eager_attention_forward", attn,
                        _sink_call(tracer, is_traced, attn, name)))
    mod = sys.modules.get(_SINK_ATTENTION_MODULE)
    rope = getattr(mod, "_apply_rotary_emb", None)
    if rope is not None:
        _ORIGINAL_ROPE[0] = rope

        def rotate(x, cos, sin):
            if not is_traced((x,)):
                return rope(x, cos, sin)
            return tracer.create_proxy("call_function", gpt_oss_rope,
                                       (x, cos, sin), {})
        out.append((mod, "_apply_rotary_emb", rope, rotate))
    return out


def _sink_call(tracer, is_traced, attn, origin):
    def call(module, query, key, value, attention_mask, scaling,
             dropout=0.0, **kwargs):
        if not is_traced((query, key, value)):
            return attn(module, query, key, value, attention_mask,
                        scaling=scaling, dropout=dropout, **kwargs)
        o = tracer.create_proxy(
            "call_function", sink_attention,
            (query, key, value, module.sinks, attention_mask, scaling,
             kwargs.get("sliding_window"), module.num_key_value_groups,
             dropout, origin), {})
        return o, None
    return call


_ORIGINAL_ROPE = [None]


def gpt_oss_rope(x, cos, sin):
    """gpt-oss's _apply_rotary_emb, for the trace's values."""
    return _ORIGINAL_ROPE[0](x, cos, sin)


def is_gpt_oss_rope(fn):
    return fn is gpt_oss_rope


def is_sink_attention(fn):
    return fn is sink_attention
