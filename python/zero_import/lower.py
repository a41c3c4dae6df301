"""Lowering of a traced fx graph onto the importer's IR (graph.py).

Every node whose operands do not depend on the step's inputs or parameters
is a constant: its value (computed while tracing) is folded, as
`torch.arange(T)`, a causal mask buffer or a rotary cos/sin table are.
Every other node becomes `nn` ops, or pseudo ops that fuse.py must turn
into `nn` ops, or an error naming the node's torch operation.

Which rule lowers a node is looked up in three tables (FUNCTIONS, METHODS,
MODULES, below the Lowering class): the rules written here, and one per
PyTorch operation that an op of NNOps.td names in its `torchOps`, from the
generated table of ops (nn_ops.py).
"""

import math
import operator
import re

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import activations, moe
from .fuse import (attention, mask_hidden, mask_window, rope_freqs,
                   rotary_tables, table_key, unrepeat)
from .graph import Graph, Sym, Where
from .nn_ops import OPS as NN_OPS

_FLOAT_TYPES = {torch.float32: "f32"}
_INT_TYPES = {torch.int64: "i64", torch.int32: "i32"}


class Const:
    """A value known when the step is compiled."""

    def __init__(self, value):
        self.value = value


def is_sym(v):
    return isinstance(v, Sym)


def any_sym(v):
    if isinstance(v, Sym):
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


def _lower_gpt_oss_rope(low, c):
    """nn.rope: gpt-oss rotates the halves x1, x2 of each head into x1 cos -
    x2 sin and x2 cos + x1 sin, Hugging Face's x * cos + rotate_half(x) *
    sin with its [.., d / 2] tables repeated (emb = cat(freqs, freqs))."""
    where = c.where
    x = low.float_sym(c.a[0], where)
    cos, sin = unwrap(c.a[1]), unwrap(c.a[2])
    if not torch.is_tensor(cos) or not torch.is_tensor(sin):
        where.fail("a rotary embedding whose cos and sin are not constants")
    tables = getattr(low, "_gpt_oss_rotary", None)
    if tables is None:
        tables = low._gpt_oss_rotary = rotary_tables(low.module)
    # Every layer's query and key read the model's one pair of tables:
    # matched once (the entry holds them, so their keys stay theirs).
    key = ("rope", table_key(cos), table_key(sin), tuple(x.shape))
    hit = low.table_facts.get(key)
    if hit is not None:
        attrs = hit[1]
    else:
        attrs = None
        if len(x.shape) == 4:
            attrs = rope_freqs(torch.cat((cos, cos), -1),
                               torch.cat((sin, sin), -1), x.shape, tables)
        low.table_facts[key] = ((cos, sin), attrs)
    if attrs is None:
        where.fail("a rotary embedding whose tables are not the model's "
                   "own at positions 0..%d" % (x.shape[-2] - 1))
    return low.emit("rope", [x], attrs, [x.shape], where)


def _lower_sink_attention(low, c):
    """nn.attention with sinks (none where the layer has none:
    MiMo-V2-Flash's full-attention layers), transposed to [batch, seq,
    heads, dim] as the eager function returns it."""
    where = c.where
    q, k, v = (low.float_sym(t, where) for t in c.a[:3])
    sinks = None
    if unwrap(c.a[3]) is not None:
        sinks = low.float_sym(c.a[3], where, "the attention sinks")
    mask = c.a[4]
    scaling, dropout = unwrap(c.a[5]), unwrap(c.a[8])
    if dropout:
        where.fail("an attention with sinks with dropout %g" % dropout)
    window = 0
    if mask is not None:
        window = low.sdpa_window(mask, q, False, where)
    attrs = {"causal": True}
    if scaling is not None and float(scaling) != 1.0 / (q.shape[-1] ** 0.5):
        attrs["scale"] = float(scaling)
    if window:
        attrs["window"] = window
    if len(k.shape) != 4 or q.shape[1] % k.shape[1] or \
            len(v.shape) != 4 or v.shape[:-1] != k.shape[:-1]:
        where.fail("attention with queries %s, keys %s and values %s" % (
            list(q.shape), list(k.shape), list(v.shape)))
    # fuse.attention pads the narrower of the values' and the keys' head
    # dims (MiMo-V2-Flash's differ).
    o = attention(low.g, q, k, v, attrs, where, sinks=sinks)
    b, h, t, d = o.shape
    return low.emit("transpose", [o], {"permutation": [0, 2, 1, 3]},
                    [(b, t, h, d)], where)


def _norm_axis(axis, rank, where):
    if not isinstance(axis, int):
        where.fail("expected an integer dimension, got %r" % (axis,))
    if axis < 0:
        axis += rank
    if not 0 <= axis < rank:
        where.fail("dimension %d out of range for rank %d" % (axis, rank))
    return axis


class Lowering:
    def __init__(self, module, graph_fx):
        self.module = module
        self.fx = graph_fx
        self.g = Graph()
        self.env = {}
        # Parameters by identity: a tied parameter has one name, its first
        # in named_parameters() (which lists each parameter once).
        self.param_names = {}
        self.param_syms = {}
        for name, p in module.named_parameters():
            self.param_names[id(p)] = name
        self.used_params = []
        # What a constant table was found to be (a mask's window, a rotary
        # table's frequencies) by table_key and use: the layers of a model
        # share their tables, each [seq, seq] mask tested once.
        self.table_facts = {}

    # -- values ---------------------------------------------------------

    def param(self, p, where):
        # requires_grad=False: a zero.param that does not train.
        return self._param_sym(p, self.param_names.get(id(p)), "parameter",
                               not p.requires_grad, where)

    def buffer(self, buf, where):
        """A frozen zero.param of the module's buffer `buf` (a router's
        correction bias), under the buffer's name: read from the weights
        as a parameter is, never trained, exported unchanged."""
        name = next((n for n, b in self.module.named_buffers()
                     if b is buf), None)
        return self._param_sym(buf, name, "buffer", True, where)

    def _param_sym(self, t, name, kind, frozen, where):
        """The zero.param of the module's parameter or buffer `t`, declared
        at its first use."""
        if name is None:
            where.fail("a %s that is not one of the module's" % kind)
        if t.dtype != torch.float32:
            where.fail("%s '%s' is %s; the importer takes float32 "
                       "modules (train in bf16 or f16 with --dtype)" % (
                           kind, name, t.dtype))
        if id(t) not in self.param_syms:
            self.param_syms[id(t)] = Sym(t.shape, "f32", param=name)
            self.used_params.append(name)
            if frozen:
                self.g.frozen.add(name)
        return self.param_syms[id(t)]

    def emit(self, kind, operands, attrs, shapes, where, dtype="f32"):
        op = self.g.emit(kind, operands, attrs,
                         [(s, dtype) for s in shapes], where)
        return op.results[0] if len(op.results) == 1 else tuple(op.results)

    def float_sym(self, v, where, what="operand"):
        if not is_sym(v):
            where.fail("expected a tensor computed from the inputs or "
                       "parameters as %s" % what)
        if not v.is_float:
            where.fail("%s is an integer tensor; integer tensors may only be "
                       "token ids or labels" % what)
        return v

    # -- driver ---------------------------------------------------------

    def run(self):
        for node in self.fx.nodes:
            where = Where(node.meta.get("zi_op"), node.meta.get("zi_path"),
                          node.meta.get("zi_source"))
            if node.op == "output":
                self.output = self.lookup(node.args[0])
                continue
            self.env[node] = self.lower(node, where)
        return self.g

    def lookup(self, a):
        if isinstance(a, torch.fx.Node):
            return self.env[a]
        if isinstance(a, (tuple, list)):
            return type(a)(self.lookup(x) for x in a)
        if isinstance(a, dict):
            return {k: self.lookup(x) for k, x in a.items()}
        if isinstance(a, slice):
            return slice(unwrap(self.lookup(a.start)),
                         unwrap(self.lookup(a.stop)),
                         unwrap(self.lookup(a.step)))
        return a

    def lower(self, node, where):
        value = node.meta["zi_value"]
        if node.op == "placeholder":
            if not torch.is_tensor(value):
                return Const(value)
            if value.dtype in _INT_TYPES:
                dtype = _INT_TYPES[value.dtype]
            elif value.dtype in _FLOAT_TYPES:
                dtype = "f32"
            else:
                where.fail("input '%s' is %s; inputs are float32 features or "
                           "int32/int64 ids and labels" % (node.target,
                                                           value.dtype))
            if value.dim() == 0:
                where.fail("input '%s' is a scalar; dimension 0 of every "
                           "input is the batch" % node.target)
            sym = Sym(value.shape, dtype, arg=_arg_name(node.target))
            self.g.args.append(sym)
            return sym
        if node.op == "get_attr":
            if isinstance(value, nn.Parameter):
                return self.param(value, where)
            return Const(value)
        args = self.lookup(node.args)
        kwargs = self.lookup(node.kwargs)
        if node.op == "call_module":
            mod = self.module.get_submodule(node.target)
            return self.lower_module(mod, args, kwargs, value, where)
        if not any_sym(args) and not any_sym(kwargs):
            return Const(value)
        if node.op == "call_function":
            if node.target in _IN_PLACE:
                self.check_in_place(node, where)
            return self.lower_function(node.target, args, kwargs, value, where)
        return self.lower_method(node.target, args, kwargs, value, where)

    def check_in_place(self, node, where):
        """x += y is x + y unless x is read again afterwards: PyTorch would
        read the updated tensor there, through every alias."""
        target = node.args[0]
        if not isinstance(target, torch.fx.Node):
            return
        order = {n: i for i, n in enumerate(self.fx.nodes)}
        later = [u for u in target.users if u is not node and
                 order[u] > order[node]]
        if later:
            where.fail("an in-place update of a tensor that is used again "
                       "afterwards (write x = x + y)")

    # -- dispatch ---------------------------------------------------------

    def lower_module(self, mod, args, kwargs, value, where):
        if activations.is_xielu(mod):
            where.op = type(mod).__name__
            return _xielu_module(self, Call(args, kwargs, value, where,
                                            module=mod))
        if moe.is_leaf(mod):
            where.op = type(mod).__name__
            lower = moe.lower_router if moe.is_router(mod) else \
                moe.lower_experts
            return lower(self, Call(args, kwargs, value, where, module=mod))
        where.op = "nn." + type(mod).__name__
        for cls in type(mod).__mro__:
            if cls in MODULES:
                return MODULES[cls](self, Call(args, kwargs, value, where,
                                               module=mod))
        where.fail("unsupported module %s" % where.op)

    def lower_function(self, fn, args, kwargs, value, where):
        if moe.is_aux_function(fn):
            c = Call(args, kwargs, value, where)
            return moe.lower_aux(self, c.arg(0, "gate_logits"),
                                 unwrap(c.arg(2, "top_k", 2)),
                                 unwrap(c.arg(3, "attention_mask")), where)
        if moe.is_sink_attention(fn):
            return _lower_sink_attention(self, Call(args, kwargs, value,
                                                       where))
        if moe.is_gpt_oss_rope(fn):
            return _lower_gpt_oss_rope(self, Call(args, kwargs, value,
                                                     where))
        rule = FUNCTIONS.get(fn)
        if rule is None:
            where.fail("unsupported torch operation %s" % where.op)
        return rule(self, Call(args, kwargs, value, where))

    def lower_method(self, name, args, kwargs, value, where):
        rule = METHODS.get(name)
        if rule is None:
            where.fail("unsupported torch operation %s" % where.op)
        return rule(self, Call(args, kwargs, value, where))

    # -- building blocks -------------------------------------------------

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
        if is_sym(x) and not x.is_float and value.dtype in _INT_TYPES:
            if _INT_TYPES[value.dtype] == x.dtype:
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
                where.fail("division of two tensors has no equivalent")
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
                where.fail("division of a constant by a tensor has no "
                           "equivalent")
            return self.scale(sym, 1.0 / c, where)
        if kind == "sub":
            if sym_first:
                return self.add_scalar(sym, -c, where)
            return self.add_scalar(self.scale(sym, -1.0, where), c, where)
        return self.add_scalar(sym, c, where)

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
        flat = ids.reshape(-1, t).cpu() if t and ids.dtype in _INT_TYPES \
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

    def layer_norm(self, x, shape, w, b, eps, where):
        x = self.float_sym(x, where)
        shape = tuple(shape) if isinstance(shape, (tuple, list, torch.Size)) \
            else (shape,)
        shape = tuple(int(d) for d in shape)
        if len(shape) != 1 or shape[0] != x.shape[-1]:
            where.fail("layer norm over %s; nn.layer_norm normalizes the last "
                       "dimension only" % (list(shape),))
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
        shape = tuple(shape) if isinstance(shape, (tuple, list, torch.Size)) \
            else (shape,)
        shape = tuple(int(d) for d in shape)
        if len(shape) != 1 or shape[0] != x.shape[-1]:
            where.fail("RMS norm over %s; nn.rms_norm normalizes the last "
                       "dimension only" % (list(shape),))
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
        if dim is None or _norm_axis(dim, len(x.shape), where) != \
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
        d0 = _norm_axis(unwrap(d0), r, where)
        d1 = _norm_axis(unwrap(d1), r, where)
        perm = list(range(r))
        perm[d0], perm[d1] = perm[d1], perm[d0]
        return self.permute(x, perm, value, where)

    def permute(self, x, perm, value, where):
        x = self.float_sym(x, where)
        perm = [_norm_axis(p, len(x.shape), where) for p in perm]
        if perm == list(range(len(perm))):
            return x
        return self.emit("transpose", [x], {"permutation": perm},
                         [value.shape], where)

    def cat(self, xs, dim, value, where):
        if not isinstance(xs, (tuple, list)) or not xs:
            where.fail("cat of a non-list")
        xs = [self.float_sym(x, where) for x in xs]
        axis = _norm_axis(dim, len(xs[0].shape), where)
        # An empty part adds nothing (the part of each head a rotary
        # embedding over the whole head passes through, x[..., d:]).
        xs = [x for x in xs if x.shape[axis]] or xs[:1]
        if len(xs) == 1:
            return self.reshape(xs[0], value, where)
        return self.emit("concat", xs, {"axis": axis}, [value.shape], where)

    def split(self, x, size, dim, value, where):
        x = self.float_sym(x, where)
        axis = _norm_axis(dim, len(x.shape), where)
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
        axis = _norm_axis(dim, len(xs[0].shape) + 1, where)
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
        if dim is None or _norm_axis(dim, len(x.shape), where) != \
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
            "axis": _norm_axis(dim, len(x.shape), where),
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
        window = 0
        if mask is not None:
            window = self.sdpa_window(mask, q, causal, where)
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
        return attention(self.g, q, k, v, attrs, where)

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


class Call:
    """One traced call: its arguments (Syms, Consts or Python values), the
    value it computed, where it is, and the module of a module call."""

    def __init__(self, args, kwargs, value, where, module=None):
        self.a = list(args)
        self.kw = dict(kwargs)
        self.value = value
        self.where = where
        self.module = module
        self.x = self.a[0] if self.a else None

    def arg(self, i, name, default=None):
        """Positional argument i, or the keyword argument `name`."""
        if len(self.a) > i:
            return self.a[i]
        return self.kw.get(name, default)


# -- rules: from a torch operation to nn ops ----------------------------------
#
# Each table maps a torch operation to its rule, rule(lowering, call): a
# function or operator (FUNCTIONS), a Tensor method by name (METHODS), an
# nn.Module class (MODULES, subclasses included). The ops of NNOps.td that
# name PyTorch operations in `torchOps` get theirs from the generated table
# (see _add_elementwise_rules); the rules below are those that need more
# than a one-to-one mapping.

FUNCTIONS, METHODS, MODULES = {}, {}, {}


def _rule(table, *keys):
    def register(rule):
        for key in keys:
            if key is not None:  # an operation this torch lacks
                table[key] = rule
        return rule
    return register


# Modules.

@_rule(MODULES, nn.Identity)
def _identity(low, c):
    return c.x


@_rule(MODULES, nn.Dropout)
def _dropout_module(low, c):
    return low.dropout(c.x, c.module.p, c.module.training, c.where)


@_rule(MODULES, nn.Linear)
def _linear_module(low, c):
    m, where = c.module, c.where
    return low.linear(c.x, low.param(m.weight, where),
                      None if m.bias is None else low.param(m.bias, where),
                      where)


@_rule(MODULES, nn.Embedding)
def _embedding_module(low, c):
    m, where = c.module, c.where
    return low.embedding(c.x, low.param(m.weight, where), m.padding_idx,
                         m.max_norm, m.scale_grad_by_freq, c.value, where)


@_rule(MODULES, nn.LayerNorm)
def _layer_norm_module(low, c):
    m, where = c.module, c.where
    w, b = getattr(m, "weight", None), getattr(m, "bias", None)
    return low.layer_norm(c.x, m.normalized_shape,
                          None if w is None else low.param(w, where),
                          None if b is None else low.param(b, where), m.eps,
                          where)


@_rule(MODULES, getattr(nn, "RMSNorm", None))
def _rms_norm_module(low, c):
    m, where = c.module, c.where
    eps = m.eps if m.eps is not None else torch.finfo(torch.float32).eps
    return low.rms_norm(c.x, m.normalized_shape,
                        None if m.weight is None else
                        low.param(m.weight, where), eps, where)


@_rule(FUNCTIONS, getattr(F, "rms_norm", None))
def _rms_norm(low, c):
    eps = unwrap(c.arg(3, "eps"))
    return low.rms_norm(c.a[0], unwrap(c.arg(1, "normalized_shape")),
                        c.arg(2, "weight"), torch.finfo(torch.float32).eps
                        if eps is None else eps, c.where)


@_rule(MODULES, nn.GELU)
def _gelu_module(low, c):
    return low.unary("gelu" if c.module.approximate == "tanh" else "gelu_erf",
                     c.x, c.where)


@_rule(MODULES, nn.Softmax)
def _softmax_module(low, c):
    return low.softmax(c.x, c.module.dim, None, c.where)


@_rule(MODULES, nn.CrossEntropyLoss)
def _cross_entropy_module(low, c):
    m = c.module
    return low.cross_entropy(c.x, c.a[1], m.ignore_index, m.reduction,
                             m.label_smoothing, m.weight, c.where)


# Arithmetic (functions and operators; the methods take the same arguments).

def _arith_rule(kind):
    def rule(low, c):
        return low.arith(kind, c.a[0], c.a[1], c.value, c.where)
    return rule


for _kind, _functions in (
        ("add", (operator.add, operator.iadd, torch.add)),
        ("sub", (operator.sub, operator.isub, torch.sub)),
        ("mul", (operator.mul, operator.imul, torch.mul))):
    _rule(FUNCTIONS, *_functions)(_rule(METHODS, _kind)(_arith_rule(_kind)))


@_rule(FUNCTIONS, operator.truediv, operator.itruediv, torch.div)
@_rule(METHODS, "div")
def _div(low, c):
    if c.kw.get("rounding_mode") is not None:
        c.where.fail("division with rounding has no equivalent")
    return low.arith("div", c.a[0], c.a[1], c.value, c.where)


@_rule(FUNCTIONS, torch.sigmoid, F.sigmoid)
@_rule(METHODS, "sigmoid")
def _sigmoid(low, c):
    return low.sigmoid(c.a[0], c.where)


@_rule(MODULES, nn.Sigmoid)
def _sigmoid_module(low, c):
    return low.sigmoid(c.x, c.where)


@_rule(FUNCTIONS, operator.neg, torch.neg)
@_rule(METHODS, "neg")
def _neg(low, c):
    return low.scale(low.float_sym(c.a[0], c.where), -1.0, c.where)


@_rule(FUNCTIONS, operator.matmul, torch.matmul, torch.bmm)
def _matmul(low, c):
    return low.matmul(c.a[0], c.a[1], c.value, c.where)


@_rule(FUNCTIONS, torch.addmm)
def _addmm(low, c):
    """beta * input + alpha * (mat1 @ mat2), as GPT-2's Conv1D computes
    x @ W + b with W [in, out]."""
    where = c.where
    beta, alpha = unwrap(c.kw.get("beta", 1)), unwrap(c.kw.get("alpha", 1))
    for name, v in (("beta", beta), ("alpha", alpha)):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            where.fail("addmm with %s=%r has no equivalent" % (name, v))
    mat1, mat2 = c.arg(1, "mat1"), c.arg(2, "mat2")
    if not is_sym(mat1) or not is_sym(mat2) or len(mat1.shape) != 2 or \
            len(mat2.shape) != 2:
        where.fail("addmm of operands that are not 2-D tensors computed from "
                   "the inputs or parameters")
    y = low.matmul(mat1, mat2, c.value, where)
    if alpha != 1:
        y = low.scale(y, alpha, where)
    if beta == 0:
        return y
    bias = low.float_sym(c.arg(0, "input"), where, "the added input")
    if beta != 1:
        bias = low.scale(bias, beta, where)
    return low.broadcast("add", y, bias, c.value, where)


@_rule(FUNCTIONS, torch.baddbmm)
@_rule(METHODS, "baddbmm")
def _baddbmm(low, c):
    """beta * input + alpha * (batch1 @ batch2), as BLOOM adds its ALiBi
    table (the input, a constant) to the scaled attention scores."""
    where = c.where
    beta, alpha = unwrap(c.kw.get("beta", 1)), unwrap(c.kw.get("alpha", 1))
    for name, v in (("beta", beta), ("alpha", alpha)):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            where.fail("baddbmm with %s=%r has no equivalent" % (name, v))
    b1, b2 = c.arg(1, "batch1"), c.arg(2, "batch2")
    if not is_sym(b1) or not is_sym(b2) or len(b1.shape) != 3 or \
            len(b2.shape) != 3:
        where.fail("baddbmm of batches that are not 3-D tensors computed "
                   "from the inputs or parameters")
    y = low.matmul(b1, b2, c.value, where)
    if alpha != 1:
        y = low.scale(y, alpha, where)
    if beta == 0:
        return y
    bias = c.arg(0, "input")
    if is_sym(bias):
        bias = low.scale(low.float_sym(bias, where, "the added input"), beta,
                         where) if beta != 1 else bias
        return low.arith("add", y, bias, c.value, where)
    table = unwrap(bias)
    return low.arith("add", y, Const(beta * table if beta != 1 else table),
                     c.value, where)


# Layers as functions.

@_rule(FUNCTIONS, F.linear)
def _linear(low, c):
    return low.linear(c.a[0], c.arg(1, "weight"), c.arg(2, "bias"), c.where)


@_rule(FUNCTIONS, F.embedding)
def _embedding(low, c):
    return low.embedding(c.a[0], c.arg(1, "weight"),
                         unwrap(c.arg(2, "padding_idx")),
                         unwrap(c.arg(3, "max_norm")),
                         unwrap(c.arg(5, "scale_grad_by_freq")), c.value,
                         c.where)


@_rule(FUNCTIONS, F.layer_norm)
def _layer_norm(low, c):
    return low.layer_norm(c.a[0], unwrap(c.arg(1, "normalized_shape")),
                          c.arg(2, "weight"), c.arg(3, "bias"),
                          unwrap(c.arg(4, "eps", 1e-5)), c.where)


@_rule(FUNCTIONS, F.gelu)
def _gelu(low, c):
    approx = unwrap(c.arg(1, "approximate", "none"))
    return low.unary("gelu" if approx == "tanh" else "gelu_erf", c.a[0],
                     c.where)


@_rule(FUNCTIONS, F.softmax, torch.softmax)
def _softmax(low, c):
    return low.softmax(c.a[0], unwrap(c.arg(1, "dim")),
                       unwrap(c.arg(3, "dtype")), c.where)


@_rule(METHODS, "softmax")
def _softmax_method(low, c):
    return low.softmax(c.x, unwrap(c.arg(1, "dim")), unwrap(c.kw.get("dtype")),
                       c.where)


@_rule(FUNCTIONS, F.dropout)
def _dropout(low, c):
    return low.dropout(c.a[0], unwrap(c.arg(1, "p", 0.5)),
                       unwrap(c.arg(2, "training", True)), c.where)


@_rule(FUNCTIONS, F.pad)
def _pad(low, c):
    return low.pad_labels(c.a[0], unwrap(c.arg(1, "pad")),
                          unwrap(c.arg(2, "mode", "constant")),
                          unwrap(c.arg(3, "value", 0)), c.value, c.where)


@_rule(FUNCTIONS, F.cross_entropy)
def _cross_entropy(low, c):
    kw = c.kw
    return low.cross_entropy(
        c.a[0], c.arg(1, "target"), unwrap(kw.get("ignore_index", -100)),
        unwrap(kw.get("reduction", "mean")),
        unwrap(kw.get("label_smoothing", 0.0)), unwrap(c.arg(2, "weight")),
        c.where)


@_rule(FUNCTIONS, getattr(F, "scaled_dot_product_attention", None))
def _sdpa(low, c):
    return low.sdpa(c.a, c.kw, c.where)


# Parts of the patterns fuse.py recognises.

@_rule(FUNCTIONS, torch.where)
def _where_mask(low, c):
    """torch.where(mask, x, fill) with a constant mask and fill (GPT-Neo's
    causal and local masks): x.masked_fill(~mask, fill), which fuse.py
    recognises before an attention's softmax."""
    if len(c.a) != 3 or c.kw:
        c.where.fail("torch.where other than where(mask, x, fill) has no "
                     "equivalent")
    mask, x, fill = c.a
    fill = unwrap(fill)
    if torch.is_tensor(fill) and fill.dim() == 0:
        fill = fill.item()
    mask = mask.value if isinstance(mask, Const) else mask
    if not is_sym(x) or not torch.is_tensor(mask) or \
            mask.dtype != torch.bool or isinstance(fill, bool) or \
            not isinstance(fill, (int, float)):
        c.where.fail("torch.where other than where(constant mask, x, "
                     "constant fill) has no equivalent")
    return low.pseudo("masked_fill", [low.float_sym(x, c.where)],
                      {"mask": ~mask, "fill": float(fill)}, c.value, c.where)


@_rule(FUNCTIONS, torch.rsqrt)
@_rule(METHODS, "rsqrt")
def _rsqrt(low, c):
    return low.pseudo("rsqrt", [low.float_sym(c.a[0], c.where)], {}, c.value,
                      c.where)


@_rule(FUNCTIONS, torch.pow, operator.pow)
@_rule(METHODS, "pow")
def _pow(low, c):
    return low.pow(c.a[0], c.a[1], c.value, c.where)


@_rule(FUNCTIONS, torch.square)
@_rule(METHODS, "square")
def _square(low, c):
    return low.pseudo("square", [low.float_sym(c.a[0], c.where)], {}, c.value,
                      c.where)


@_rule(FUNCTIONS, torch.mean)
@_rule(METHODS, "mean")
def _mean(low, c):
    return low.mean(c.a[0], c.arg(1, "dim"), c.arg(2, "keepdim", False),
                    c.value, c.where)


@_rule(FUNCTIONS, torch.repeat_interleave)
@_rule(METHODS, "repeat_interleave")
def _repeat_interleave(low, c):
    return low.repeat_interleave(c.a[0], c.arg(1, "repeats"), c.arg(2, "dim"),
                                 c.value, c.where)


@_rule(METHODS, "repeat")
def _repeat(low, c):
    """x.repeat(r0, r1, ...): x tiled, as the concatenation of r copies along
    each axis repeated (DiffLlama's values repeated over head pairs); leading
    new axes are axes of 1 first."""
    where = c.where
    x = low.float_sym(c.x, where)
    sizes = unwrap(c.a[1:]) if len(c.a) > 1 else unwrap(c.kw.get("repeats"))
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list, torch.Size)):
        sizes = sizes[0]
    sizes = list(sizes)
    if any(isinstance(r, bool) or not isinstance(r, int) or r < 1
           for r in sizes) or len(sizes) < len(x.shape):
        where.fail("repeat %s of a tensor of rank %d has no equivalent" % (
            sizes, len(x.shape)))
    shape = (1,) * (len(sizes) - len(x.shape)) + x.shape
    if shape != x.shape:
        x = low.emit("reshape", [x], {}, [shape], where)
    for axis, r in enumerate(sizes):
        if r > 1:
            shape = x.shape[:axis] + (x.shape[axis] * r,) + x.shape[axis + 1:]
            x = low.emit("concat", [x] * r, {"axis": axis}, [shape], where)
    return x


@_rule(FUNCTIONS, torch.sum)
@_rule(METHODS, "sum")
def _sum(low, c):
    """x.sum(-1) of x [..., N] as the product x @ ones [N, 1] (DiffLlama's
    lambda = exp(sum(lambda_q * lambda_k, -1)) over a head's features): no
    nn op sums the last dimension with a gradient, nn.matmul's is the
    broadcast back."""
    where = c.where
    x = low.float_sym(c.a[0], where)
    dim = unwrap(c.arg(1, "dim"))
    keepdim = unwrap(c.arg(2, "keepdim", False))
    dtype = unwrap(c.kw.get("dtype"))
    if isinstance(dim, (tuple, list)) and len(dim) == 1:
        dim = dim[0]
    if dim is None and len(x.shape) == 1:
        dim = 0
    if isinstance(dim, (tuple, list)) or dim is None or \
            _norm_axis(dim, len(x.shape), where) != len(x.shape) - 1:
        where.fail("%s over dimension %s has no equivalent (a sum over the "
                   "last dimension only)" % (where.op, dim))
    if dtype not in (None, torch.float32):
        where.fail("%s in %s has no equivalent (the step sums in float32)"
                   % (where.op, dtype))
    n = x.shape[-1]
    rows = x if len(x.shape) >= 2 else \
        low.emit("reshape", [x], {}, [(1, n)], where)
    y = low.emit("matmul", [rows, low.fill(1.0, (1, n), where)],
                 {"transpose_rhs": True}, [rows.shape[:-1] + (1,)], where)
    shape = x.shape[:-1] + ((1,) if keepdim else ())
    return y if y.shape == shape else \
        low.emit("reshape", [y], {}, [shape], where)


@_rule(METHODS, "masked_fill")
def _masked_fill(low, c):
    mask, fill = c.a[1], unwrap(c.a[2])
    if is_sym(mask) or not isinstance(fill, (int, float)):
        c.where.fail("masked_fill with a mask computed from the inputs "
                     "has no equivalent")
    return low.pseudo("masked_fill", [low.float_sym(c.x, c.where)],
                      {"mask": mask.value, "fill": float(fill)}, c.value,
                      c.where)


@_rule(METHODS, "expand", "expand_as")
def _expand(low, c):
    return low.pseudo("expand", [low.float_sym(c.x, c.where)], {}, c.value,
                      c.where)


@_rule(FUNCTIONS, torch.max, torch.maximum)
def _max_lowest(low, c):
    """torch.max(x, lowest), lowest one constant, float32's least finite
    value (XGLM's clamp after adding its mask): x wherever x is finite,
    which fuse.py recognises between an attention's mask and softmax."""
    lowest = unwrap(c.a[1]) if len(c.a) == 2 and not c.kw else None
    if not is_sym(c.x) or not torch.is_tensor(lowest) or \
            lowest.numel() != 1 or \
            float(lowest) != torch.finfo(torch.float32).min:
        c.where.fail("%s other than the clamp max(x, torch.finfo(float32)."
                     "min) before an attention's softmax has no equivalent"
                     % c.where.op)
    return low.pseudo("clamp_lowest", [low.float_sym(c.x, c.where)], {},
                      c.value, c.where)


# Views, layout and indexing.

@_rule(FUNCTIONS, operator.getitem)
def _getitem(low, c):
    return low.getitem(c.a[0], c.a[1], c.value, c.where)


@_rule(FUNCTIONS, torch.reshape, torch.flatten, torch.unsqueeze)
@_rule(METHODS, "view", "reshape", "flatten", "unsqueeze", "squeeze")
def _reshape(low, c):
    return low.reshape(c.a[0], c.value, c.where)


@_rule(METHODS, "contiguous")
def _contiguous(low, c):
    return c.x


@_rule(FUNCTIONS, torch.transpose)
@_rule(METHODS, "transpose")
def _transpose(low, c):
    return low.transpose2(c.a[0], c.a[1], c.a[2], c.value, c.where)


@_rule(METHODS, "t")
def _t(low, c):
    return low.transpose2(c.x, 0, 1, c.value, c.where)


@_rule(FUNCTIONS, getattr)
def _attribute(low, c):
    """x.T (of a matrix) and x.mT: the last two dimensions swapped."""
    x, name = c.a[0], unwrap(c.a[1])
    if name == "mT" or (name == "T" and is_sym(x) and len(x.shape) == 2):
        return low.transpose2(x, -2, -1, c.value, c.where)
    c.where.fail("the tensor attribute .%s has no equivalent" % name)


@_rule(FUNCTIONS, torch.permute)
def _permute(low, c):
    return low.permute(c.a[0], unwrap(c.a[1]), c.value, c.where)


@_rule(METHODS, "permute")
def _permute_method(low, c):
    a = c.a
    dims = a[1:] if len(a) > 2 or not isinstance(
        unwrap(a[1]), (tuple, list)) else unwrap(a[1])
    return low.permute(c.x, list(unwrap(dims)), c.value, c.where)


@_rule(METHODS, "float", "to", "type_as", "type")
def _convert(low, c):
    return low.convert(c.x, c.value, c.where)


@_rule(FUNCTIONS, torch.cat)
def _cat(low, c):
    return low.cat(c.a[0], unwrap(c.arg(1, "dim", 0)), c.value, c.where)


@_rule(FUNCTIONS, torch.stack)
def _stack(low, c):
    return low.stack(c.a[0], unwrap(c.arg(1, "dim", 0)), c.value, c.where)


@_rule(FUNCTIONS, torch.split)
@_rule(METHODS, "split")
def _split(low, c):
    return low.split(c.a[0], unwrap(c.a[1]), unwrap(c.arg(2, "dim", 0)),
                     c.value, c.where)


@_rule(FUNCTIONS, torch.chunk)
@_rule(METHODS, "chunk")
def _chunk(low, c):
    return low.split(c.a[0], None, unwrap(c.arg(2, "dim", 0)), c.value,
                     c.where)


# Softplus and the reductions over the last dimension, whose arguments other
# than the tensor become attributes or a reshape.

def _softplus_op(low, x, beta, threshold, where):
    x = low.float_sym(x, where)
    beta, threshold = unwrap(beta), unwrap(threshold)
    for name, v in (("beta", beta), ("threshold", threshold)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or \
                not math.isfinite(v):
            where.fail("softplus with %s = %r has no equivalent (nn.softplus "
                       "takes a finite number)" % (name, v))
    if beta <= 0:
        where.fail("softplus with beta = %r has no equivalent (nn.softplus "
                   "divides by a positive beta)" % (beta,))
    return low.emit("softplus", [x], {"beta": float(beta),
                                      "threshold": float(threshold)},
                    [x.shape], where)


@_rule(FUNCTIONS, F.softplus, getattr(torch, "softplus", None))
def _softplus(low, c):
    return _softplus_op(low, c.a[0], c.arg(1, "beta", 1.0),
                        c.arg(2, "threshold", 20.0), c.where)


@_rule(MODULES, nn.Softplus)
def _softplus_module(low, c):
    return _softplus_op(low, c.x, c.module.beta, c.module.threshold, c.where)


def _xielu_module(low, c):
    """transformers' XIELUActivation (its Python path): nn.xielu of
    softplus(alpha_p) and beta + softplus(alpha_n), with the module's beta
    and eps buffers (as loaded, in the module's dtype) as attributes."""
    m, where = c.module, c.where
    x = low.float_sym(c.x, where)
    for name in ("alpha_p", "alpha_n"):
        p = getattr(m, name, None)
        if not isinstance(p, nn.Parameter) or tuple(p.shape) != (1,):
            where.fail("xIELU whose %s is not a parameter of one element "
                       "has no equivalent" % name)
    consts = {}
    for name in ("beta", "eps"):
        t = getattr(m, name, None)
        if not torch.is_tensor(t) or t.numel() != 1 or \
                not math.isfinite(float(t)):
            where.fail("xIELU whose %s is not a finite number has no "
                       "equivalent" % name)
        consts[name] = float(t)
    ap = _softplus_op(low, low.param(m.alpha_p, where), 1.0, 20.0, where)
    an = low.add_scalar(_softplus_op(low, low.param(m.alpha_n, where), 1.0,
                                     20.0, where), consts["beta"], where)
    return low.emit("xielu", [x, ap, an], consts, [x.shape], where)


def _last_axis_reduction(low, kind, x, dim, keepdim, where):
    """nn.<kind> of x [..., N] over its last dimension, [...], reshaped to
    [..., 1] with keepdim."""
    x = low.float_sym(x, where)
    dim = unwrap(dim)
    if isinstance(dim, (tuple, list)) and len(dim) == 1:
        dim = dim[0]
    if isinstance(dim, (tuple, list)) or dim is None or \
            _norm_axis(dim, len(x.shape), where) != len(x.shape) - 1:
        where.fail("%s over dimension %s has no equivalent (nn.%s reduces "
                   "the last dimension only)" % (where.op, dim, kind))
    y = low.emit(kind, [x], {}, [x.shape[:-1]], where)
    if unwrap(keepdim):
        y = low.emit("reshape", [y], {}, [x.shape[:-1] + (1,)], where)
    return y


@_rule(FUNCTIONS, torch.logsumexp)
@_rule(METHODS, "logsumexp")
def _logsumexp(low, c):
    return _last_axis_reduction(low, "logsumexp", c.a[0], c.arg(1, "dim"),
                                c.arg(2, "keepdim", False), c.where)


@_rule(FUNCTIONS, torch.amax)
@_rule(METHODS, "amax")
def _amax(low, c):
    return _last_axis_reduction(low, "reduce_max", c.a[0],
                                c.arg(1, "dim", ()),
                                c.arg(2, "keepdim", False), c.where)


# Ops of NNOps.td that name their PyTorch operations (torchOps).

def _elementwise_rule(kind, arity):
    """The operands of `kind` are the call's tensor arguments, in order, of
    one shape, the result's (an `inplace` flag changes nothing: the traced
    values are not the module's to change)."""
    def rule(low, c):
        if len(c.a) != arity or any(k != "inplace" for k in c.kw):
            c.where.fail("%s with arguments other than its %d tensor "
                         "operand%s has no equivalent" % (
                             c.where.op, arity, "s" if arity > 1 else ""))
        xs = [low.float_sym(x, c.where) for x in c.a]
        if any(x.shape != tuple(c.value.shape) for x in xs):
            c.where.fail("%s with broadcasting operands has no equivalent"
                         % c.where.op)
        return low.emit(kind, xs, {}, [xs[0].shape], c.where)
    return rule


def _torch_operation(name):
    """(table, key) of a torch operation named as messages name it, or None
    when this torch has no such operation."""
    if name.startswith("Tensor."):
        return METHODS, name[len("Tensor."):]
    if name.startswith("nn."):
        table, obj, parts = MODULES, torch.nn, name.split(".")[1:]
    elif name.startswith("torch."):
        table, obj, parts = FUNCTIONS, torch, name.split(".")[1:]
    else:
        raise ValueError("nn_ops.py: torch operation '%s' is not torch.*, "
                         "Tensor.* or nn.*" % name)
    for part in parts:
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return table, obj


def _add_elementwise_rules():
    for kind, spec in NN_OPS.items():
        for name in spec["torch"]:
            found = _torch_operation(name)
            if found is None:
                continue
            table, key = found
            if key in table:
                raise ValueError("nn_ops.py: %s maps to nn.%s and has a rule "
                                 "in lower.py" % (name, kind))
            table[key] = _elementwise_rule(kind, len(spec["operands"]))


_add_elementwise_rules()


_IN_PLACE = (operator.iadd, operator.isub, operator.imul, operator.itruediv)


def _index_as_slice(i, size):
    """The slice one index of an axis of `size` reads (an integer: one
    element), or None when no slice reads it (a list of integers that are
    not consecutive and ascending, a tensor computed from the inputs)."""
    if isinstance(i, slice):
        return i
    if torch.is_tensor(i) and i.dim() <= 1 and i.dtype in _INT_TYPES:
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


def _arg_name(name):
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not re.match(r"[A-Za-z_]", s):
        s = "a" + s
    return s
