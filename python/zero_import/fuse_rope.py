"""The rotary embedding patterns (fuse.py's list): x * cos +
rotate_half(x) * sin and its interleaved and paired forms become nn.rope,
once their cos and sin tables are found to be a theta's or the model's own
rotary module's (rotary_tables)."""

import functools
import math

import torch

from .fuse_match import producer


def _rotation_of(sym, x):
    """{} when sym is rotate_half(x), {"inverse": True} when it is NanoChat's
    cat(x[..., h:], -x[..., :h]), -rotate_half(x), which turns x * cos +
    it * sin by the negative angle; None otherwise."""
    if _rotate_half_of(sym) is x:
        return {}
    if _rotate_half_of(sym, flipped=True) is x:
        return {"inverse": True}
    return None


def _negated_and_plain(neg, plain, kind):
    """The `kind` ops (n, p) of x when neg is -n and plain is p, both taken
    from the same x; (None, None) otherwise."""
    sc = producer(neg, "scale")
    if not sc or sc.attrs["factor"] != -1.0:
        return None, None
    n = producer(sc.operands[0], kind)
    p = producer(plain, kind)
    if not n or not p or n.operands[0] is not p.operands[0]:
        return None, None
    return n, p


def _rotate_half_of(sym, flipped=False):
    """x when sym is cat(-x[..., h:], x[..., :h]) along the last axis (with
    `flipped`, cat(x[..., h:], -x[..., :h]))."""
    cat = producer(sym, "concat")
    if not cat or len(cat.operands) != 2:
        return None
    rank = len(sym.shape)
    if cat.attrs["axis"] != rank - 1:
        return None
    first, second = cat.operands
    neg, plain = (second, first) if flipped else (first, second)
    ns, ps = _negated_and_plain(neg, plain, "slice")
    if not ns:
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
    flat = producer(sym, "reshape")
    st = flat and producer(flat.operands[0], "stack")
    if not st or len(st.operands) != 2 or \
            st.attrs["axis"] != len(sym.shape):
        return None
    odd, even = _negated_and_plain(*st.operands, "slice_every")
    if not odd:
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


def rotary_view(t, shape):
    """(rotary_table op, seq_first) when t is a view of a rotary module's
    cos or sin at the step's positions (a rotary_table op, packed.py)
    [batch, seq, dim] that broadcasts over the heads of x of `shape`: as
    [batch, 1, seq, dim] for x [batch, heads, seq, dim], as [batch, seq,
    1, dim] for x [batch, seq, heads, dim] (seq_first); None otherwise.
    A view of reshapes that insert axes of 1, which keep the order."""
    view = t.shape
    while t.op is not None and t.op.kind == "reshape":
        t = t.op.operands[0]
    if t.op is None or t.op.kind != "rotary_table" or len(shape) != 4 or \
            len(view) > 4:
        return None
    b, s, d = t.shape
    full = (1,) * (4 - len(view)) + tuple(view)
    if full == (b, 1, s, d) and shape[0] == b and shape[2] == s:
        return t.op, False
    if full == (b, s, 1, d) and tuple(shape[:2]) == (b, s):
        return t.op, True
    return None


def _rotary_product(sym):
    """(x, rotary_table op, seq_first) when sym is x * t, t a rotary_view
    of x's width; None otherwise."""
    op = sym.op
    if op is None or op.kind not in ("mul", "mul_bcast"):
        return None
    for x, t in (op.operands, op.operands[::-1]):
        found = rotary_view(t, x.shape) if x.shape == sym.shape else None
        if found and found[0].results[0].shape[-1] == x.shape[-1]:
            return (x,) + found
    return None


def _tables_at(attrs, pos, dim, interleaved):
    """cos and sin of nn.rope's frequencies `attrs` at positions `pos`
    [batch, seq], as transformers computes them in float32."""
    if "theta" in attrs:
        inv_freq = 1.0 / (attrs["theta"] ** (torch.arange(
            0, dim, 2, dtype=torch.int64).float() / dim))
    else:
        inv_freq = torch.tensor(attrs["inv_freq"], dtype=torch.float32)
    scale = attrs.get("scale", 1.0)
    freqs = pos.float()[..., None] * inv_freq
    if interleaved:
        emb = torch.repeat_interleave(freqs, 2, dim=-1)
    else:
        emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * scale, emb.sin() * scale


def positions_freqs(call, tables, interleaved=False, halves=False):
    """nn.rope's frequencies of a rotary module's call (packed.RotaryCall):
    rope_freqs of its tables at positions 0..P-1, P past the example's
    largest position, which must give its cos and sin at the example's
    positions; None otherwise. With `halves`, tables of one frequency per
    pair (gpt-oss's), which rotate_half's tables repeat."""
    def full(t):
        return torch.cat((t, t), -1) if halves else t

    pos = call.pos_value
    seq = max(int(pos.max()) + 1, pos.shape[-1], 2)
    cos, sin = (full(t) for t in call.tables_at(
        torch.arange(seq, dtype=pos.dtype)[None]))
    if cos.dim() != 3 or cos.shape[:2] != (1, seq) or \
            cos.shape != sin.shape:
        return None
    dim = cos.shape[-1]
    attrs = rope_freqs(cos[:, None], sin[:, None], (1, 1, seq, dim), tables,
                       interleaved)
    if attrs is None or full(call.cos).shape[-1] != dim:
        return None
    want_c, want_s = _tables_at(attrs, pos, dim, interleaved)
    return attrs if _tables_match(full(call.cos), full(call.sin), want_c,
                                  want_s) else None


def fuse_rope_positions(g, tables=()):
    """x * cos + rotate_half(x) * sin (or rotate_every_two) whose cos and
    sin are a rotary module's at the step's position_ids (rotary_table ops,
    --packed) as nn.rope with those positions, its frequencies found as
    positions_freqs finds them."""
    freqs = {}
    for add in [op for op in g.ops if op.kind == "add"]:
        pa, pb = (_rotary_product(o) for o in add.operands)
        if not pa or not pb:
            continue
        for (x, tc, seq_first), (y, ts, _) in ((pa, pb), (pb, pa)):
            call = tc.attrs["call"]
            if tc.attrs["fn"] != "cos" or ts.attrs["fn"] != "sin" or \
                    ts.attrs["call"] is not call:
                continue
            interleaved = _rotate_every_two_of(y) is x
            rotation = {} if interleaved else _rotation_of(y, x)
            if rotation is None:
                continue
            key = (id(call), interleaved)
            if key not in freqs:
                freqs[key] = positions_freqs(call, tables, interleaved)
            attrs = freqs[key]
            if attrs is None:
                add.where.fail(
                    "--packed: x * cos + %s(x) * sin whose cos and sin, the "
                    "rotary embedding %s's at the step's position_ids, are "
                    "not Hugging Face's rotary embedding of a theta or of "
                    "the module's own inv_freq" % (
                        "rotate_every_two" if interleaved else "rotate_half",
                        type(call.module).__name__))
            _emit_rope(g, add, x, dict(attrs), interleaved, seq_first,
                       rotation.get("inverse", False), call.positions)
            break


def fuse_rope(g, tables=(), packed=False):
    """x * cos + rotate_half(x) * sin (or rotate_every_two) as nn.rope, its
    tables Hugging Face's for a theta or one of `tables` (rotary_tables).
    With `packed`, tables at constant positions are refused: the step's
    rows restart their positions at each document."""
    freqs = {}
    for add in [op for op in g.ops if op.kind == "add"]:
        a, b = add.operands
        ma, mb = producer(a, "mul_const"), producer(b, "mul_const")
        if not ma or not mb:
            continue
        for mc, ms in ((ma, mb), (mb, ma)):
            x = mc.operands[0]
            interleaved = _rotate_every_two_of(ms.operands[0]) is x
            rotation = {} if interleaved else _rotation_of(ms.operands[0], x)
            if rotation is None:
                continue
            if packed:
                add.where.fail(
                    "--packed: a rotary embedding whose cos and sin are "
                    "constants (the positions 0..T-1 of every row), not "
                    "computed from the step's position_ids")
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


def _emit_rope(g, add, x, attrs, interleaved, seq_first, inverse=False,
               positions=None):
    """nn.rope of x in place of `add`, its frequencies `attrs`, at each
    token's `positions` [batch, seq] where given (else 0..seq-1); x [batch,
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
    operands = [src] + ([positions] if positions is not None else [])
    ops.append(g.emit("rope", operands, attrs, [(src.shape, "f32")],
                      add.where))
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
    add = producer(sym, "add")
    if not add:
        return None
    out = []
    for operand in add.operands:
        neg = producer(operand, "scale")
        if neg and neg.attrs["factor"] == -1.0:
            operand = neg.operands[0]
        else:
            neg = None
        mc = producer(operand, "mul_const")
        if not mc:
            return None
        out.append((mc.operands[0], mc.attrs["table"], neg is not None))
    return out


def _pairs_of(sym):
    """(x, cos, sin) when sym is DeepSeek's rotary embedding of the pairs
    (x[2i], x[2i + 1]) written out (apply_rotary_pos_emb_interleave):
    cat(e * cos - o * sin, o * cos + e * sin) along the last axis, e =
    x[..., 0::2], o = x[..., 1::2]; None otherwise."""
    cat = producer(sym, "concat")
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
            ev = producer(y, "slice_every")
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


def fuse_rope_pairs(g, tables=(), packed=False):
    """DeepSeek's rotary embedding of the pairs (x[2i], x[2i + 1]) (_pairs_of)
    as nn.rope: it is the rotate_half embedding of x with its features
    de-interleaved (the even ones, then the odd ones), by the tables
    cat(cos, cos) and cat(sin, sin); the de-interleaving is a reshape to
    [.., d / 2, 2], a transpose of the last two axes and a reshape back.
    Refused with `packed` (its tables are of constant positions)."""
    freqs = {}
    for cat in [op for op in g.ops if op.kind == "concat"]:
        found = _pairs_of(cat.results[0])
        if found is None:
            continue
        if packed:
            cat.where.fail("--packed: a rotary embedding of pairs whose cos "
                           "and sin are constants (the positions 0..T-1 of "
                           "every row), not computed from the step's "
                           "position_ids")
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
