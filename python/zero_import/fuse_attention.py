"""The attention pattern (fuse.py's list): softmax(q @ k^T * s, masked)
@ v becomes nn.attention, once its mask is found to be causal or a sliding
window of it; with the helpers that the lowering of
scaled_dot_product_attention and of attention with sinks calls (attention,
unrepeat, the mask's window)."""

import math

import torch

from .fuse_match import producer, single_use

# A masked score: -inf, the dtype's min, or as openai-gpt and CodeGen mask,
# -1e4 or below. The softmax subtracts its row's max, which a causal row
# takes over its diagonal at least: unless a row's scores all lie below
# -1e4 + 104 (scaled dot products thousands strong), exp of a masked score
# minus the max is below e^-104, which is exactly 0 in fp32, and the softmax
# is the causal one bit for bit.
MASKED = -1e4


def _unrepeat_one(t):
    """(source, repeats) of a key/value repeated per query-head group."""
    ri = producer(t, "repeat_heads")
    if ri and ri.attrs["axis"] == 1:
        return ri.operands[0], ri.attrs["repeats"]
    # x[:, :, None].expand(B, KV, n, T, D).reshape(B, KV * n, T, D)
    r2 = producer(t, "reshape")
    ex = r2 and producer(r2.operands[0], "expand")
    r1 = ex and producer(ex.operands[0], "reshape")
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


def attention(g, q, k, v, attrs, where, before=None, sinks=None,
              segments=None):
    """nn.attention of q [batch, heads, seq, d], k [batch, kv_heads, seq, d]
    and v [batch, kv_heads, seq, dv] (k and v read once per query head
    group, unrepeat), with per-head `sinks` [heads] and the packed
    documents' `segments` [batch, seq] (nn.document_ids) where given,
    placed before op `before` (else last). The op takes
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
    operands = [q, k, v]
    # None: sinks absent beside segments (the printer's absent group).
    if sinks is not None or segments is not None:
        operands.append(sinks)
    if segments is not None:
        operands.append(segments)
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
    if not bool(((t == 0) | (t <= MASKED)).all()):
        return None
    return torch.broadcast_to(t <= MASKED, shape)


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
    r = producer(sym, "reshape")
    src = r and r.operands[0]
    if src is None or len(src.shape) != len(shape) + 1 or \
            src.shape[0] * src.shape[1] != shape[0] or \
            src.shape[2:] != shape[1:]:
        return None
    return src


def _softcap(s):
    """(capped input, cap) when s is cap * tanh(x / cap) (Gemma 2's
    attn_logit_softcapping), else (s, None)."""
    outer = producer(s, "scale")
    th = outer and producer(outer.operands[0], "tanh")
    inner = th and producer(th.operands[0], "scale")
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
            if p4 is None or v4 is None or not single_use(g, p):
                continue
            flat, p, v = p.shape, p4, v4
        sm = producer(p, "softmax")
        if not single_use(g, p):
            continue
        if sm:
            s = sm.operands[0]
        elif flat:
            # XGLM's softmax on [batch * heads, seq, seq] scores viewed
            # from [batch, heads, seq, seq], its result viewed back: the
            # softmax of those (the last axis is the same).
            r = producer(p, "reshape")
            sm = r and producer(r.operands[0], "softmax")
            if not sm or not single_use(g, r.operands[0]):
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
        # The packed documents of an added DocMask (packed.py).
        segments = None
        shape4 = s.shape
        # CodeGen scales the scores after its mask: the masked ones stay
        # masked (factor > 0 and they stay at most MASKED), the others are
        # scaled as the attention's scale does.
        factor = 1.0
        while failed is None:
            # XGLM's max(scores + mask, float32's lowest): a masked score
            # (-inf) becomes the lowest, which the softmax zeroes alike.
            cl = producer(s, "clamp_lowest")
            if cl and hidden is None and single_use(g, s) and (
                    producer(cl.operands[0], "add_const") or
                    producer(cl.operands[0], "masked_fill")):
                s = cl.operands[0]
                continue
            mf = producer(s, "masked_fill")
            ac = producer(s, "add_const")
            ad = producer(s, "add_segments")
            sc = producer(s, "scale")
            if sc and factor == 1.0 and sc.attrs["factor"] > 0 and \
                    (producer(sc.operands[0], "masked_fill") or
                     producer(sc.operands[0], "add_const") or
                     producer(sc.operands[0], "add_segments")):
                factor, s = sc.attrs["factor"], sc.operands[0]
                continue
            if ad:
                m = ad.attrs["mask"]
                h = mask_hidden(m.hidden, s.shape, True) \
                    if m.fill * factor <= MASKED and (
                        segments is None or segments is m.segments) \
                    else None
                segments = m.segments
                mask = ad
            elif mf:
                h = mask_hidden(mf.attrs["mask"], s.shape, True) \
                    if mf.attrs["fill"] * factor <= MASKED else None
                mask = mf
            elif ac:
                h = mask_hidden(ac.attrs["table"], s.shape, False, factor)
                mask = ac
                # openai-gpt's w * b + -1e4 * (1 - b), b the causal 0/1
                # table: where b is 0, the score is replaced by the masked
                # value; where 1, it is kept and 0 added.
                mc = producer(ac.operands[0], "mul_const")
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
        r = producer(s, "reshape")
        flat_scores = r is not None and len(shape4) == 4 and \
            r.operands[0].shape == (shape4[0] * shape4[1],) + shape4[2:]
        if flat and not flat_scores:
            continue
        if flat_scores:
            s = r.operands[0]
            ac = producer(s, "add_const")
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
                if failed.kind == "add_segments":
                    failed.where.fail("an added mask of packed documents "
                                      "before the softmax that is not the "
                                      "causal mask within each document, "
                                      "nor a sliding window of it")
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
        sc = producer(s, "scale")
        if sc:
            scale, s = sc.attrs["factor"] * factor, sc.operands[0]
        mm = producer(s, "matmul")
        if not mm:
            continue
        q, k = mm.operands
        if mm.attrs != {"transpose_rhs": True}:
            # openai-gpt's keys: k^T itself, x.permute(0, 2, 3, 1) of
            # x [batch, seq, heads, head_dim]; k is x.transpose(1, 2).
            tr = not mm.attrs and producer(k, "transpose")
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
            if segments is not None:
                out.where.fail("--packed: ALiBi beside the mask of packed "
                               "documents (its bias reads the token "
                               "indices, not the documents' positions)")
            attrs["alibi"] = alibi
        result = attention(g, q, k0, v0, attrs, out.where, before=out,
                           segments=segments)
        if flat:
            r = g.emit("reshape", [result], {}, [(out.results[0].shape,
                                                  "f32")], out.where)
            g.ops.remove(r)
            g.ops.insert(g.ops.index(out), r)
            result = r.results[0]
        g.replace_uses(out.results[0], result)
