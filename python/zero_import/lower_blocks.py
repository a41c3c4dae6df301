"""The building blocks of the lowering (lower.py): what a traced call's
arguments are (Syms, Consts, Python values), and the methods of Lowering
that emit the `nn` ops or pseudo ops of one torch operation, which the rules
(lower_rules.py) and moe.py call."""

import math

import torch

from .fuse_attention import (MASKED, attention, mask_hidden, mask_window,
                             unrepeat)
from .fuse_rope import table_key
from .graph import Sym

INT_TYPES = {torch.int64: "i64", torch.int32: "i32"}


class Const:
    """A value known when the step is compiled."""

    def __init__(self, value):
        self.value = value


class DocMask:
    """transformers' attention mask of packed documents (packed.py), never
    a tensor of the step: a key is hidden where `hidden` (bool, broadcast
    to `shape`: the causal mask or a sliding window, as without documents)
    hides it or where it lies in another document than the query
    (`segments`, the nn.document_ids they differ in). A bool mask (True
    where seen) or, with `fill`, an added one (0 where seen, fill
    elsewhere)."""

    def __init__(self, segments, hidden, shape, fill=None):
        self.segments = segments
        self.hidden = hidden
        self.shape = tuple(shape)
        self.fill = fill

    def viewed(self, shape):
        return DocMask(self.segments, self.hidden, shape, self.fill)

    def filled(self, fill, shape):
        return DocMask(self.segments, self.hidden, shape, fill)


def is_sym(v):
    return isinstance(v, Sym)


def any_sym(v):
    # A DocMask too: a call that reads one is no constant.
    if isinstance(v, (Sym, DocMask)):
        return True
    if isinstance(v, (tuple, list)):
        return any(any_sym(x) for x in v)
    if isinstance(v, dict):
        return any(any_sym(x) for x in v.values())
    return False


def unwrap(v):
    """Python value of a Const (recursively)."""
    if isinstance(v, Const):
        return v.value
    if isinstance(v, (tuple, list)):
        return type(v)(unwrap(x) for x in v)
    if isinstance(v, dict):
        return {k: unwrap(x) for k, x in v.items()}
    return v


def norm_axis(axis, rank, where):
    if not isinstance(axis, int):
        where.fail("expected an integer dimension, got %r" % (axis,))
    if axis < 0:
        axis += rank
    if not 0 <= axis < rank:
        where.fail("dimension %d out of range for rank %d" % (axis, rank))
    return axis


class Blocks:
    """Lowering's methods that build the ops of one operation (a base of
    Lowering: they use its emit, float_sym, graph g and table_facts)."""

    def pseudo(self, kind, operands, attrs, value, where):
        return self.emit(kind, operands, attrs, [value.shape], where)

    def unary(self, kind, x, where):
        x = self.float_sym(x, where)
        return self.emit(kind, [x], {}, [x.shape], where)

    def sigmoid(self, x, where):
        """sigmoid(x) as 0.5 * tanh(x / 2) + 0.5, the same function (and
        derivative) from nn.tanh."""
        x = self.float_sym(x, where)
        t = self.emit("tanh", [self.scale(x, 0.5, where)], {}, [x.shape],
                      where)
        return self.add_scalar(self.scale(t, 0.5, where), 0.5, where)

    def scale(self, x, factor, where):
        return self.emit("scale", [x], {"factor": float(factor)}, [x.shape],
                         where)

    def dropout(self, x, p, training, where):
        # The step is training: a module left in eval mode would apply its
        # dropout when PyTorch trains it, so p > 0 is refused either way.
        if p > 0:
            where.fail("dropout with p = %g: the importer has no dropout op "
                       "(use p = 0)" % p)
        return x

    def convert(self, x, value, where):
        if not torch.is_tensor(value):
            where.fail("unexpected result of a conversion")
        if is_sym(x) and x.is_float and value.dtype == torch.float32:
            return x
        if is_sym(x) and not x.is_float and value.dtype in INT_TYPES:
            if INT_TYPES[value.dtype] == x.dtype:
                return x
        where.fail("conversion of a %s tensor to %s inside the model; "
                   "the step computes in float32 (--dtype picks bf16 or "
                   "f16 training)" % (getattr(x, "dtype", "?"), value.dtype))

    def arith(self, kind, a, b, value, where):
        if is_sym(a) and is_sym(b):
            a = self.float_sym(a, where)
            b = self.float_sym(b, where)
            if kind == "sub":
                return self.broadcast("add", a, self.scale(b, -1.0, where),
                                      value, where)
            if kind == "div":
                # a * (1 / b): within a rounding of PyTorch's quotient.
                r = self.emit("reciprocal", [b], {}, [b.shape], where)
                return self.broadcast("mul", a, r, value, where)
            return self.broadcast(kind, a, b, value, where)
        sym, const, sym_first = (a, b, True) if is_sym(a) else (b, a, False)
        sym = self.float_sym(sym, where)
        c = const.value if isinstance(const, Const) else const
        if torch.is_tensor(c) and c.dim() == 0:
            c = c.item()
        if isinstance(c, bool) or not isinstance(c, (int, float)) and \
                not torch.is_tensor(c):
            where.fail("unsupported operand %r" % (c,))
        if torch.is_tensor(c):
            # A constant table (a rotary cos/sin, an additive mask): only
            # the patterns of fuse.py take one.
            if kind == "mul":
                return self.pseudo("mul_const", [sym], {"table": c}, value,
                                   where)
            if kind == "add":
                return self.pseudo("add_const", [sym], {"table": c}, value,
                                   where)
            where.fail("%s with a constant tensor has no equivalent" % kind)
        c = float(c)
        if kind == "mul":
            return self.scale(sym, c, where)
        if kind == "div":
            if not sym_first:
                # c / x as c * reciprocal(x).
                r = self.emit("reciprocal", [sym], {}, [sym.shape], where)
                return r if c == 1.0 else self.scale(r, c, where)
            return self.scale(sym, 1.0 / c, where)
        if kind == "sub":
            if sym_first:
                return self.add_scalar(sym, -c, where)
            return self.add_scalar(self.scale(sym, -1.0, where), c, where)
        return self.add_scalar(sym, c, where)

    def expand_to(self, x, shape, where):
        """x broadcast to `shape` as a tensor of its own: a suffix of the
        shape added to zeros (nn.add broadcasts it), a [.., 1] column times
        a row of ones (nn.matmul, exact)."""
        shape = tuple(shape)
        if x.shape == shape:
            return x
        def is_suffix(s):
            return len(s) <= len(shape) and shape[len(shape) - len(s):] == s

        rs = x.shape  # [1, T, C] over [B, T, C] is [T, C] broadcast
        while rs and rs[0] == 1 and not is_suffix(rs):
            rs = rs[1:]
        if is_suffix(rs):
            if rs != x.shape:
                x = self.emit("reshape", [x], {}, [rs], where)
            return self.emit("add", [self.fill(0.0, shape, where), x], {},
                             [shape], where)
        if len(shape) >= 2 and x.shape == shape[:-1] + (1,):
            return self.emit("matmul", [x, self.fill(1.0, (1, shape[-1]),
                                                     where)],
                             {}, [shape], where)
        where.fail("%s broadcasting %s to %s has no equivalent (a suffix of "
                   "the shape, or a [.., 1] column)" % (
                       where.op, list(x.shape), list(shape)))

    def clamp(self, x, lo, hi, where):
        x = self.float_sym(x, where)
        for v in (lo, hi):
            if v is not None and math.isnan(v):
                where.fail("%s with a NaN bound has no equivalent" % where.op)
        # An infinite bound that always holds is none.
        lo = None if lo == -math.inf else lo
        hi = None if hi == math.inf else hi
        if lo == math.inf or hi == -math.inf:
            where.fail("%s with an infinite bound has no equivalent"
                       % where.op)
        if lo is None and hi is None:
            return x
        attrs = {}
        if lo is not None:
            attrs["min"] = lo
        if hi is not None:
            attrs["max"] = hi
        return self.emit("clamp", [x], attrs, [x.shape], where)

    def stop_gradient(self, x, where):
        if isinstance(x, Const) or (is_sym(x) and not x.is_float):
            return x
        x = self.float_sym(x, where)
        return self.emit("stop_gradient", [x], {}, [x.shape], where)

    def where(self, mask, a, b, value, where):
        """torch.where(mask, a, b) with a mask computed in the step (a float
        mask, nonzero for true) and a, b tensors or numbers."""
        out = tuple(value.shape)
        mask = self.expand_to(self.float_sym(mask, where, "the condition"),
                              out, where)

        def branch(v):
            v = unwrap(v)
            if torch.is_tensor(v) and v.dim() == 0:
                v = v.item()
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return self.fill(float(v), out, where)
            return self.expand_to(self.float_sym(v, where), out, where)

        return self.emit("where", [mask, branch(a), branch(b)], {}, [out],
                         where)

    def gather(self, x, dim, idx, value, where):
        """x.gather(-1, idx): nn.gather of the step's integer ids, or of
        ids.unsqueeze(-1) as the ids themselves (TRL's selective
        log-softmax), the result then viewed as [..., 1]."""
        x = self.float_sym(x, where)
        rank = len(x.shape)
        if norm_axis(dim, rank, where) != rank - 1:
            where.fail("%s along dimension %d has no equivalent (nn.gather "
                       "takes the last)" % (where.op, dim))
        if not is_sym(idx) or idx.is_float:
            where.fail("%s with indices that are not integer ids of the "
                       "step has no equivalent" % where.op)
        out = tuple(value.shape)
        if idx.op is not None and idx.op.kind == "int_reshape" and \
                idx.op.operands[0].op is None and \
                idx.shape == idx.op.operands[0].shape + (1,):
            ids = idx.op.operands[0]
            if ids.shape != x.shape[:-1]:
                where.fail("%s with indices %s of a tensor %s has no "
                           "equivalent (the leading dimensions must agree)"
                           % (where.op, list(idx.shape), list(x.shape)))
            y = self.emit("gather", [x, ids], {}, [ids.shape], where)
            return self.emit("reshape", [y], {}, [out], where)
        if idx.op is not None:
            where.fail("%s with indices computed in the step (other than "
                       "ids.unsqueeze(-1)) has no equivalent" % where.op)
        if len(idx.shape) != rank or idx.shape[:-1] != x.shape[:-1]:
            where.fail("%s with indices %s of a tensor %s has no equivalent "
                       "(the leading dimensions must agree)" % (
                           where.op, list(idx.shape), list(x.shape)))
        return self.emit("gather", [x, idx], {}, [out], where)

    def add_scalar(self, x, c, where):
        return self.emit("add_scalar", [x], {"value": c}, [x.shape], where)

    def broadcast(self, kind, a, b, value, where):
        """nn.add/nn.mul broadcast the rhs over leading dimensions."""
        out = tuple(value.shape)

        def is_suffix(shape):
            return out[len(out) - len(shape):] == shape

        for lhs, rhs in ((a, b), (b, a)):  # both ops commute
            if lhs.shape != out:
                continue
            # An expanded tensor is what nn.add broadcasts, where it can.
            if rhs.op is not None and rhs.op.kind == "expand":
                rhs = rhs.op.operands[0]
            rs = rhs.shape
            # [1, T, C] over [B, T, C] is [T, C] broadcast.
            while rs and rs[0] == 1 and not is_suffix(rs):
                rs = rs[1:]
            if is_suffix(rs):
                if rs != rhs.shape:
                    rhs = self.emit("reshape", [rhs], {}, [rs], where)
                return self.emit(kind, [lhs, rhs], {}, [out], where)
        # Other broadcasts (a [.., 1] column): only fuse.py's patterns.
        return self.emit(kind + "_bcast", [a, b], {}, [out], where)

    def linear(self, x, w, b, where):
        x = self.float_sym(x, where, "the input")
        if not is_sym(w) or w.param is None:
            where.fail("a linear layer whose weight is not a parameter")
        out, inp = w.shape
        if x.shape[-1] != inp:
            where.fail("linear input has %d features, the weight %d" % (
                x.shape[-1], inp))
        y = self.emit("matmul", [x, w], {"transpose_rhs": True},
                      [x.shape[:-1] + (out,)], where)
        if b is not None:
            if not is_sym(b) or b.param is None:
                where.fail("a linear layer whose bias is not a parameter")
            y = self.emit("add", [y, b], {}, [y.shape], where)
        return y

    def embedding(self, ids, w, padding_idx, max_norm, scale_grad, value,
                  where):
        if not is_sym(w) or w.param is None or len(w.shape) != 2:
            where.fail("an embedding whose table is not a 2-D parameter")
        if max_norm is not None:
            where.fail("an embedding with max_norm has no equivalent (it "
                       "renormalizes the table's rows in place)")
        if scale_grad:
            where.fail("an embedding with scale_grad_by_freq has no "
                       "equivalent")
        attrs = {}
        if padding_idx is not None:
            # PyTorch's padding row gets no gradient.
            rows = w.shape[0]
            if padding_idx < 0:
                padding_idx += rows
            if not 0 <= padding_idx < rows:
                where.fail("padding_idx %d is out of range for %d rows" % (
                    padding_idx, rows))
            attrs["padding_idx"] = padding_idx
        if isinstance(ids, Const):
            if attrs:
                where.fail("an embedding of constant ids with padding_idx "
                           "has no equivalent")
            return self.positions(ids.value, w, value, where)
        ids = self.int_view(ids, where)
        return self.emit("embedding", [w, ids], attrs, [value.shape], where)

    def positions(self, ids, w, value, where):
        """Rows o..o+T-1 of a P-row table, of constant ids whose every row
        along the last axis is o..o+T-1 (a learned positional embedding: o
        is 0, or OPT's and BioGPT's offset of 2), or row k of ids all k (a
        token type embedding of token types all 0); nn.add broadcasts them
        over the leading dimensions. The rows of an o of 0 are the table,
        or the first part of its split into P / T equal parts where T
        divides P, else into T and P - T rows; of another o, the part of
        the table's split at o and o + T."""
        rows, dim = w.shape
        t = ids.shape[-1] if torch.is_tensor(ids) and ids.dim() >= 1 else 0
        flat = ids.reshape(-1, t).cpu() if t and ids.dtype in INT_TYPES \
            else None
        first = int(flat[0, 0]) if flat is not None and flat.numel() else -1
        if flat is not None and 0 <= first < rows and bool(
                (flat == first).all()):
            t, one = 1, True
        elif flat is not None and 0 <= first and first + t <= rows and \
                torch.equal(flat, torch.arange(first, first + t,
                                               dtype=ids.dtype).expand_as(
                                                   flat)):
            one = False
        else:
            where.fail("an embedding of constant ids other than the "
                       "positions o..o+T-1 in every row (o + T at most the "
                       "table's %d rows) or one id everywhere has no "
                       "equivalent" % rows)
        if not one and getattr(self, "packed", False):
            where.fail("--packed: a position embedding of the constant "
                       "positions %d..%d of every row, not of the step's "
                       "position_ids" % (first, first + t - 1))
        table = w
        if first == 0 and t < rows:
            parts = [t] * (rows // t) if rows % t == 0 else [t, rows - t]
            table = self.g.emit("split", [w], {"axis": 0},
                                [((n, dim), "f32") for n in parts],
                                where).results[0]
        elif t < rows:
            cuts = sorted({0, first, first + t, rows})
            parts = [b - a for a, b in zip(cuts, cuts[1:])]
            table = self.g.emit("split", [w], {"axis": 0},
                                [((n, dim), "f32") for n in parts],
                                where).results[cuts.index(first)]
        if one:
            table = self.emit("reshape", [table], {}, [(dim,)], where)
        if table.shape != tuple(value.shape) and \
                math.prod(table.shape) != math.prod(value.shape):
            # [B, T] ids: rows that nn.add broadcasts (see broadcast).
            return self.pseudo("expand", [table], {}, value, where)
        return self.reshape(table, value, where)

    def int_view(self, ids, where):
        if not is_sym(ids) or ids.is_float:
            where.fail("expected integer token ids")
        if ids.op is not None:
            where.fail("token ids must be an input of the step, not computed")
        return ids

    def _norm_shape(self, x, shape, what, kind, where):
        """The normalized shape (an int or a sequence) as a tuple, which
        must be x's last dimension: nn.`kind` normalizes only that."""
        shape = tuple(shape) if isinstance(shape, (tuple, list, torch.Size)) \
            else (shape,)
        shape = tuple(int(d) for d in shape)
        if len(shape) != 1 or shape[0] != x.shape[-1]:
            where.fail("%s over %s; nn.%s normalizes the last dimension only"
                       % (what, list(shape), kind))
        return shape

    def layer_norm(self, x, shape, w, b, eps, where):
        x = self.float_sym(x, where)
        shape = self._norm_shape(x, shape, "layer norm", "layer_norm", where)
        # Without a weight (or a bias), the op's with a row of ones (of
        # zeros): y * 1 + 0 is y exactly, and their gradients are dropped.
        if w is None:
            w = self.fill(1.0, shape, where)
        if b is None:
            b = self.fill(0.0, shape, where)
        if not is_sym(w) or not is_sym(b) or w.shape != shape or \
                b.shape != shape:
            where.fail("layer norm whose weight and bias are not tensors "
                       "of shape %s computed from the parameters" % (
                           list(shape),))
        return self.emit("layer_norm", [x, w, b], {"eps": float(eps)},
                         [x.shape], where)

    def fill(self, value, shape, where):
        return self.emit("fill", [], {"value": float(value)}, [shape], where)

    def rms_norm(self, x, shape, w, eps, where):
        x = self.float_sym(x, where)
        shape = self._norm_shape(x, shape, "RMS norm", "rms_norm", where)
        # Without a weight, the op's with a row of ones (n * 1 is n).
        if w is None:
            w = self.fill(1.0, shape, where)
        if not is_sym(w) or w.shape != shape:
            where.fail("RMS norm whose weight is not a tensor of shape %s "
                       "computed from the parameters" % (list(shape),))
        return self.emit("rms_norm", [x, w], {"eps": float(eps)}, [x.shape],
                         where)

    def softmax(self, x, dim, dtype, where):
        x = self.float_sym(x, where)
        if dim is None or norm_axis(dim, len(x.shape), where) != \
                len(x.shape) - 1:
            where.fail("softmax over dimension %s; nn.softmax takes the last"
                       % (dim,))
        if dtype not in (None, torch.float32):
            where.fail("softmax in %s" % dtype)
        return self.emit("softmax", [x], {}, [x.shape], where)

    def matmul(self, a, b, value, where):
        a = self.float_sym(a, where)
        b = self.float_sym(b, where)
        flags = {}
        # x @ w.transpose(-2, -1) is one matmul with transpose_rhs.
        if b.op is not None and b.op.kind == "transpose" and \
                _swaps_last_two(b.op.attrs["permutation"]):
            b = b.op.operands[0]
            flags["transpose_rhs"] = True
        if len(a.shape) < 2 or not (len(b.shape) == 2 or
                                    (len(b.shape) == len(a.shape) and
                                     b.shape[:-2] == a.shape[:-2])):
            where.fail("matmul of %s and %s: nn.matmul takes equal batch "
                       "dimensions or a 2-D right operand" % (
                           list(a.shape), list(b.shape)))
        return self.emit("matmul", [a, b], flags, [value.shape], where)

    def reshape(self, x, value, where):
        if not is_sym(x):
            where.fail("reshape of a non-tensor")
        if tuple(value.shape) == x.shape:
            return x
        if not x.is_float:
            return self.emit("int_reshape", [x], {}, [value.shape], where,
                             dtype=x.dtype)
        return self.emit("reshape", [x], {}, [value.shape], where)

    def transpose2(self, x, d0, d1, value, where):
        x = self.float_sym(x, where)
        r = len(x.shape)
        d0 = norm_axis(unwrap(d0), r, where)
        d1 = norm_axis(unwrap(d1), r, where)
        perm = list(range(r))
        perm[d0], perm[d1] = perm[d1], perm[d0]
        return self.permute(x, perm, value, where)

    def permute(self, x, perm, value, where):
        x = self.float_sym(x, where)
        perm = [norm_axis(p, len(x.shape), where) for p in perm]
        if perm == list(range(len(perm))):
            return x
        return self.emit("transpose", [x], {"permutation": perm},
                         [value.shape], where)

    def cat(self, xs, dim, value, where):
        if not isinstance(xs, (tuple, list)) or not xs:
            where.fail("cat of a non-list")
        xs = [self.float_sym(x, where) for x in xs]
        axis = norm_axis(dim, len(xs[0].shape), where)
        # An empty part adds nothing (the part of each head a rotary
        # embedding over the whole head passes through, x[..., d:]).
        xs = [x for x in xs if x.shape[axis]] or xs[:1]
        if len(xs) == 1:
            return self.reshape(xs[0], value, where)
        return self.emit("concat", xs, {"axis": axis}, [value.shape], where)

    def split(self, x, size, dim, value, where):
        x = self.float_sym(x, where)
        axis = norm_axis(dim, len(x.shape), where)
        shapes = [tuple(v.shape) for v in value]
        if len(shapes) == 1:
            return (x,)
        return tuple(self.g.emit("split", [x], {"axis": axis},
                                 [(s, "f32") for s in shapes],
                                 where).results)

    def getitem(self, x, idx, value, where):
        if isinstance(x, (tuple, list)):
            return x[unwrap(idx)]
        if is_sym(x) and not x.is_float:
            return self.shift_labels(x, unwrap(idx), value, where)
        x = self.float_sym(x, where)
        idx = unwrap(idx)
        if not isinstance(idx, tuple):
            idx = (idx,)
        # Only views: full slices, None (a new axis of 1), slices of step
        # 1, an integer (a slice of one, its axis dropped) or a list of
        # consecutive ascending integers (a slice), ... .
        dims = len(x.shape)
        explicit = sum(1 for i in idx if i is not None and i is not Ellipsis)
        if any(is_sym(i) for i in idx):
            where.fail("indexing with a tensor computed from the inputs or "
                       "parameters has no equivalent")
        # A list beside other lists or integers is advanced indexing, which
        # gathers (and may move the axes): one list only, and no integer.
        lists = sum(1 for i in idx if isinstance(i, (list, tuple)) or
                    torch.is_tensor(i))
        ints = sum(1 for i in idx if isinstance(i, int) and
                   not isinstance(i, bool))
        if lists > 1 or lists and ints:
            where.fail("advanced indexing (several lists or integers "
                       "indexing together) has no equivalent")
        axis = 0
        sliced = []
        for i in idx:
            if i is Ellipsis:
                axis += dims - explicit
                continue
            if i is None:
                continue
            if axis >= dims:
                where.fail("too many indices for a tensor of rank %d" % dims)
            size = x.shape[axis]
            sl = _index_as_slice(i, size)
            if sl is None:
                where.fail("indexing with %r has no equivalent (slices, "
                           "integers, lists of consecutive integers and None "
                           "only)" % (i,))
            start, stop, step = sl.indices(size)
            if step != 1:
                return self.strided_slice(x, idx, axis, start, stop, step,
                                          value, where)
            stop = max(start, stop)
            if (start, stop) != (0, size):
                sliced.append((axis, start, stop))
            axis += 1
        # Each sliced axis in turn (fuse.lower_slices cuts each at its
        # bounds), then the dropped and new axes of 1 as a reshape.
        for ax, start, stop in sliced:
            shape = x.shape[:ax] + (stop - start,) + x.shape[ax + 1:]
            x = self.emit("slice", [x], {"axis": ax, "start": start,
                                         "stop": stop}, [shape], where)
        return self.reshape(x, value, where)

    def strided_slice(self, x, idx, axis, start, stop, step, value, where):
        """x[..., 0::2] and x[..., 1::2], the even and odd features of the
        last axis: only an interleaved rotary embedding takes them
        (fuse.py)."""
        others = [i for i in idx if i is not Ellipsis and
                  i != slice(None, None, None)]
        last = len(x.shape) - 1
        d = x.shape[last] if x.shape else 0
        if axis != last or len(others) != 1 or step != 2 or d % 2 or \
                start not in (0, 1) or stop < d - 1:
            where.fail("a strided slice has no equivalent")
        return self.pseudo("slice_every", [x], {"axis": axis,
                                                "start": start,
                                                "step": step}, value, where)

    def stack(self, xs, dim, value, where):
        """torch.stack of tensors of one shape along a new axis: only an
        interleaved rotary embedding takes it (fuse.py)."""
        if not isinstance(xs, (tuple, list)) or not xs:
            where.fail("stack of a non-list")
        xs = [self.float_sym(x, where) for x in xs]
        if any(x.shape != xs[0].shape for x in xs):
            where.fail("stack of tensors of different shapes")
        axis = norm_axis(dim, len(xs[0].shape) + 1, where)
        return self.pseudo("stack", xs, {"axis": axis}, value, where)

    def pad_labels(self, x, pad, mode, fill, value, where):
        """F.pad(labels, (0, 1), value=v): the first half of transformers'
        causal label shift (see shift_labels)."""
        if not is_sym(x) or x.is_float or tuple(pad) != (0, 1) or \
                mode != "constant" or isinstance(fill, bool) or \
                not isinstance(fill, int):
            where.fail("F.pad has no equivalent (F.pad(labels, (0, 1), "
                       "value=-100)[..., 1:] is recognised as the label "
                       "shift of a causal LM's loss)")
        return self.emit("pad_labels", [x], {"fill": fill}, [value.shape],
                         where, dtype=x.dtype)

    def shift_labels(self, x, idx, value, where):
        """labels shifted left by one position, the last one `fill`:
        F.pad(labels, (0, 1), value=fill)[..., 1:], as transformers'
        ForCausalLMLoss writes it."""
        pad = x.op if x.op is not None and x.op.kind == "pad_labels" else None
        idx = idx if isinstance(idx, tuple) else (idx,)
        shift = slice(1, None, None)
        rest = (slice(None, None, None),) * (len(x.shape) - 1)
        if pad is None or idx not in ((Ellipsis, shift), rest + (shift,)):
            where.fail("indexing an integer tensor has no equivalent "
                       "(F.pad(labels, (0, 1), value=-100)[..., 1:] is "
                       "recognised as the label shift of a causal LM's loss)")
        return self.emit("shift_labels", pad.operands, pad.attrs,
                         [value.shape], where, dtype=x.dtype)

    def pow(self, x, e, value, where):
        e = unwrap(e)
        # x ** -0.5 is rsqrt(x), as PyTorch's pow kernel computes it.
        kind = {2: "square", 3: "cube", -0.5: "rsqrt"}.get(e) if \
            is_sym(x) and not isinstance(e, bool) and \
            isinstance(e, (int, float)) else None
        if kind is None:
            where.fail("pow with exponent %r has no equivalent (x ** 2 is "
                       "x * x, x ** -0.5 is recognised inside an RMS norm, "
                       "x ** 3 inside GELU's tanh approximation)" % (e,))
        return self.pseudo(kind, [self.float_sym(x, where)], {}, value, where)

    def mean(self, x, dim, keepdim, value, where):
        x = self.float_sym(x, where)
        dim = unwrap(dim)
        if isinstance(dim, (tuple, list)) and len(dim) == 1:
            dim = dim[0]
        if dim is None or norm_axis(dim, len(x.shape), where) != \
                len(x.shape) - 1 or not unwrap(keepdim):
            where.fail("mean has no equivalent (mean(-1, keepdim=True) of a "
                       "square is recognised inside an RMS norm)")
        return self.pseudo("mean_last", [x], {}, value, where)

    def repeat_interleave(self, x, repeats, dim, value, where):
        x = self.float_sym(x, where)
        repeats, dim = unwrap(repeats), unwrap(dim)
        if not isinstance(repeats, int) or dim is None:
            where.fail("repeat_interleave with %r repeats along %r has no "
                       "equivalent" % (repeats, dim))
        return self.pseudo("repeat_heads", [x], {
            "axis": norm_axis(dim, len(x.shape), where),
            "repeats": repeats}, value, where)

    def cross_entropy(self, logits, labels, ignore_index, reduction,
                      smoothing, weight, where):
        logits = self.float_sym(logits, where, "the logits")
        if reduction != "mean" or smoothing or weight is not None:
            where.fail("cross entropy with reduction=%r, label_smoothing=%r"
                       ", weight=%s: only the mean over every position" % (
                           reduction, smoothing,
                           "set" if weight is not None else None))
        # A negative ignore_index never matches a label nn.
        # softmax_cross_entropy accepts (ids out of [0, classes) are a
        # runtime error), so it changes nothing.
        if ignore_index is not None and ignore_index >= 0:
            where.fail("cross entropy with ignore_index=%d has no "
                       "equivalent" % ignore_index)
        if not is_sym(labels) or labels.is_float:
            where.fail("cross entropy needs integer class labels")
        # logits.view(-1, V) with targets.view(-1): the op takes the
        # unflattened tensors.
        if logits.op is not None and logits.op.kind == "reshape" and \
                len(logits.shape) == 2:
            src = logits.op.operands[0]
            if src.shape[-1] == logits.shape[-1]:
                lab = labels
                if lab.op is not None and lab.op.kind == "int_reshape":
                    lab = lab.op.operands[0]
                if lab.shape == src.shape[:-1]:
                    logits, labels = src, lab
        while labels.op is not None and labels.op.kind == "int_reshape" and \
                labels.op.operands[0].shape == logits.shape[:-1]:
            labels = labels.op.operands[0]
        if labels.shape != logits.shape[:-1]:
            where.fail("cross entropy of logits %s and labels %s: labels "
                       "have the logits' shape without the class dimension"
                       % (list(logits.shape), list(labels.shape)))
        attrs = {}
        if labels.op is not None and labels.op.kind == "shift_labels":
            # The labels shifted inside the model (transformers'
            # ForCausalLMLoss): the last position holds the fill, which
            # must be the cross entropy's ignore_index; it then ignores
            # that position and the ones the data labels with it alike.
            fill = labels.op.attrs["fill"]
            if fill != ignore_index:
                where.fail("cross entropy of labels shifted with the fill %d "
                           "and ignore_index=%s: the last position is not "
                           "ignored" % (fill, ignore_index))
            if labels.op.operands[0].op is not None:
                where.fail("labels must be an input of the step, not "
                           "computed (the shift of an input is recognised)")
            attrs["ignore_index"] = fill
        elif labels.op is not None:
            where.fail("labels must be an input of the step, not computed")
        return self.emit("softmax_cross_entropy", [logits, labels], attrs,
                         [()], where)

    def sdpa(self, a, kw, where):
        q, k, v = (self.float_sym(t, where) for t in a[:3])
        mask = kw.get("attn_mask", a[3] if len(a) > 3 else None)
        p = unwrap(kw.get("dropout_p", a[4] if len(a) > 4 else 0.0))
        causal = unwrap(kw.get("is_causal", a[5] if len(a) > 5 else False))
        scale = unwrap(kw.get("scale", None))
        window, segments = 0, None
        if mask is not None:
            window, segments = self.attention_mask(mask, q, causal, where)
            causal = True
        if p:
            where.fail("scaled_dot_product_attention with dropout_p = %g" % p)
        # With enable_gqa, query head h reads key/value head h // (heads /
        # kv_heads), as nn.attention's grouped-query form does (without it,
        # PyTorch refuses unequal head counts when the node runs); unrepeat
        # checks that kv_heads divides heads.
        k, v = unrepeat(self.g, k, v, q, where)
        # An explicit scale of 1/sqrt(head_dim) (Hugging Face passes one)
        # is the op's default.
        if scale is not None and float(scale) == 1.0 / math.sqrt(q.shape[-1]):
            scale = None
        attrs = {"causal": bool(causal), "scale": scale}
        if window:
            attrs["window"] = window
        return attention(self.g, q, k, v, attrs, where, segments=segments)

    def attention_mask(self, mask, q, causal, where):
        """(window, segments) of an attn_mask: sdpa_window's, or of the
        mask of packed documents (a DocMask), its window and documents."""
        if not isinstance(mask, DocMask):
            return self.sdpa_window(mask, q, causal, where), None
        shape = tuple(q.shape[:-1]) + (q.shape[-2],)
        hidden = None
        if not causal and (mask.fill is None or mask.fill <= MASKED):
            hidden = mask_hidden(mask.hidden, shape, True)
        window = None if hidden is None else mask_window(hidden, shape)
        if window is None:
            where.fail("an attention whose mask of packed documents is not "
                       "the causal mask within each document, nor a sliding "
                       "window of it")
        return window, mask.segments

    def sdpa_window(self, mask, q, causal, where):
        """The window of an attn_mask that is transformers' causal or
        sliding-window mask (bool: True where seen; float: added); 0 for the
        causal one."""
        table = mask.value if isinstance(mask, Const) else mask
        window = None
        key = None
        if torch.is_tensor(table):
            key = ("window", table_key(table), tuple(q.shape), bool(causal))
            hit = self.table_facts.get(key)
            if hit is not None:
                return hit[1]
        if not causal and torch.is_tensor(table):
            shape = tuple(q.shape[:-1]) + (q.shape[-2],)
            if table.dtype == torch.bool:
                hidden = mask_hidden(~table, shape, True)
            else:
                hidden = mask_hidden(table, shape, False)
            window = None if hidden is None else mask_window(hidden, shape)
        if window is None:
            where.fail("scaled_dot_product_attention with an attn_mask "
                       "that is neither the causal mask nor a sliding window "
                       "of it (use is_causal=True)")
        self.table_facts[key] = (table, window)
        return window


def _index_as_slice(i, size):
    """The slice one index of an axis of `size` reads (an integer: one
    element), or None when no slice reads it (a list of integers that are
    not consecutive and ascending, a tensor computed from the inputs)."""
    if isinstance(i, slice):
        return i
    if torch.is_tensor(i) and i.dim() <= 1 and i.dtype in INT_TYPES:
        i = i.tolist()
    if isinstance(i, bool):
        return None
    if isinstance(i, int):
        if not -size <= i < size:
            return None
        i %= size
        return slice(i, i + 1)
    if isinstance(i, (list, tuple)) and i and all(
            isinstance(j, int) and not isinstance(j, bool) and
            -size <= j < size for j in i):
        first = i[0] % size
        if [j % size for j in i] == list(range(first, first + len(i))):
            return slice(first, first + len(i))
    return None


def _swaps_last_two(perm):
    n = len(perm)
    return n >= 2 and list(perm) == list(range(n - 2)) + [n - 1, n - 2]
