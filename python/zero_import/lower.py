"""Lowering of a traced fx graph onto the importer's IR (graph.py).

Every node whose operands do not depend on the step's inputs or parameters
is a constant: its value (computed while tracing) is folded, as
`torch.arange(T)`, a causal mask buffer or a rotary cos/sin table are.
Every other node becomes `nn` ops, or pseudo ops that fuse.py must turn
into `nn` ops, or an error naming the node's torch operation.
"""

import operator

import torch
import torch.nn as nn
import torch.nn.functional as F

from .graph import Graph, Sym, Where

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

    # -- values ---------------------------------------------------------

    def param(self, p, where):
        name = self.param_names.get(id(p))
        if name is None:
            where.fail("a parameter that is not one of the module's")
        if not p.requires_grad:
            where.fail("parameter '%s' is frozen (requires_grad=False); the "
                       "step trains every parameter" % name)
        if p.dtype != torch.float32:
            where.fail("parameter '%s' is %s; the importer takes float32 "
                       "modules (train in bf16 or f16 with --dtype)" % (
                           name, p.dtype))
        if id(p) not in self.param_syms:
            self.param_syms[id(p)] = Sym(p.shape, "f32", param=name)
            self.used_params.append(name)
        return self.param_syms[id(p)]

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

    # -- modules --------------------------------------------------------

    def lower_module(self, mod, args, kwargs, value, where):
        where.op = "nn." + type(mod).__name__
        x = args[0] if args else None
        if isinstance(mod, (nn.Identity,)):
            return x
        if isinstance(mod, nn.Dropout):
            return self.dropout(x, mod.p, mod.training, where)
        if isinstance(mod, nn.Linear):
            return self.linear(x, self.param(mod.weight, where),
                               None if mod.bias is None else
                               self.param(mod.bias, where), where)
        if isinstance(mod, nn.Embedding):
            if mod.padding_idx is not None or mod.max_norm is not None:
                where.fail("nn.Embedding with padding_idx or max_norm has no "
                           "equivalent (nn.embedding updates every row)")
            return self.embedding(x, self.param(mod.weight, where), value,
                                  where)
        if isinstance(mod, nn.LayerNorm):
            if not mod.elementwise_affine or getattr(mod, "bias",
                                                     None) is None:
                where.fail("nn.LayerNorm without weight and bias has no "
                           "equivalent (nn.layer_norm has both)")
            return self.layer_norm(x, mod.normalized_shape,
                                   self.param(mod.weight, where),
                                   self.param(mod.bias, where), mod.eps,
                                   where)
        rms = getattr(nn, "RMSNorm", None)
        if rms is not None and isinstance(mod, rms):
            if mod.weight is None:
                where.fail("nn.RMSNorm without a weight has no equivalent")
            eps = mod.eps if mod.eps is not None else \
                torch.finfo(torch.float32).eps
            return self.rms_norm(x, mod.normalized_shape,
                                 self.param(mod.weight, where), eps, where)
        if isinstance(mod, nn.GELU):
            return self.unary("gelu" if mod.approximate == "tanh"
                              else "gelu_erf", x, where)
        if isinstance(mod, nn.SiLU):
            return self.unary("silu", x, where)
        if isinstance(mod, nn.ReLU):
            return self.unary("relu", x, where)
        if isinstance(mod, nn.Softmax):
            return self.softmax(x, mod.dim, None, where)
        if isinstance(mod, nn.CrossEntropyLoss):
            return self.cross_entropy(
                x, args[1], mod.ignore_index, mod.reduction,
                mod.label_smoothing, mod.weight, where)
        where.fail("unsupported module %s" % where.op)

    # -- functions and methods -------------------------------------------

    def lower_function(self, fn, args, kwargs, value, where):
        a = list(args)
        kw = dict(kwargs)

        def arg(i, name, default=None):
            if len(a) > i:
                return a[i]
            return kw.get(name, default)

        if fn in (operator.add, operator.iadd, torch.add):
            return self.arith("add", a[0], a[1], value, where)
        if fn in (operator.sub, operator.isub, torch.sub):
            return self.arith("sub", a[0], a[1], value, where)
        if fn in (operator.mul, operator.imul, torch.mul):
            return self.arith("mul", a[0], a[1], value, where)
        if fn in (operator.truediv, operator.itruediv, torch.div):
            if kw.get("rounding_mode") is not None:
                where.fail("division with rounding has no equivalent")
            return self.arith("div", a[0], a[1], value, where)
        if fn in (operator.neg, torch.neg):
            return self.scale(self.float_sym(a[0], where), -1.0, where)
        if fn in (operator.matmul, torch.matmul, torch.bmm):
            return self.matmul(a[0], a[1], value, where)
        if fn is operator.getitem:
            return self.getitem(a[0], a[1], value, where)
        if fn is F.linear:
            return self.linear(a[0], arg(1, "weight"), arg(2, "bias"), where)
        if fn is F.embedding:
            for k in ("padding_idx", "max_norm"):
                if kw.get(k) is not None:
                    where.fail("F.embedding with %s has no equivalent" % k)
            return self.embedding(a[0], arg(1, "weight"), value, where)
        if fn is F.layer_norm:
            return self.layer_norm(a[0], unwrap(arg(1, "normalized_shape")),
                                   arg(2, "weight"), arg(3, "bias"),
                                   unwrap(arg(4, "eps", 1e-5)), where)
        if fn is F.gelu:
            approx = unwrap(arg(1, "approximate", "none"))
            return self.unary("gelu" if approx == "tanh" else "gelu_erf",
                              a[0], where)
        if fn in (F.silu,):
            return self.unary("silu", a[0], where)
        if fn in (F.relu, torch.relu):
            return self.unary("relu", a[0], where)
        if fn in (F.softmax, torch.softmax):
            return self.softmax(a[0], unwrap(arg(1, "dim")),
                                unwrap(arg(3, "dtype", kw.get("dtype"))),
                                where)
        if fn is F.dropout:
            return self.dropout(a[0], unwrap(arg(1, "p", 0.5)),
                                unwrap(arg(2, "training", True)), where)
        if fn is F.cross_entropy:
            return self.cross_entropy(
                a[0], arg(1, "target"), unwrap(kw.get("ignore_index", -100)),
                unwrap(kw.get("reduction", "mean")),
                unwrap(kw.get("label_smoothing", 0.0)),
                unwrap(arg(2, "weight")), where)
        sdpa = getattr(F, "scaled_dot_product_attention", None)
        if sdpa is not None and fn is sdpa:
            return self.sdpa(a, kw, where)
        if fn is torch.rsqrt:
            return self.pseudo("rsqrt", [self.float_sym(a[0], where)], {},
                               value, where)
        if fn is torch.pow:
            return self.pow(a[0], a[1], value, where)
        if fn is torch.mean:
            return self.mean(a[0], arg(1, "dim"), arg(2, "keepdim", False),
                             value, where)
        if fn is torch.transpose:
            return self.transpose2(a[0], a[1], a[2], value, where)
        if fn is torch.permute:
            return self.permute(a[0], unwrap(a[1]), value, where)
        if fn in (torch.reshape,):
            return self.reshape(a[0], value, where)
        if fn is torch.flatten:
            return self.reshape(a[0], value, where)
        if fn is torch.cat:
            return self.cat(a[0], unwrap(arg(1, "dim", 0)), value, where)
        if fn is torch.split:
            return self.split(a[0], unwrap(a[1]), unwrap(arg(2, "dim", 0)),
                              value, where)
        if fn is torch.chunk:
            return self.split(a[0], None, unwrap(arg(2, "dim", 0)), value,
                              where)
        if fn is torch.repeat_interleave:
            return self.repeat_interleave(a[0], arg(1, "repeats"),
                                          arg(2, "dim"), value, where)
        if fn is torch.unsqueeze:
            return self.reshape(a[0], value, where)
        where.fail("unsupported torch operation %s" % where.op)

    def lower_method(self, name, args, kwargs, value, where):
        a = list(args)
        kw = dict(kwargs)
        x = a[0]

        def arg(i, key, default=None):
            if len(a) > i:
                return a[i]
            return kw.get(key, default)

        if name in ("view", "reshape", "flatten", "unsqueeze", "squeeze"):
            return self.reshape(x, value, where)
        if name == "contiguous":
            return x
        if name in ("transpose",):
            return self.transpose2(x, a[1], a[2], value, where)
        if name == "t":
            return self.transpose2(x, 0, 1, value, where)
        if name == "permute":
            dims = a[1:] if len(a) > 2 or not isinstance(
                unwrap(a[1]), (tuple, list)) else unwrap(a[1])
            return self.permute(x, list(unwrap(dims)), value, where)
        if name in ("float", "to", "type_as", "type"):
            return self.convert(x, value, where)
        if name in ("add", "sub", "mul", "div"):
            return self.arith(name, x, a[1], value, where)
        if name == "neg":
            return self.scale(self.float_sym(x, where), -1.0, where)
        if name == "split":
            return self.split(x, unwrap(a[1]), unwrap(arg(2, "dim", 0)),
                              value, where)
        if name == "chunk":
            return self.split(x, None, unwrap(arg(2, "dim", 0)), value, where)
        if name == "softmax":
            return self.softmax(x, unwrap(arg(1, "dim")),
                                unwrap(kw.get("dtype")), where)
        if name == "relu":
            return self.unary("relu", x, where)
        if name == "pow":
            return self.pow(x, a[1], value, where)
        if name == "mean":
            return self.mean(x, arg(1, "dim"), arg(2, "keepdim", False),
                             value, where)
        if name == "rsqrt":
            return self.pseudo("rsqrt", [self.float_sym(x, where)], {}, value,
                               where)
        if name == "masked_fill":
            mask, fill = a[1], unwrap(a[2])
            if is_sym(mask) or not isinstance(fill, (int, float)):
                where.fail("masked_fill with a mask computed from the inputs "
                           "has no equivalent")
            return self.pseudo("masked_fill", [self.float_sym(x, where)],
                               {"mask": mask.value, "fill": float(fill)},
                               value, where)
        if name == "expand":
            return self.pseudo("expand", [self.float_sym(x, where)], {},
                               value, where)
        if name == "repeat_interleave":
            return self.repeat_interleave(x, arg(1, "repeats"),
                                          arg(2, "dim"), value, where)
        where.fail("unsupported torch operation %s" % where.op)

    # -- building blocks -------------------------------------------------

    def pseudo(self, kind, operands, attrs, value, where):
        return self.emit(kind, operands, attrs, [value.shape], where)

    def unary(self, kind, x, where):
        x = self.float_sym(x, where)
        return self.emit(kind, [x], {}, [x.shape], where)

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

    def embedding(self, ids, w, value, where):
        if not is_sym(w) or w.param is None or len(w.shape) != 2:
            where.fail("an embedding whose table is not a 2-D parameter")
        if isinstance(ids, Const):
            # Positions 0..T-1 of a P-row table (a learned positional
            # embedding; nn.add broadcasts it): the whole table, or its
            # first of P / T equal parts.
            v, rows = ids.value, w.shape[0]
            t = v.numel() if torch.is_tensor(v) and v.dim() == 1 else 0
            if t and rows % t == 0 and torch.equal(
                    v.cpu(), torch.arange(t, dtype=v.dtype)):
                if t == rows:
                    return w
                op = self.g.emit("split", [w], {"axis": 0},
                                 [((t, w.shape[1]), "f32")] * (rows // t),
                                 where)
                return op.results[0]
            where.fail("an embedding of constant ids other than the "
                       "positions 0..T-1, T dividing the table's %d rows, "
                       "has no equivalent" % rows)
        ids = self.int_view(ids, where)
        return self.emit("embedding", [w, ids], {}, [value.shape], where)

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
        if len(shape) != 1 or shape[0] != x.shape[-1]:
            where.fail("layer norm over %s; nn.layer_norm normalizes the last "
                       "dimension only" % (list(shape),))
        if w is None or b is None or not is_sym(w) or not is_sym(b):
            where.fail("layer norm without weight and bias has no "
                       "equivalent")
        return self.emit("layer_norm", [x, w, b], {"eps": float(eps)},
                         [x.shape], where)

    def rms_norm(self, x, shape, w, eps, where):
        x = self.float_sym(x, where)
        shape = tuple(shape)
        if len(shape) != 1 or shape[0] != x.shape[-1]:
            where.fail("RMS norm over %s; nn.rms_norm normalizes the last "
                       "dimension only" % (list(shape),))
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
        return self.emit("concat", xs, {"axis": axis}, [value.shape], where)

    def split(self, x, size, dim, value, where):
        x = self.float_sym(x, where)
        axis = _norm_axis(dim, len(x.shape), where)
        shapes = [tuple(v.shape) for v in value]
        if len(set(shapes)) != 1:
            where.fail("split into unequal parts %s; nn.split makes equal "
                       "parts" % [s[axis] for s in shapes])
        if len(shapes) == 1:
            return (x,)
        return tuple(self.g.emit("split", [x], {"axis": axis},
                                 [(s, "f32") for s in shapes],
                                 where).results)

    def getitem(self, x, idx, value, where):
        if isinstance(x, (tuple, list)):
            return x[unwrap(idx)]
        x = self.float_sym(x, where)
        idx = unwrap(idx)
        if not isinstance(idx, tuple):
            idx = (idx,)
        # Only views: full slices, None (a new axis of 1), one slice of
        # one axis, ... .
        dims = len(x.shape)
        explicit = sum(1 for i in idx if i is not None and i is not Ellipsis)
        axis = 0
        sliced = []
        for i in idx:
            if i is Ellipsis:
                axis += dims - explicit
            elif i is None:
                continue
            elif isinstance(i, slice):
                start, stop, step = i.indices(x.shape[axis])
                if step != 1:
                    where.fail("a strided slice has no equivalent")
                if (start, stop) != (0, x.shape[axis]):
                    sliced.append((axis, start, stop))
                axis += 1
            else:
                where.fail("indexing with %r has no equivalent (slices and "
                           "None only)" % (i,))
        if not sliced:
            return self.reshape(x, value, where)
        if len(sliced) > 1 or any(i is None for i in idx):
            where.fail("a slice of several dimensions has no equivalent")
        ax, start, stop = sliced[0]
        return self.pseudo("slice", [x], {"axis": ax, "start": start,
                                          "stop": stop}, value, where)

    def pow(self, x, e, value, where):
        e = unwrap(e)
        if not is_sym(x) or e != 2:
            where.fail("pow with exponent %r has no equivalent (x ** 2 is "
                       "recognised inside an RMS norm)" % (e,))
        return self.pseudo("square", [self.float_sym(x, where)], {}, value,
                           where)

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
        if labels.op is not None:
            where.fail("labels must be an input of the step, not computed")
        return self.emit("softmax_cross_entropy", [logits, labels], {}, [()],
                         where)

    def sdpa(self, a, kw, where):
        q, k, v = (self.float_sym(t, where) for t in a[:3])
        mask = kw.get("attn_mask", a[3] if len(a) > 3 else None)
        p = unwrap(kw.get("dropout_p", a[4] if len(a) > 4 else 0.0))
        causal = unwrap(kw.get("is_causal", a[5] if len(a) > 5 else False))
        scale = unwrap(kw.get("scale", None))
        if mask is not None:
            where.fail("scaled_dot_product_attention with attn_mask (use "
                       "is_causal=True)")
        if p:
            where.fail("scaled_dot_product_attention with dropout_p = %g" % p)
        if kw.get("enable_gqa"):
            where.fail("scaled_dot_product_attention with enable_gqa")
        from .fuse import unrepeat
        k, v = unrepeat(self.g, k, v, q, where)
        return self.emit("attention", [q, k, v],
                         {"causal": bool(causal), "scale": scale},
                         [q.shape], where)


_IN_PLACE = (operator.iadd, operator.isub, operator.imul, operator.itruediv)


def _swaps_last_two(perm):
    n = len(perm)
    return n >= 2 and list(perm) == list(range(n - 2)) + [n - 1, n - 2]


def _arg_name(name):
    import re
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not re.match(r"[A-Za-z_]", s):
        s = "a" + s
    return s
