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
             de-interleaved (fuse_rope_pairs)
  attention  softmax(q @ k^T * s [masked causally]) @ v, the mask a
             masked_fill with -inf above the diagonal or an added table
             with -inf (or the dtype's min, or -1e4 and less) there, or
             openai-gpt's w * b + -1e4 * (1 - b), before or (CodeGen)
             after the scale; an added ALiBi table (MPT's position_bias,
             BLOOM's alibi by torch.baddbmm on [batch * heads, seq, seq]);
             XGLM's max(masked scores, float32's lowest) and its softmax
             on [batch * heads, seq, seq]; k and v repeated per query
             head group (repeat_kv, repeat_interleave) are read once;
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

import functools
import math

import torch

from .nn_ops import OPS as NN_OPS

# A masked score: -inf, the dtype's min, or as openai-gpt and CodeGen mask,
# -1e4 or below. The softmax subtracts its row's max, which a causal row
# takes over its diagonal at least: unless a row's scores all lie below
# -1e4 + 104 (scaled dot products thousands strong), exp of a masked score
# minus the max is below e^-104, which is exactly 0 in fp32, and the softmax
# is the causal one bit for bit.
_MASKED = -1e4


def _producer(sym, kind):
    return sym.op if sym.op is not None and sym.op.kind == kind else None


def _single_use(g, sym):
    return len(g.users(sym)) == 1


# -- RMS norm --------------------------------------------------------------


def _rms_parts(g, r):
    """(x, eps) when rsqrt op r computes rsqrt(mean(x ** 2, -1) + eps)."""
    add = _producer(r.operands[0], "add_scalar")
    mean = add and _producer(add.operands[0], "mean_last")
    if not mean or add.attrs["value"] <= 0:
        return None, None
    sq = mean.operands[0]
    if _producer(sq, "square"):
        return sq.op.operands[0], add.attrs["value"]
    if _producer(sq, "mul") and sq.op.operands[0] is sq.op.operands[1]:
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


def fuse_rms_norm(g):
    for r in [op for op in g.ops if op.kind == "rsqrt"]:
        x, eps = _rms_parts(g, r)
        rs = r.results[0]
        users = g.users(rs)
        if x is None or len(users) != 1 or users[0].kind != "mul_bcast":
            continue
        u = users[0]
        other = u.operands[1] if u.operands[0] is rs else u.operands[0]
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
    add = _producer(sym, "add_bcast")
    if not add:
        return None
    for x, neg in (add.operands, reversed(add.operands)):
        sc = _producer(neg, "scale")
        mean = sc and sc.attrs["factor"] == -1.0 and \
            _producer(sc.operands[0], "mean_last")
        if mean and mean.operands[0] is x and x.shape == sym.shape:
            return x
    return None


def fuse_layer_norm(g):
    """Before fuse_rms_norm: (x - m) * rsqrt(mean((x - m) ** 2) + eps) is
    also the RMS norm of x - m, which would leave the mean unfused."""
    for r in [op for op in g.ops if op.kind == "rsqrt"]:
        d, eps = _rms_parts(g, r)
        x = _centered(d) if d is not None else None
        rs = r.results[0]
        users = g.users(rs)
        if x is None or len(users) != 1 or users[0].kind != "mul_bcast":
            continue
        u = users[0]
        other = u.operands[1] if u.operands[0] is rs else u.operands[0]
        # x - m computed once for both uses, or twice.
        if other is d or _centered(other) is x:
            _normed(g, u, x, "layer_norm", [x], {"eps": eps})


# -- rotary embedding --------------------------------------------------------


def _rotation_of(sym, x):
    """{} when sym is rotate_half(x), {"inverse": True} when it is NanoChat's
    cat(x[..., h:], -x[..., :h]), -rotate_half(x), which turns x * cos +
    it * sin by the negative angle; None otherwise."""
    if _rotate_half_of(sym) is x:
        return {}
    if _rotate_half_of(sym, flipped=True) is x:
        return {"inverse": True}
    return None


def _rotate_half_of(sym, flipped=False):
    """x when sym is cat(-x[..., h:], x[..., :h]) along the last axis (with
    `flipped`, cat(x[..., h:], -x[..., :h]))."""
    cat = _producer(sym, "concat")
    if not cat or len(cat.operands) != 2:
        return None
    rank = len(sym.shape)
    if cat.attrs["axis"] != rank - 1:
        return None
    first, second = cat.operands
    neg, plain = (second, first) if flipped else (first, second)
    sc = _producer(neg, "scale")
    if not sc or sc.attrs["factor"] != -1.0:
        return None
    ns = _producer(sc.operands[0], "slice")
    ps = _producer(plain, "slice")
    if not ns or not ps or ns.operands[0] is not ps.operands[0]:
        return None
    x = ps.operands[0]
    d = x.shape[-1]
    h = d // 2
    if d % 2 or ns.attrs["axis"] != rank - 1 or ps.attrs["axis"] != rank - 1:
        return None
    lo, hi = (ns, ps) if flipped else (ps, ns)
    if (lo.attrs["start"], lo.attrs["stop"]) != (0, h) or \
            (hi.attrs["start"], hi.attrs["stop"]) != (h, d):
        return None
    return x


def _rotate_every_two_of(sym):
    """x when sym is stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2)."""
    flat = _producer(sym, "reshape")
    st = flat and _producer(flat.operands[0], "stack")
    if not st or len(st.operands) != 2 or \
            st.attrs["axis"] != len(sym.shape):
        return None
    neg, even = st.operands
    sc = _producer(neg, "scale")
    if not sc or sc.attrs["factor"] != -1.0:
        return None
    odd = _producer(sc.operands[0], "slice_every")
    even = _producer(even, "slice_every")
    if not odd or not even or odd.operands[0] is not even.operands[0]:
        return None
    x = even.operands[0]
    if x.shape != sym.shape or (even.attrs["start"], odd.attrs["start"]) != \
            (0, 1):
        return None
    return x


@functools.lru_cache(maxsize=None)
def _hf_tables(theta, seq, dim, interleaved=False):
    inv_freq = 1.0 / (theta ** (
        torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    pos = torch.arange(seq, dtype=torch.int64).float()
    freqs = torch.outer(pos, inv_freq)
    if interleaved:
        emb = torch.repeat_interleave(freqs, 2, dim=-1)
    else:
        emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def _rope_seq_axis(cos, sin, shape):
    """The axis of x of `shape` that the tables run along: 2 for [batch,
    heads, seq, head_dim], 1 for GPT-J's [batch, seq, heads, head_dim]
    (tables [1, seq, 1, head_dim])."""
    if len(shape) != 4 or cos.dim() > 4 or sin.dim() > 4:
        return 2
    full = (1,) * (4 - cos.dim()) + tuple(cos.shape)
    return 1 if full[1] > 1 and full[2] == 1 and shape[2] > 1 else 2


def _rope_rows(cos, sin, shape, seq_axis=2):
    """The [seq, dim] cos and sin tables (float32) that x of `shape` is
    rotated by, the same for every batch row and head; None otherwise."""
    try:
        c = torch.broadcast_to(cos.detach().float().cpu(), shape)
        s = torch.broadcast_to(sin.detach().float().cpu(), shape)
    except RuntimeError:
        return None
    if len(shape) != 4:
        return None
    if seq_axis == 1:
        c, s = c.transpose(1, 2), s.transpose(1, 2)
        cos = cos.reshape((1,) * (4 - cos.dim()) + tuple(cos.shape))
        sin = sin.reshape((1,) * (4 - sin.dim()) + tuple(sin.shape))
        cos, sin = cos.transpose(1, 2), sin.transpose(1, 2)
    c, s = c[0, 0], s[0, 0]
    seq, dim = c.shape
    # Every head and batch row must use the same table (compared over the
    # rows the tables have: a broadcast row is the same by construction).
    for table, row in ((cos, c), (sin, s)):
        t = table.detach().float().cpu()
        t = t.reshape((1,) * (4 - t.dim()) + tuple(t.shape))
        rows = tuple(t.shape[:2]) + (seq, dim)
        if not torch.equal(torch.broadcast_to(t, rows),
                           torch.broadcast_to(row, rows)):
            return None
    return c, s


def _tables_match(c, s, want_c, want_s):
    return (c - want_c).abs().max() <= 1e-5 and \
        (s - want_s).abs().max() <= 1e-5


def _rope_theta(c, s, interleaved=False):
    """theta of Hugging Face's [seq, dim] tables c and s, or None."""
    seq, dim = c.shape
    if seq < 2 or dim < 4:
        return None
    # The smallest frequency at position 1: sin(theta^-(dim-2)/dim), small,
    # so asin reads it accurately.
    angle = math.asin(float(s[1, dim - 1 if interleaved else dim // 2 - 1]))
    if angle <= 0:
        return None
    theta = angle ** (-dim / (dim - 2))
    theta = float("%.6g" % theta)
    want_c, want_s = _hf_tables(theta, seq, dim, interleaved)
    return theta if _tables_match(c, s, want_c, want_s) else None


def rotary_tables(module):
    """(inv_freq, attention_scaling) of each rotary embedding of a module:
    the `inv_freq` buffers that transformers computed (Llama 3's, YaRN's,
    proportional rope's; Gemma 4's one per layer type, `<type>_inv_freq`),
    with the factor of cos and sin beside each (`attention_scaling`, or
    `<type>_attention_scaling`; 1 where there is none)."""
    tables = []
    for m in module.modules():
        for name, buf in m.named_buffers(recurse=False):
            if buf is None or not name.endswith("inv_freq") or \
                    name.endswith("original_inv_freq") or buf.dim() != 1 or \
                    not buf.is_floating_point():
                continue
            prefix = name[:-len("inv_freq")]
            scale = getattr(m, prefix + "attention_scaling", 1.0)
            if isinstance(scale, torch.Tensor):
                scale = scale.item()
            if not isinstance(scale, (int, float)):
                continue
            tables.append((buf.detach().float().cpu(), float(scale)))
    return tables


def _transformers_tables(inv_freq, scale, seq, interleaved):
    """cos and sin as transformers' rotary embedding computes them in
    float32: freqs = pos * inv_freq, emb = cat(freqs, freqs) (or, GPT-J's,
    repeat_interleave), cos = emb.cos() * attention_scaling."""
    pos = torch.arange(seq, dtype=torch.int64).float()
    freqs = pos[:, None] * inv_freq[None, :]
    if interleaved:
        emb = torch.repeat_interleave(freqs, 2, dim=-1)
    else:
        emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * scale, emb.sin() * scale


def rope_freqs(cos, sin, shape, tables, interleaved=False, seq_axis=2):
    """The frequency attributes of nn.rope for the tables x of `shape` is
    rotated by: {"theta": theta} for Hugging Face's base^(-2i/d), else
    {"inv_freq": [...], "scale": s} for a rotary module's own table
    (`tables`, rotary_tables) that they equal; None for any other."""
    rows = _rope_rows(cos, sin, shape, seq_axis)
    if rows is None:
        return None
    c, s = rows
    theta = _rope_theta(c, s, interleaved)
    if theta is not None:
        return {"theta": theta}
    seq, dim = c.shape
    for inv_freq, scale in tables:
        if 2 * inv_freq.numel() != dim or \
                not torch.isfinite(inv_freq).all() or \
                not (0.0 < scale < math.inf):
            continue
        want_c, want_s = _transformers_tables(inv_freq, scale, seq,
                                              interleaved)
        if _tables_match(c, s, want_c, want_s):
            attrs = {"inv_freq": inv_freq.tolist()}
            if scale != 1.0:
                attrs["scale"] = scale
            return attrs
    return None


def table_key(t):
    """What identifies a constant table's values while the graph holds it
    (every layer's view of one rotary table has the same key)."""
    return (t.data_ptr(), t.dtype, tuple(t.shape), tuple(t.stride()),
            t.storage_offset())


def fuse_rope(g, tables=()):
    """x * cos + rotate_half(x) * sin (or rotate_every_two) as nn.rope, its
    tables Hugging Face's for a theta or one of `tables` (rotary_tables)."""
    freqs = {}
    for add in [op for op in g.ops if op.kind == "add"]:
        a, b = add.operands
        ma, mb = _producer(a, "mul_const"), _producer(b, "mul_const")
        if not ma or not mb:
            continue
        for mc, ms in ((ma, mb), (mb, ma)):
            x = mc.operands[0]
            interleaved = _rotate_every_two_of(ms.operands[0]) is x
            rotation = {} if interleaved else _rotation_of(ms.operands[0], x)
            if rotation is None:
                continue
            cos, sin = mc.attrs["table"], ms.attrs["table"]
            axis = _rope_seq_axis(cos, sin, x.shape)
            key = (table_key(cos), table_key(sin), x.shape, interleaved)
            if key not in freqs:
                freqs[key] = rope_freqs(cos, sin, x.shape, tables,
                                        interleaved, axis)
            attrs = freqs[key]
            if attrs is None:
                add.where.fail(
                    "x * cos + %s(x) * sin with tables that are not "
                    "Hugging Face's rotary embedding at positions 0..%d of "
                    "a [batch, heads, seq, head_dim] tensor" % (
                        "rotate_every_two" if interleaved else "rotate_half",
                        x.shape[axis] - 1))
            _emit_rope(g, add, x, dict(attrs), interleaved, axis == 1,
                       rotation.get("inverse", False))
            break


def _emit_rope(g, add, x, attrs, interleaved, seq_first, inverse=False):
    """nn.rope of x in place of `add`, its frequencies `attrs`; x [batch,
    seq, heads, head_dim] (seq_first) is rotated in the [batch, heads, seq,
    head_dim] layout."""
    swap = [0, 2, 1, 3]
    ops = []
    src = x
    if seq_first:
        b, s, h, d = x.shape
        ops.append(g.emit("transpose", [x], {"permutation": swap},
                          [((b, h, s, d), "f32")], add.where))
        src = ops[-1].results[0]
    if inverse:
        attrs["inverse"] = True
    if interleaved:
        attrs["interleaved"] = True
    ops.append(g.emit("rope", [src], attrs, [(src.shape, "f32")], add.where))
    if seq_first:
        ops.append(g.emit("transpose", [ops[-1].results[0]],
                          {"permutation": swap}, [(x.shape, "f32")],
                          add.where))
    for op in ops:
        g.ops.remove(op)
        g.ops.insert(g.ops.index(add), op)
    g.replace_uses(add.results[0], ops[-1].results[0])


def _products(sym):
    """[(x, table, negated)] of the two products x * table whose sum is sym
    (negated: that product subtracted), or None."""
    add = _producer(sym, "add")
    if not add:
        return None
    out = []
    for operand in add.operands:
        neg = _producer(operand, "scale")
        if neg and neg.attrs["factor"] == -1.0:
            operand = neg.operands[0]
        else:
            neg = None
        mc = _producer(operand, "mul_const")
        if not mc:
            return None
        out.append((mc.operands[0], mc.attrs["table"], neg is not None))
    return out


def _pairs_of(sym):
    """(x, cos, sin) when sym is DeepSeek's rotary embedding of the pairs
    (x[2i], x[2i + 1]) written out (apply_rotary_pos_emb_interleave):
    cat(e * cos - o * sin, o * cos + e * sin) along the last axis, e =
    x[..., 0::2], o = x[..., 1::2]; None otherwise."""
    cat = _producer(sym, "concat")
    if not cat or len(cat.operands) != 2 or \
            cat.attrs["axis"] != len(sym.shape) - 1:
        return None
    halves = [_products(s) for s in cat.operands]
    if None in halves:
        return None
    sources, terms = set(), []
    for products in halves:
        # {(0 for e, 1 for o, negated): table}
        t = {}
        for y, table, negated in products:
            ev = _producer(y, "slice_every")
            if not ev or ev.attrs["step"] != 2 or \
                    ev.attrs["axis"] != len(y.shape) - 1:
                return None
            sources.add(ev.operands[0])
            t[(ev.attrs["start"], negated)] = table
        terms.append(t)
    if len(sources) != 1:
        return None
    x = sources.pop()
    first, second = terms
    if x.shape != sym.shape or set(first) != {(0, False), (1, True)} or \
            set(second) != {(1, False), (0, False)}:
        return None
    cos, sin = first[(0, False)], first[(1, True)]
    if table_key(cos) != table_key(second[(1, False)]) or \
            table_key(sin) != table_key(second[(0, False)]):
        return None
    return x, cos, sin


def fuse_rope_pairs(g, tables=()):
    """DeepSeek's rotary embedding of the pairs (x[2i], x[2i + 1]) (_pairs_of)
    as nn.rope: it is the rotate_half embedding of x with its features
    de-interleaved (the even ones, then the odd ones), by the tables
    cat(cos, cos) and cat(sin, sin); the de-interleaving is a reshape to
    [.., d / 2, 2], a transpose of the last two axes and a reshape back."""
    freqs = {}
    for cat in [op for op in g.ops if op.kind == "concat"]:
        found = _pairs_of(cat.results[0])
        if found is None:
            continue
        x, cos, sin = found
        key = (table_key(cos), table_key(sin), x.shape)
        if key not in freqs:
            freqs[key] = None
            if len(x.shape) == 4:
                freqs[key] = rope_freqs(torch.cat((cos, cos), -1),
                                        torch.cat((sin, sin), -1), x.shape,
                                        tables)
        if freqs[key] is None:
            cat.where.fail(
                "the rotary embedding of pairs cat(x[..., 0::2] * cos - "
                "x[..., 1::2] * sin, x[..., 1::2] * cos + x[..., 0::2] * "
                "sin) with tables that are not Hugging Face's at positions "
                "0..%d of a [batch, heads, seq, head_dim] tensor" % (
                    x.shape[-2] - 1))
        *lead, d = x.shape
        lead = tuple(lead)
        ops = [g.emit("reshape", [x], {}, [(lead + (d // 2, 2), "f32")],
                      cat.where)]
        ops.append(g.emit("transpose", [ops[-1].results[0]],
                          {"permutation": list(range(len(lead))) +
                           [len(lead) + 1, len(lead)]},
                          [(lead + (2, d // 2), "f32")], cat.where))
        ops.append(g.emit("reshape", [ops[-1].results[0]], {},
                          [(x.shape, "f32")], cat.where))
        ops.append(g.emit("rope", [ops[-1].results[0]], dict(freqs[key]),
                          [(x.shape, "f32")], cat.where))
        for op in ops:
            g.ops.remove(op)
            g.ops.insert(g.ops.index(cat), op)
        g.replace_uses(cat.results[0], ops[-1].results[0])


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


# -- attention ---------------------------------------------------------------


def _unrepeat_one(t):
    """(source, repeats) of a key/value repeated per query-head group."""
    ri = _producer(t, "repeat_heads")
    if ri and ri.attrs["axis"] == 1:
        return ri.operands[0], ri.attrs["repeats"]
    # x[:, :, None].expand(B, KV, n, T, D).reshape(B, KV * n, T, D)
    r2 = _producer(t, "reshape")
    ex = r2 and _producer(r2.operands[0], "expand")
    r1 = ex and _producer(ex.operands[0], "reshape")
    if r1:
        src = r1.operands[0]
        if len(src.shape) == 4:
            b, kv, s, d = src.shape
            if r1.results[0].shape == (b, kv, 1, s, d) and \
                    len(ex.results[0].shape) == 5:
                n = ex.results[0].shape[2]
                if ex.results[0].shape == (b, kv, n, s, d) and \
                        t.shape == (b, kv * n, s, d):
                    return src, n
    return t, 1


def unrepeat(g, k, v, q, where):
    k0, nk = _unrepeat_one(k)
    v0, nv = _unrepeat_one(v)
    if len(q.shape) != 4 or len(k0.shape) != 4:
        where.fail("attention on tensors of rank %d; nn.attention takes "
                   "[batch, heads, seq, head_dim]" % len(q.shape))
    # The values' head dim may differ from the keys' (attention pads it).
    if k0.shape[:-1] != v0.shape[:-1] or len(v0.shape) != 4:
        if nk == 1 and nv == 1:
            where.fail("attention with keys %s and values %s" % (
                list(k.shape), list(v.shape)))
        k0, v0 = k, v  # repeated differently: keep the repeated forms
    if k0.shape[0] != q.shape[0] or k0.shape[2:] != q.shape[2:] or \
            q.shape[1] % k0.shape[1] or k0.shape[:-1] != v0.shape[:-1]:
        where.fail("attention with queries %s, keys %s and values %s" % (
            list(q.shape), list(k0.shape), list(v0.shape)))
    return k0, v0


def _zeros(g, like, width, where):
    """Zeros of like's shape with `width` in its last dimension: like @ 0,
    a [width, d] nn.fill of zeros, so that they follow like's rows where
    the ranks divide the batch (an nn.fill itself keeps the global
    batch's shape)."""
    w = g.emit("fill", [], {"value": 0.0}, [((width, like.shape[-1]), "f32")],
               where).results[0]
    return g.emit("matmul", [like, w], {"transpose_rhs": True},
                  [(like.shape[:-1] + (width,), "f32")], where).results[0]


def _pad_last(g, x, width, where):
    """x with `width` zeros after its last dimension."""
    z = _zeros(g, x, width, where)
    return g.emit("concat", [x, z], {"axis": len(x.shape) - 1},
                  [(x.shape[:-1] + (x.shape[-1] + width,), "f32")],
                  where).results[0]


def attention(g, q, k, v, attrs, where, before=None, sinks=None):
    """nn.attention of q [batch, heads, seq, d], k [batch, kv_heads, seq, d]
    and v [batch, kv_heads, seq, dv] (k and v read once per query head
    group, unrepeat), with per-head `sinks` [heads] where given, placed
    before op `before` (else last). The op takes
    one head dim: where dv differs (multi-head latent attention, whose
    values are narrower than its queries and keys), the narrower side is
    padded with zeros, which adds nothing to the scores q . k and leaves
    the output's columns of v as they are, and the output is cut to dv."""
    first = len(g.ops)
    attrs = dict(attrs)
    d, dv = q.shape[-1], v.shape[-1]
    if dv < d:
        v = _pad_last(g, v, d - dv, where)
    elif dv > d:
        if attrs.get("scale") is None:
            attrs["scale"] = 1.0 / math.sqrt(d)
        q = _pad_last(g, q, dv - d, where)
        k = _pad_last(g, k, dv - d, where)
    operands = [q, k, v] + ([sinks] if sinks is not None else [])
    out = g.emit("attention", operands, attrs, [(q.shape, "f32")],
                 where).results[0]
    if dv < d:
        # The padded columns (zeros) are read too, as + pad @ 0: the
        # derivative of nn.split fills an unread part's gradient with an
        # nn.fill, which keeps the global batch's shape where the ranks
        # divide the batch.
        out, pad = g.emit("split", [out], {"axis": 3},
                          [(out.shape[:-1] + (dv,), "f32"),
                           (out.shape[:-1] + (d - dv,), "f32")],
                          where).results
        out = g.emit("add", [out, _zeros(g, pad, dv, where)], {},
                     [(out.shape, "f32")], where).results[0]
    if before is not None:
        ops = g.ops[first:]
        del g.ops[first:]
        at = g.ops.index(before)
        g.ops[at:at] = ops
    return out


def mask_hidden(table, shape, fill_where, factor=1.0):
    """Where a mask `table` (bool: masked where True; float: added, 0 or
    masked once multiplied by the positive `factor` that scales the scores
    after it) hides a score, broadcast to `shape`; None for another
    table."""
    t = table.detach().cpu()
    try:
        torch.broadcast_to(t, shape)
    except RuntimeError:
        return None
    # Tested on the table itself and broadcast as a view: a [seq, seq] mask
    # broadcast to [batch, heads, seq, seq] in float64 is 64 GiB at seq 4096.
    # transformers' masks repeat one [seq, seq] table over the batch
    # (materialised by the float conversion): tested once.
    t = _repeats_dropped(t)
    if fill_where:
        return torch.broadcast_to(t.bool(), shape)
    t = t.double() * factor
    if not bool(((t == 0) | (t <= _MASKED)).all()):
        return None
    return torch.broadcast_to(t <= _MASKED, shape)


def _repeats_dropped(t):
    """`t` narrowed to one element along each leading dimension (all but
    the last two) whose slices all equal the first."""
    for d in range(t.dim() - 2):
        if t.shape[d] > 1:
            first = t.narrow(d, 0, 1)
            if torch.equal(first.expand_as(t), t):
                t = first
    return t


def _unbroadcast(t):
    """`t` with each dimension a broadcast view repeats (stride 0) narrowed
    to one element."""
    for d in range(t.dim()):
        if t.stride(d) == 0 and t.shape[d] > 1:
            t = t.narrow(d, 0, 1)
    return t


def mask_window(hidden, shape):
    """The sliding window `hidden` is (query i sees key j iff j <= i and
    i - j < window, transformers' sliding_window_causal_mask_function),
    identically for every row: 0 for the causal mask, None for any other
    mask."""
    s = shape[-1]
    if shape[-2] != s or s < 1:
        return None
    # The last query sees the window's keys.
    window = int((~hidden[(0,) * (len(shape) - 2) + (s - 1,)]).sum())
    if window < 1:
        return None
    i = torch.arange(s)
    seen = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < window)
    # Compared where `hidden` holds distinct values: a broadcast view's
    # repeated dimensions (stride 0) are one row, not batch x heads of them.
    h = _unbroadcast(hidden)
    both = torch.broadcast_shapes(h.shape, seen.shape)
    if not torch.equal(torch.broadcast_to(h, both),
                       torch.broadcast_to(~seen, both)):
        return None
    return 0 if window >= s else window


def _alibi(table, shape):
    """The ALiBi slopes of an added `table` broadcast to scores of `shape`
    [batch, heads, seq, seq], one per head, or None for another table:
    each row of head h is slope_h * (j - z) in float32, as transformers
    computes it, for a key z of the row where it is 0 (MPT's position_bias
    has z the last key, BLOOM's alibi the first), alike in every batch
    element. nn.attention adds slope_h * (j - i) instead: per row, the two
    differ by a constant, which the softmax does not see."""
    t = table.detach().cpu()
    if t.dtype != torch.float32 or len(shape) != 4:
        return None
    try:
        t = torch.broadcast_to(t, shape)
    except RuntimeError:
        return None
    seq = shape[-1]
    if seq < 2 or shape[-2] != seq or not torch.equal(t, t[:1].expand(shape)):
        return None
    keys = torch.arange(seq)
    slopes = []
    for rows in t[0]:
        zero = rows == 0
        if not bool(zero.any(-1).all()):
            return None
        z = zero.int().argmax(-1)
        # The slope itself: its product with 1 or -1 beside the zero.
        z0 = int(z[0])
        slope = rows[0, z0 + 1] if z0 + 1 < seq else -rows[0, z0 - 1]
        if not torch.equal(rows, (keys[None, :] - z[:, None]).float() * slope):
            return None
        slopes.append(float(slope))
    return slopes


def _flat_heads(sym, shape):
    """The [batch, heads, ...] tensor that `sym` ([batch * heads, ...], as
    BLOOM computes its attention) is a reshape of, or None."""
    r = _producer(sym, "reshape")
    src = r and r.operands[0]
    if src is None or len(src.shape) != len(shape) + 1 or \
            src.shape[0] * src.shape[1] != shape[0] or \
            src.shape[2:] != shape[1:]:
        return None
    return src


def _softcap(s):
    """(capped input, cap) when s is cap * tanh(x / cap) (Gemma 2's
    attn_logit_softcapping), else (s, None)."""
    outer = _producer(s, "scale")
    th = outer and _producer(outer.operands[0], "tanh")
    inner = th and _producer(th.operands[0], "scale")
    if not inner:
        return s, None
    cap = outer.attrs["factor"]
    if cap <= 0 or not math.isclose(inner.attrs["factor"] * cap, 1.0,
                                    rel_tol=1e-12):
        return s, None
    return inner.operands[0], cap


def fuse_attention(g):
    for out in [op for op in g.ops if op.kind == "matmul"]:
        if out.attrs:
            continue
        p, v = out.operands
        # BLOOM's attention on [batch * heads, seq, ...]: the softmax of
        # [batch, heads, seq, seq] scores, reshaped.
        flat = None
        if len(p.shape) == 3:
            p4, v4 = _flat_heads(p, p.shape), _flat_heads(v, v.shape)
            if p4 is None or v4 is None or not _single_use(g, p):
                continue
            flat, p, v = p.shape, p4, v4
        sm = _producer(p, "softmax")
        if not _single_use(g, p):
            continue
        if sm:
            s = sm.operands[0]
        elif flat:
            # XGLM's softmax on [batch * heads, seq, seq] scores viewed
            # from [batch, heads, seq, seq], its result viewed back: the
            # softmax of those (the last axis is the same).
            r = _producer(p, "reshape")
            sm = r and _producer(r.operands[0], "softmax")
            if not sm or not _single_use(g, r.operands[0]):
                continue
            s = _flat_heads(sm.operands[0], sm.operands[0].shape)
            if s is None or s.shape != p.shape:
                continue
        else:
            continue
        # The masks before the softmax (GPT-Neo's where and its added
        # attention mask are two), whose union is the causal mask or a
        # sliding window, and an ALiBi table added before or among them.
        causal, window, hidden, failed, alibi = False, 0, None, None, None
        shape4 = s.shape
        # CodeGen scales the scores after its mask: the masked ones stay
        # masked (factor > 0 and they stay at most _MASKED), the others are
        # scaled as the attention's scale does.
        factor = 1.0
        while failed is None:
            # XGLM's max(scores + mask, float32's lowest): a masked score
            # (-inf) becomes the lowest, which the softmax zeroes alike.
            cl = _producer(s, "clamp_lowest")
            if cl and hidden is None and _single_use(g, s) and (
                    _producer(cl.operands[0], "add_const") or
                    _producer(cl.operands[0], "masked_fill")):
                s = cl.operands[0]
                continue
            mf = _producer(s, "masked_fill")
            ac = _producer(s, "add_const")
            sc = _producer(s, "scale")
            if sc and factor == 1.0 and sc.attrs["factor"] > 0 and \
                    (_producer(sc.operands[0], "masked_fill") or
                     _producer(sc.operands[0], "add_const")):
                factor, s = sc.attrs["factor"], sc.operands[0]
                continue
            if mf:
                h = mask_hidden(mf.attrs["mask"], s.shape, True) \
                    if mf.attrs["fill"] * factor <= _MASKED else None
                mask = mf
            elif ac:
                h = mask_hidden(ac.attrs["table"], s.shape, False, factor)
                mask = ac
                # openai-gpt's w * b + -1e4 * (1 - b), b the causal 0/1
                # table: where b is 0, the score is replaced by the masked
                # value; where 1, it is kept and 0 added.
                mc = _producer(ac.operands[0], "mul_const")
                keep = mc and mask_hidden(mc.attrs["table"], s.shape, True)
                if h is not None and keep is not None and \
                        torch.equal(keep, ~h) and torch.equal(
                            torch.broadcast_to(
                                mc.attrs["table"].detach().cpu().float(),
                                s.shape), keep.float()):
                    hidden = h if hidden is None else hidden | h
                    s, last = mc.operands[0], mc
                    continue
                if h is None and alibi is None and factor == 1.0:
                    alibi = _alibi(ac.attrs["table"], s.shape)
                    if alibi is not None:
                        s = ac.operands[0]
                        continue
            else:
                break
            if h is None:
                failed = mask
            else:
                hidden = h if hidden is None else hidden | h
                s = mask.operands[0]
                last = mask
        # Scores computed on [batch * heads, seq, seq] (BLOOM's and
        # GPT-NeoX-Japanese's torch.baddbmm, whose added table is BLOOM's
        # alibi or zeros).
        r = _producer(s, "reshape")
        flat_scores = r is not None and len(shape4) == 4 and \
            r.operands[0].shape == (shape4[0] * shape4[1],) + shape4[2:]
        if flat and not flat_scores:
            continue
        if flat_scores:
            s = r.operands[0]
            ac = _producer(s, "add_const")
            if ac and alibi is None:
                t = ac.attrs["table"].detach().cpu()
                try:
                    t = torch.broadcast_to(t, s.shape).reshape(shape4)
                except RuntimeError:
                    t = None
                alibi = None if t is None else _alibi(t, shape4)
                if alibi is not None:
                    s = ac.operands[0]
        if hidden is not None or failed:
            window = None if failed else mask_window(hidden, shape4)
            if window is None:
                failed = failed or last
                if failed.kind == "masked_fill":
                    failed.where.fail("a masked_fill before the softmax that "
                                      "is not the causal mask (-inf above "
                                      "the diagonal)")
                failed.where.fail("an added mask before the softmax that is "
                                  "not the causal mask (-1e4 or less above "
                                  "the diagonal, 0 elsewhere) or an ALiBi "
                                  "bias")
            causal = True
        s, softcap = _softcap(s)
        if softcap is not None and factor != 1.0:
            continue
        scale = factor
        sc = _producer(s, "scale")
        if sc:
            scale, s = sc.attrs["factor"] * factor, sc.operands[0]
        mm = _producer(s, "matmul")
        if not mm:
            continue
        q, k = mm.operands
        if mm.attrs != {"transpose_rhs": True}:
            # openai-gpt's keys: k^T itself, x.permute(0, 2, 3, 1) of
            # x [batch, seq, heads, head_dim]; k is x.transpose(1, 2).
            tr = not mm.attrs and _producer(k, "transpose")
            if not tr or list(tr.attrs["permutation"]) != [0, 2, 3, 1]:
                continue
            x = tr.operands[0]
            t = g.emit("transpose", [x], {"permutation": [0, 2, 1, 3]},
                       [((x.shape[0], x.shape[2], x.shape[1], x.shape[3]),
                         "f32")], tr.where)
            g.ops.remove(t)
            g.ops.insert(g.ops.index(out), t)
            k = t.results[0]
        if flat_scores:
            q = _flat_heads(q, q.shape)
            k = _flat_heads(k, k.shape)
            if q is None or k is None:
                continue
        if len(q.shape) != 4 or len(k.shape) != 4 or len(v.shape) != 4:
            continue
        k0, v0 = unrepeat(g, k, v, q, out.where)
        d = q.shape[-1]
        attrs = {"causal": causal,
                 "scale": None if scale == 1.0 / math.sqrt(d) else scale}
        if window:
            attrs["window"] = window
        if softcap is not None:
            attrs["softcap"] = softcap
        if alibi and any(alibi):
            attrs["alibi"] = alibi
        result = attention(g, q, k0, v0, attrs, out.where, before=out)
        if flat:
            r = g.emit("reshape", [result], {}, [(out.results[0].shape,
                                                  "f32")], out.where)
            g.ops.remove(r)
            g.ops.insert(g.ops.index(out), r)
            result = r.results[0]
        g.replace_uses(out.results[0], result)


# -- SwiGLU ------------------------------------------------------------------


def fuse_swiglu(g):
    for mul in [op for op in g.ops if op.kind == "mul"]:
        a, b = mul.operands
        for gate, up in ((a, b), (b, a)):
            si = _producer(gate, "silu")
            if si and _single_use(g, gate) and up.shape == gate.shape:
                op = g.emit("swiglu", [si.operands[0], up], {},
                            [(gate.shape, "f32")], mul.where)
                g.ops.remove(op)
                g.ops.insert(g.ops.index(mul), op)
                g.replace_uses(mul.results[0], op.results[0])
                break


# -- GELU, tanh approximation ------------------------------------------------


def _scaled(sym, factor):
    """y when sym is `factor * y` (to float32 precision)."""
    sc = _producer(sym, "scale")
    if sc and math.isclose(sc.attrs["factor"], factor, rel_tol=1e-7):
        return sc.operands[0]
    return None


def _gelu_tanh_input(half, one_plus):
    """x when half is 0.5 * x and one_plus is
    1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3))."""
    x = _scaled(half, 0.5)
    plus = _producer(one_plus, "add_scalar")
    if x is None or not plus or plus.attrs["value"] != 1.0:
        return None
    th = _producer(plus.operands[0], "tanh")
    inner = th and _scaled(th.operands[0], math.sqrt(2.0 / math.pi))
    add = inner is not None and _producer(inner, "add")
    if not add:
        return None
    for a, b in (add.operands, reversed(add.operands)):
        cubed = _scaled(b, 0.044715) if a is x else None
        cube = cubed is not None and _producer(cubed, "cube")
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


def lower_sinusoidal_tables(g):
    """x + a constant sinusoidal position table [.., T, d], the same for
    every leading index (XGLM's and CTRL's buffers at positions o..o+T-1):
    nn.rope ... inverse of a row of d / 2 zeros and d / 2 ones at positions
    0..o+T-1 is [sin, cos] of each position's angles, the rows from o on
    nn.add broadcasts over the leading dimensions."""
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
}


def check_lowered(g):
    for op in g.ops:
        if op.kind not in NN_OPS:
            op.where.fail("%s has no equivalent here" % _WHAT.get(
                op.kind, op.kind))


def fuse_all(g, roots, rotary=()):
    """The patterns on g; `rotary` the rotary embeddings' own tables
    (rotary_tables) that a rope's cos and sin may be computed from."""
    g.prune(roots)
    fuse_layer_norm(g)
    fuse_rms_norm(g)
    fuse_rope(g, rotary)
    fuse_rope_pairs(g, rotary)
    g.prune(roots)
    lower_slices(g)
    g.prune(roots)
    fuse_attention(g)
    g.prune(roots)
    lower_expand(g)
    fuse_swiglu(g)
    fuse_gelu_tanh(g)
    lower_uniform_tables(g)
    lower_sinusoidal_tables(g)
    lower_square(g)
    lower_add_scalar(g)
    lower_column_products(g)
    g.prune(roots)
    check_lowered(g)
