"""Patterns of several torch operations that one `nn` op computes.

Each pattern is matched on the lowered graph and checked exactly (shapes,
the constant tables' values, the mask), then replaced; the ops it consumed
die and are pruned. What no pattern takes stays a pseudo op, and
`check_lowered` reports it at its torch operation.

  RMS norm   w * (x * rsqrt(mean(x ** 2, -1, keepdim=True) + eps))
             (x * x for x ** 2, either operand order, float casts; w a
             parameter or computed from one, as Gemma's (1 + w))
  rope       x * cos + rotate_half(x) * sin, rotate_half(x) =
             cat(-x[..., h:], x[..., :h]), cos/sin Hugging Face's tables;
             of a partial rotary embedding (x[..., :r] rotated,
             x[..., r:] passed through) the slices left become nn.split
  attention  softmax(q @ k^T * s [masked causally]) @ v, the mask a
             masked_fill with -inf above the diagonal or an added table
             with -inf (or the dtype's min) there; k and v repeated per
             query head group (repeat_kv, repeat_interleave) are read once
  SwiGLU     silu(gate) * up
  GELU       0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3)))
             (GPT-2's gelu_new), the tanh approximation nn.gelu computes
"""

import functools
import math

import torch

from .graph import NN_OPS

_MASKED = -1e30  # a masked score: exp of it underflows to 0 in fp32


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
            # (x * rsqrt(...)) * w
            n = u.results[0]
            nu = g.users(n)
            w = _weight_of(nu[0], n, x) if len(nu) == 1 else None
            if w is not None:
                _replace(g, nu[0], "rms_norm", [x, w], {"eps": eps}, x.shape)
        elif other.op is not None and len(g.users(other)) == 1:
            # (w * x) * rsqrt(...)
            w = _weight_of(other.op, x, x)
            if w is not None and x in other.op.operands:
                _replace(g, u, "rms_norm", [x, w], {"eps": eps}, x.shape)


# -- rotary embedding --------------------------------------------------------


def _rotate_half_of(sym):
    """x when sym is cat(-x[..., h:], x[..., :h]) along the last axis."""
    cat = _producer(sym, "concat")
    if not cat or len(cat.operands) != 2:
        return None
    rank = len(sym.shape)
    if cat.attrs["axis"] != rank - 1:
        return None
    neg, lo = cat.operands
    sc = _producer(neg, "scale")
    if not sc or sc.attrs["factor"] != -1.0:
        return None
    hi = _producer(sc.operands[0], "slice")
    lo = _producer(lo, "slice")
    if not hi or not lo or hi.operands[0] is not lo.operands[0]:
        return None
    x = lo.operands[0]
    d = x.shape[-1]
    h = d // 2
    if d % 2 or hi.attrs["axis"] != rank - 1 or lo.attrs["axis"] != rank - 1:
        return None
    if (lo.attrs["start"], lo.attrs["stop"]) != (0, h) or \
            (hi.attrs["start"], hi.attrs["stop"]) != (h, d):
        return None
    return x


@functools.lru_cache(maxsize=None)
def _hf_tables(theta, seq, dim):
    inv_freq = 1.0 / (theta ** (
        torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    pos = torch.arange(seq, dtype=torch.int64).float()
    freqs = torch.outer(pos, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def _rope_theta(cos, sin, shape, where):
    """theta of Hugging Face's [seq, dim] tables for x of `shape`, or None."""
    try:
        c = torch.broadcast_to(cos.detach().float().cpu(), shape)
        s = torch.broadcast_to(sin.detach().float().cpu(), shape)
    except RuntimeError:
        return None
    if len(shape) != 4:
        return None
    c, s = c[0, 0], s[0, 0]
    seq, dim = c.shape
    if seq < 2 or dim < 4:
        return None
    # The smallest frequency at position 1: sin(theta^-(dim-2)/dim), small,
    # so asin reads it accurately.
    angle = math.asin(float(s[1, dim // 2 - 1]))
    if angle <= 0:
        return None
    theta = angle ** (-dim / (dim - 2))
    theta = float("%.6g" % theta)
    want_c, want_s = _hf_tables(theta, seq, dim)
    if (c - want_c).abs().max() > 1e-5 or (s - want_s).abs().max() > 1e-5:
        return None
    # Every head and batch row must use the same table (compared over the
    # rows the tables have: a broadcast row is the same by construction).
    for table, row in ((cos, c), (sin, s)):
        t = table.detach().float().cpu()
        t = t.reshape((1,) * (4 - t.dim()) + tuple(t.shape))
        rows = tuple(t.shape[:2]) + (seq, dim)
        if not torch.equal(torch.broadcast_to(t, rows),
                           torch.broadcast_to(row, rows)):
            return None
    return theta


def _table_key(t):
    """What identifies a constant table's values while the graph holds it
    (every layer's view of one rotary table has the same key)."""
    return (t.data_ptr(), t.dtype, tuple(t.shape), tuple(t.stride()),
            t.storage_offset())


def fuse_rope(g):
    thetas = {}
    for add in [op for op in g.ops if op.kind == "add"]:
        a, b = add.operands
        ma, mb = _producer(a, "mul_const"), _producer(b, "mul_const")
        if not ma or not mb:
            continue
        for mc, ms in ((ma, mb), (mb, ma)):
            x = mc.operands[0]
            if _rotate_half_of(ms.operands[0]) is not x:
                continue
            cos, sin = mc.attrs["table"], ms.attrs["table"]
            key = (_table_key(cos), _table_key(sin), x.shape)
            if key not in thetas:
                thetas[key] = _rope_theta(cos, sin, x.shape, add.where)
            theta = thetas[key]
            if theta is None:
                add.where.fail(
                    "x * cos + rotate_half(x) * sin with tables that are not "
                    "Hugging Face's rotary embedding at positions 0..%d of "
                    "a [batch, heads, seq, head_dim] tensor" % (
                        x.shape[-2] - 1))
            op = g.emit("rope", [x], {"theta": theta}, [(x.shape, "f32")],
                        add.where)
            g.ops.remove(op)
            g.ops.insert(g.ops.index(add), op)
            g.replace_uses(add.results[0], op.results[0])
            break


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
    if k0.shape != v0.shape:
        if nk == 1 and nv == 1:
            where.fail("attention with keys %s and values %s" % (
                list(k.shape), list(v.shape)))
        k0, v0 = k, v  # repeated differently: keep the repeated forms
    if k0.shape[0] != q.shape[0] or k0.shape[2:] != q.shape[2:] or \
            q.shape[1] % k0.shape[1]:
        where.fail("attention with queries %s and keys %s" % (
            list(q.shape), list(k0.shape)))
    return k0, v0


def _hidden(table, shape, fill_where):
    """Where a mask `table` (bool: masked where True; float: added, 0 or
    masked) hides a score, broadcast to `shape`; None for another table."""
    t = table.detach().cpu()
    try:
        t = torch.broadcast_to(t, shape)
    except RuntimeError:
        return None
    if fill_where:
        return t.bool()
    t = t.float()
    if not bool(((t == 0) | (t <= _MASKED)).all()):
        return None
    return t <= _MASKED


def _window(hidden, shape):
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
    if not torch.equal(hidden, torch.broadcast_to(~seen, shape)):
        return None
    return 0 if window >= s else window


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
        sm = _producer(p, "softmax")
        if not sm or not _single_use(g, p):
            continue
        s = sm.operands[0]
        # The masks before the softmax (GPT-Neo's where and its added
        # attention mask are two), whose union is the causal mask or a
        # sliding window.
        causal, window, hidden, failed = False, 0, None, None
        while failed is None:
            mf = _producer(s, "masked_fill")
            ac = _producer(s, "add_const")
            if mf:
                h = _hidden(mf.attrs["mask"], s.shape, True) \
                    if mf.attrs["fill"] <= _MASKED else None
                mask = mf
            elif ac:
                h = _hidden(ac.attrs["table"], s.shape, False)
                mask = ac
            else:
                break
            if h is None:
                failed = mask
            else:
                hidden = h if hidden is None else hidden | h
                s = mask.operands[0]
                last = mask
        if hidden is not None or failed:
            window = None if failed else _window(hidden, s.shape)
            if window is None:
                failed = failed or last
                if failed.kind == "masked_fill":
                    failed.where.fail("a masked_fill before the softmax that "
                                      "is not the causal mask (-inf above "
                                      "the diagonal)")
                failed.where.fail("an added mask before the softmax that is "
                                  "not the causal mask (-inf or the dtype's "
                                  "min above the diagonal, 0 elsewhere)")
            causal = True
        s, softcap = _softcap(s)
        scale = 1.0
        sc = _producer(s, "scale")
        if sc:
            scale, s = sc.attrs["factor"], sc.operands[0]
        mm = _producer(s, "matmul")
        if not mm or mm.attrs != {"transpose_rhs": True}:
            continue
        q, k = mm.operands
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
        op = g.emit("attention", [q, k0, v0], attrs, [(q.shape, "f32")],
                    out.where)
        g.ops.remove(op)
        g.ops.insert(g.ops.index(out), op)
        g.replace_uses(out.results[0], op.results[0])


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


_WHAT = {
    "rsqrt": "rsqrt (recognised inside an RMS norm "
             "w * (x * rsqrt(mean(x ** 2, -1, keepdim=True) + eps)))",
    "square": "x ** 2 (recognised inside an RMS norm)",
    "cube": "x ** 3 (recognised inside GELU's tanh approximation "
            "0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3))))",
    "mean_last": "a mean (recognised inside an RMS norm)",
    "mul_const": "a product with a constant tensor (recognised as the "
                 "rotary embedding x * cos + rotate_half(x) * sin)",
    "add_const": "a sum with a constant tensor (recognised as the causal "
                 "mask of an attention)",
    "masked_fill": "masked_fill (recognised as the causal mask of an "
                   "attention)",
    "expand": "expand (recognised in repeat_kv before an attention)",
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


def fuse_all(g, roots):
    g.prune(roots)
    fuse_rms_norm(g)
    fuse_rope(g)
    g.prune(roots)
    lower_slices(g)
    g.prune(roots)
    fuse_attention(g)
    g.prune(roots)
    fuse_swiglu(g)
    fuse_gelu_tanh(g)
    lower_add_scalar(g)
    g.prune(roots)
    check_lowered(g)
