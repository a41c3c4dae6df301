"""Patterns of several torch operations that one `nn` op computes.

Each pattern is matched on the lowered graph and checked exactly (shapes,
the constant tables' values, the mask), then replaced; the ops it consumed
die and are pruned. What no pattern takes stays a pseudo op, and
`check_lowered` reports it at its torch operation.

  RMS norm   w * (x * rsqrt(mean(x ** 2, -1, keepdim=True) + eps))
             (x * x for x ** 2, either operand order, float casts; w a
             parameter or computed from one, as Gemma's (1 + w), or none:
             a row of ones; pow(v, -0.5) for rsqrt(v))
  LayerNorm  w * ((x - m) * rsqrt(mean((x - m) ** 2, -1, keepdim=True) +
             eps)), m = mean(x, -1, keepdim=True), written out (Cohere's);
             w as an RMS norm's; the bias a row of zeros
  rope       x * cos + rotate_half(x) * sin, rotate_half(x) =
             cat(-x[..., h:], x[..., :h]), cos/sin Hugging Face's tables
             for a theta, or those transformers computes from a rotary
             module's own inv_freq and attention_scaling (Llama 3's,
             YaRN's, Gemma 4's proportional rope), which nn.rope then
             holds; on [batch, heads, seq, head_dim] or (Gemma 4)
             [batch, seq, heads, head_dim];
             of a partial rotary embedding (x[..., :r] rotated,
             x[..., r:] passed through) the slices left become nn.split;
             NanoChat's rotate_half, cat(x[..., h:], -x[..., :h]), turns
             by the negative angle (nn.rope inverse);
             interleaved (GPT-J, Cohere, GLM): rotate_every_two(x) =
             stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2) with
             tables by repeat_interleave, on [batch, heads, seq, head_dim]
             or (GPT-J) [batch, seq, heads, head_dim];
             DeepSeek's pairs, cat(e * cos - o * sin, o * cos + e * sin)
             of e = x[..., 0::2], o = x[..., 1::2]: nn.rope of x
             de-interleaved (fuse_rope_pairs);
             --packed: cos/sin a rotary module's at the step's
             position_ids (packed.py), nn.rope with `positions`
  attention  softmax(q @ k^T * s [masked causally]) @ v, the mask a
             masked_fill with -inf above the diagonal or an added table
             with -inf (or the dtype's min, or -1e4 and less) there, or
             openai-gpt's w * b + -1e4 * (1 - b), before or (CodeGen)
             after the scale; an added ALiBi table (MPT's position_bias,
             BLOOM's alibi by torch.baddbmm on [batch * heads, seq, seq]);
             XGLM's max(masked scores, float32's lowest) and its softmax
             on [batch * heads, seq, seq]; --packed: the mask of packed
             documents added (nn.attention's `segments`); k and v
             repeated per query head group (repeat_kv, repeat_interleave)
             are read once;
             values of another head dim than q and k (multi-head latent
             attention) padded with zeros (attention)
  SwiGLU     silu(gate) * up
  GELU       0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3)))
             (GPT-2's gelu_new), the tanh approximation nn.gelu computes

A square no pattern took (squared ReLU's relu(x) ** 2) is nn.mul(x, x); an
expand no pattern took is nn.concat of copies; a product with a constant
table of one value throughout is nn.scale by it; a
sum with a constant sinusoidal position table (XGLM's, CTRL's) adds that
table as nn.rope ... inverse of a constant row computes it.
"""

import math

import torch

from .fuse_attention import fuse_attention
from .fuse_match import producer, single_use
# rotary_tables too: the importer reads it from here.
from .fuse_rope import (fuse_rope, fuse_rope_pairs,  # noqa: F401
                        fuse_rope_positions, rotary_tables)
from .nn_ops import OPS as NN_OPS


# -- RMS norm --------------------------------------------------------------


def _rms_parts(g, r):
    """(x, eps) when rsqrt op r computes rsqrt(mean(x ** 2, -1) + eps)."""
    add = producer(r.operands[0], "add_scalar")
    mean = add and producer(add.operands[0], "mean_last")
    if not mean or add.attrs["value"] <= 0:
        return None, None
    sq = mean.operands[0]
    if producer(sq, "square"):
        return sq.op.operands[0], add.attrs["value"]
    if producer(sq, "mul") and sq.op.operands[0] is sq.op.operands[1]:
        return sq.op.operands[0], add.attrs["value"]
    return None, None


def _weight_of(mul, value, x):
    """The 1-D tensor of x's features that op `mul` multiplies `value` by, if
    any: a parameter, or one computed from it (Gemma's 1 + w)."""
    if mul.kind != "mul" or len(mul.operands) != 2:
        return None
    w = mul.operands[1] if mul.operands[0] is value else mul.operands[0]
    if w is value or w is x or w.shape != (x.shape[-1],):
        return None
    return w


def _replace(g, old_op, kind, operands, attrs, shape):
    op = g.emit(kind, operands, attrs, [(shape, "f32")], old_op.where)
    g.ops.remove(op)
    g.ops.insert(g.ops.index(old_op), op)
    g.replace_uses(old_op.results[0], op.results[0])
    return op


def _insert_fill(g, before, value, shape, where):
    """An nn.fill of `shape` placed before op `before`."""
    op = g.emit("fill", [], {"value": value}, [(shape, "f32")], where)
    g.ops.remove(op)
    g.ops.insert(g.ops.index(before), op)
    return op.results[0]


def _normed(g, u, x, kind, operands, attrs):
    """Replaces n = op `u` (x normalized, before its weight) and the product
    by a weight that follows it, if any, with `kind`(*operands, w, ...):
    without a weight, w is a row of ones (n * 1 is n exactly)."""
    n = u.results[0]
    nu = g.users(n)
    w = _weight_of(nu[0], n, x) if len(nu) == 1 else None
    if w is not None:
        _replace(g, nu[0], kind, operands + [w] + _bias(g, nu[0], kind, x),
                 attrs, x.shape)
        return
    ones = _insert_fill(g, u, 1.0, x.shape[-1:], u.where)
    _replace(g, u, kind, operands + [ones] + _bias(g, u, kind, x), attrs,
             x.shape)


def _bias(g, before, kind, x):
    """nn.layer_norm's bias of a norm written without one: zeros."""
    if kind != "layer_norm":
        return []
    return [_insert_fill(g, before, 0.0, x.shape[-1:], before.where)]


def _rsqrt_product(g, r):
    """(u, other) when op u = rsqrt op r's result * other (a mul_bcast) is
    that result's one use, else (None, None)."""
    rs = r.results[0]
    users = g.users(rs)
    if len(users) != 1 or users[0].kind != "mul_bcast":
        return None, None
    u = users[0]
    return u, u.operands[1] if u.operands[0] is rs else u.operands[0]


def fuse_rms_norm(g):
    for r in [op for op in g.ops if op.kind == "rsqrt"]:
        x, eps = _rms_parts(g, r)
        u, other = _rsqrt_product(g, r)
        if x is None or u is None:
            continue
        if other is x:
            # (x * rsqrt(...)) * w, or x * rsqrt(...) alone
            _normed(g, u, x, "rms_norm", [x], {"eps": eps})
        elif other.op is not None and len(g.users(other)) == 1:
            # (w * x) * rsqrt(...)
            w = _weight_of(other.op, x, x)
            if w is not None and x in other.op.operands:
                _replace(g, u, "rms_norm", [x, w], {"eps": eps}, x.shape)


# -- LayerNorm, written out --------------------------------------------------


def _centered(sym):
    """x when sym is x - mean(x, -1, keepdim=True)."""
    add = producer(sym, "add_bcast")
    if not add:
        return None
    for x, neg in (add.operands, reversed(add.operands)):
        sc = producer(neg, "scale")
        mean = sc and sc.attrs["factor"] == -1.0 and \
            producer(sc.operands[0], "mean_last")
        if mean and mean.operands[0] is x and x.shape == sym.shape:
            return x
    return None


def fuse_layer_norm(g):
    """Before fuse_rms_norm: (x - m) * rsqrt(mean((x - m) ** 2) + eps) is
    also the RMS norm of x - m, which would leave the mean unfused."""
    for r in [op for op in g.ops if op.kind == "rsqrt"]:
        d, eps = _rms_parts(g, r)
        x = _centered(d) if d is not None else None
        u, other = _rsqrt_product(g, r)
        if x is None or u is None:
            continue
        # x - m computed once for both uses, or twice.
        if other is d or _centered(other) is x:
            _normed(g, u, x, "layer_norm", [x], {"eps": eps})


# -- slices ------------------------------------------------------------------


def lower_slices(g):
    """The slices a pattern did not take (the part of each head a partial
    rotary embedding passes through, x[..., r:], beside x[..., :r]) as
    nn.split: the slices of one tensor along one axis cut it once, at their
    bounds, and each is its part, or the concatenation of its parts. A
    part no slice reads gets a zero gradient, as a slice's backward
    scatters into zeros."""
    groups = {}
    for op in g.ops:
        if op.kind == "slice":
            key = (id(op.operands[0]), op.attrs["axis"])
            groups.setdefault(key, []).append(op)
    for ops in groups.values():
        x, axis = ops[0].operands[0], ops[0].attrs["axis"]
        for op in ops:
            if op.attrs["start"] >= op.attrs["stop"]:
                op.where.fail("an empty slice has no equivalent")
        cuts = sorted({0, x.shape[axis]} |
                      {op.attrs[k] for op in ops for k in ("start", "stop")})
        shapes = [x.shape[:axis] + (b - a,) + x.shape[axis + 1:]
                  for a, b in zip(cuts, cuts[1:])]
        split = g.emit("split", [x], {"axis": axis},
                       [(s, x.dtype) for s in shapes], ops[0].where)
        g.ops.remove(split)
        g.ops.insert(g.ops.index(ops[0]), split)
        for op in ops:
            parts = split.results[cuts.index(op.attrs["start"]):
                                  cuts.index(op.attrs["stop"])]
            if len(parts) == 1:
                g.replace_uses(op.results[0], parts[0])
                continue
            cat = g.emit("concat", parts, {"axis": axis},
                         [(op.results[0].shape, x.dtype)], op.where)
            g.ops.remove(cat)
            g.ops.insert(g.ops.index(op), cat)
            g.replace_uses(op.results[0], cat.results[0])


# -- SwiGLU ------------------------------------------------------------------


def fuse_swiglu(g):
    for mul in [op for op in g.ops if op.kind == "mul"]:
        a, b = mul.operands
        for gate, up in ((a, b), (b, a)):
            si = producer(gate, "silu")
            if si and single_use(g, gate) and up.shape == gate.shape:
                op = g.emit("swiglu", [si.operands[0], up], {},
                            [(gate.shape, "f32")], mul.where)
                g.ops.remove(op)
                g.ops.insert(g.ops.index(mul), op)
                g.replace_uses(mul.results[0], op.results[0])
                break


# -- GELU, tanh approximation ------------------------------------------------


def _scaled(sym, factor):
    """y when sym is `factor * y` (to float32 precision)."""
    sc = producer(sym, "scale")
    if sc and math.isclose(sc.attrs["factor"], factor, rel_tol=1e-7):
        return sc.operands[0]
    return None


def _gelu_tanh_input(half, one_plus):
    """x when half is 0.5 * x and one_plus is
    1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3))."""
    x = _scaled(half, 0.5)
    plus = producer(one_plus, "add_scalar")
    if x is None or not plus or plus.attrs["value"] != 1.0:
        return None
    th = producer(plus.operands[0], "tanh")
    inner = th and _scaled(th.operands[0], math.sqrt(2.0 / math.pi))
    add = inner is not None and producer(inner, "add")
    if not add:
        return None
    for a, b in (add.operands, reversed(add.operands)):
        cubed = _scaled(b, 0.044715) if a is x else None
        cube = cubed is not None and producer(cubed, "cube")
        if cube and cube.operands[0] is x:
            return x
    return None


def fuse_gelu_tanh(g):
    for mul in [op for op in g.ops if op.kind == "mul"]:
        a, b = mul.operands
        for half, one_plus in ((a, b), (b, a)):
            x = _gelu_tanh_input(half, one_plus)
            if x is not None and x.shape == mul.results[0].shape:
                _replace(g, mul, "gelu", [x], {}, x.shape)
                break


# -- what is left --------------------------------------------------------------


def lower_square(g):
    """x ** 2 as nn.mul(x, x): the same product, and its gradient
    dy * x + dy * x is PyTorch's dy * (2 * x) exactly (doubling rounds
    nothing). Squared ReLU keeps relu's result, which relu's own gradient
    keeps anyway, so a fused op would save no bytes."""
    for op in [o for o in g.ops if o.kind == "square"]:
        op.kind = "mul"
        op.operands = [op.operands[0], op.operands[0]]


def lower_expand(g):
    """An expand no pattern took (MLA's rotated key of one head, read by
    every head) as copies concatenated along each axis it broadcasts: the
    same values, and the backward sums the copies' gradients as expand's
    does. Not along dimension 0, the batch of a step's tensors: copies of
    a tensor without one would not follow the ranks' share of it."""
    for op in [o for o in g.ops if o.kind == "expand"]:
        x, out = op.operands[0], op.results[0].shape
        if len(x.shape) != len(out) or not out or x.shape[0] != out[0] or \
                any(s not in (1, n) for s, n in zip(x.shape, out)):
            continue
        ops = []
        for axis, n in enumerate(out):
            if x.shape[axis] != n:
                shape = x.shape[:axis] + (n,) + x.shape[axis + 1:]
                ops.append(g.emit("concat", [x] * n, {"axis": axis},
                                  [(shape, "f32")], op.where))
                x = ops[-1].results[0]
        for new in ops:
            g.ops.remove(new)
            g.ops.insert(g.ops.index(op), new)
        g.replace_uses(op.results[0], x)


def lower_uniform_tables(g):
    """A product with a constant table that holds one value throughout and
    leaves x's shape as it is, as nn.scale of x by that value: Ministral
    3's query scale 1 + beta * log(1 + floor(pos / n)), all ones at the
    step's positions below n (a product by 1, which changes nothing, is
    dropped), and Gemma 4's layer_scalar buffer [1]. The rope pattern has
    taken its tables before."""
    for op in [o for o in g.ops if o.kind == "mul_const"]:
        t = op.attrs["table"].detach().cpu()
        if op.results[0].shape != op.operands[0].shape or t.numel() == 0 or \
                not t.is_floating_point():
            continue
        flat = t.flatten()
        v = float(flat[0])
        if not math.isfinite(v) or not torch.all(flat == flat[0]):
            continue
        if v == 1.0:
            g.replace_uses(op.results[0], op.operands[0])
            continue
        op.kind = "scale"
        op.attrs = {"factor": v}


def _sinusoid_freqs(d):
    """The inverse frequencies (float32, one per sine) of the sinusoidal
    position tables transformers builds for width d: tensor2tensor's
    exp(-i * ln(10000) / (d / 2 - 1)) (XGLM's), the Transformer paper's
    1 / 10000^(2i / d) as CTRL computes it, and as rotary tables do."""
    h = d // 2
    i = torch.arange(h, dtype=torch.int64).float()
    out = [1.0 / torch.pow(10000, (2 * (torch.arange(d, dtype=torch.int64)
                                        .float() // 2)) / d)[0::2],
           1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.int64)
                              .float() / d))]
    if h > 1:
        out.insert(0, torch.exp(i * -(math.log(10000) / (h - 1))))
    return out


def sinusoid_table(t):
    """(inv_freq, first position) when the [T, d] float32 table t is
    cat(sin(p * f), cos(p * f), -1) at positions p = o..o+T-1 for one of
    _sinusoid_freqs, as float32 computes it; None otherwise."""
    if t.dtype != torch.float32 or t.dim() != 2 or t.shape[1] % 2 or \
            t.shape[1] < 2 or not torch.isfinite(t).all():
        return None
    seq, d = t.shape
    h = d // 2
    for f in _sinusoid_freqs(d):
        # The first position from the slowest pair, whose angle is small.
        o = math.atan2(float(t[0, h - 1]), float(t[0, d - 1])) / float(f[-1])
        if not (-0.5 < o < 1e6) or abs(o - round(o)) > 0.01:
            continue
        o = round(o)
        p = torch.arange(o, o + seq, dtype=torch.int64).float()
        a = p[:, None] * f[None, :]
        want = torch.cat([a.sin(), a.cos()], -1)
        # A few ulps: sin and cos differ by as much between libraries.
        if float((want - t).abs().max()) <= 1e-6:
            return f, o
    return None


def lower_sinusoidal_tables(g, packed=False):
    """x + a constant sinusoidal position table [.., T, d], the same for
    every leading index (XGLM's and CTRL's buffers at positions o..o+T-1):
    nn.rope ... inverse of a row of d / 2 zeros and d / 2 ones at positions
    0..o+T-1 is [sin, cos] of each position's angles, the rows from o on
    nn.add broadcasts over the leading dimensions. Refused with `packed`:
    the rows' positions restart at each document."""
    for op in [o for o in g.ops if o.kind == "add_const"]:
        x = op.operands[0]
        shape = op.results[0].shape
        if x.shape != shape or len(shape) < 2:
            continue
        try:
            t = torch.broadcast_to(op.attrs["table"].detach().cpu(), shape)
        except RuntimeError:
            continue
        t = t.reshape((-1,) + tuple(shape[-2:]))
        if not torch.equal(t, t[:1].expand_as(t)):
            continue
        found = sinusoid_table(t[0])
        if found is None:
            continue
        if packed:
            op.where.fail("--packed: a sinusoidal position table of the "
                          "constant positions %d..%d of every row, not of the "
                          "step's position_ids" % (found[1], found[1] +
                                                   shape[-2] - 1))
        f, o = found
        seq, d = shape[-2:]
        rows = (1, 1, o + seq, d // 2)
        new = [g.emit("fill", [], {"value": v}, [(rows, "f32")], op.where)
               for v in (0.0, 1.0)]
        new.append(g.emit("concat", [n.results[0] for n in new], {"axis": 3},
                          [((1, 1, o + seq, d), "f32")], op.where))
        new.append(g.emit("rope", [new[-1].results[0]],
                          {"inv_freq": f.tolist(), "inverse": True},
                          [((1, 1, o + seq, d), "f32")], op.where))
        table = new[-1].results[0]
        if o:
            new.append(g.emit("split", [table], {"axis": 2},
                              [((1, 1, o, d), "f32"), ((1, 1, seq, d),
                                                       "f32")], op.where))
            table = new[-1].results[1]
        new.append(g.emit("reshape", [table], {}, [((seq, d), "f32")],
                          op.where))
        for n in new:
            g.ops.remove(n)
            g.ops.insert(g.ops.index(op), n)
        op.kind = "add"
        op.operands = [x, new[-1].results[0]]
        op.attrs = {}


def lower_add_scalar(g):
    """x + c as nn.add of an nn.fill (a constant row)."""
    for op in [o for o in g.ops if o.kind == "add_scalar"]:
        x = op.operands[0]
        row = x.shape[-1:] if x.shape else ()
        fill = g.emit("fill", [], {"value": op.attrs["value"]},
                      [(row, "f32")], op.where)
        g.ops.remove(fill)
        at = g.ops.index(op)
        g.ops.insert(at, fill)
        op.kind = "add"
        op.operands = [x, fill.results[0]]
        op.attrs = {}


def lower_column_products(g):
    """x * c of a [.., 1] column c that no pattern took (a gate per row,
    as Qwen2-MoE's shared expert's sigmoid): the column times a row of ones
    (nn.matmul, exact) is the product it broadcasts, whose gradient then
    sums each row."""
    for op in [o for o in g.ops if o.kind == "mul_bcast"]:
        out = op.results[0].shape
        if len(out) < 2:
            continue
        for x, col in (op.operands, op.operands[::-1]):
            if x.shape != out or col.shape != out[:-1] + (1,):
                continue
            ones = g.emit("fill", [], {"value": 1.0}, [((1, out[-1]), "f32")],
                          op.where)
            wide = g.emit("matmul", [col, ones.results[0]], {},
                          [(out, "f32")], op.where)
            for new in (ones, wide):
                g.ops.remove(new)
                g.ops.insert(g.ops.index(op), new)
            op.kind = "mul"
            op.operands = [x, wide.results[0]]
            op.attrs = {}
            break


_WHAT = {
    "rsqrt": "rsqrt (recognised inside an RMS norm "
             "w * (x * rsqrt(mean(x ** 2, -1, keepdim=True) + eps)))",
    "cube": "x ** 3 (recognised inside GELU's tanh approximation "
            "0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3))))",
    "mean_last": "a mean (recognised inside an RMS norm)",
    "mul_const": "a product with a constant tensor (recognised as the "
                 "rotary embedding x * cos + rotate_half(x) * sin)",
    "add_const": "a sum with a constant tensor (recognised as the causal "
                 "mask of an attention)",
    "slice_every": "a strided slice (x[..., ::2] and x[..., 1::2] are "
                   "recognised inside an interleaved rotary embedding)",
    "stack": "torch.stack (recognised inside an interleaved rotary "
             "embedding)",
    "masked_fill": "masked_fill (recognised as the causal mask of an "
                   "attention)",
    "clamp_lowest": "torch.max(x, float32's lowest) (recognised between "
                    "an attention's causal mask and its softmax)",
    "expand": "expand along dimension 0 or to more dimensions (recognised "
              "in repeat_kv before an attention; an expand of other axes "
              "is nn.concat of copies)",
    "repeat_heads": "repeat_interleave (recognised before an attention)",
    "mul_bcast": "a product broadcasting both operands (nn.mul broadcasts "
                 "its right operand over leading dimensions)",
    "add_bcast": "a sum broadcasting both operands (nn.add broadcasts its "
                 "right operand over leading dimensions)",
    "pad_labels": "F.pad of integer labels (recognised as the label shift "
                  "F.pad(labels, (0, 1), value=-100)[..., 1:])",
    "int_reshape": "a reshape of integer ids (only as cross-entropy "
                   "labels)",
    "rotary_table": "--packed: a rotary embedding's cos or sin at the "
                    "step's position_ids (recognised in x * cos + "
                    "rotate_half(x) * sin or rotate_every_two)",
    "add_segments": "--packed: the attention mask of packed documents "
                    "added (recognised before an attention's softmax)",
}


def check_lowered(g):
    for op in g.ops:
        if op.kind not in NN_OPS:
            op.where.fail("%s has no equivalent here" % _WHAT.get(
                op.kind, op.kind))


def fuse_all(g, roots, rotary=(), packed=False):
    """The patterns on g; `rotary` the rotary embeddings' own tables
    (rotary_tables) that a rope's cos and sin may be computed from. With
    `packed` (--packed), position tables of constant positions are
    refused."""
    g.prune(roots)
    fuse_layer_norm(g)
    fuse_rms_norm(g)
    fuse_rope_positions(g, rotary)
    fuse_rope(g, rotary, packed)
    fuse_rope_pairs(g, rotary, packed)
    g.prune(roots)
    lower_slices(g)
    g.prune(roots)
    fuse_attention(g)
    g.prune(roots)
    lower_expand(g)
    fuse_swiglu(g)
    fuse_gelu_tanh(g)
    lower_uniform_tables(g)
    lower_sinusoidal_tables(g, packed)
    lower_square(g)
    lower_add_scalar(g)
    lower_column_products(g)
    g.prune(roots)
    check_lowered(g)
