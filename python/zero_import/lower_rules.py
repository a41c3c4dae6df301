"""The rules that lower one torch operation each (a function or operator, a
Tensor method by name, an nn.Module class) with the building blocks of
lower_blocks.py, in the tables that Lowering (lower.py) looks them up in."""

import math
import operator

import torch
import torch.nn as nn
import torch.nn.functional as F

from .lower_blocks import Const, is_sym, norm_axis, unwrap
from .nn_ops import OPS as NN_OPS


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


def _scaled_product(low, c, op, names, what, rank):
    """alpha * (arg 1 @ arg 2) of addmm or baddbmm (`op`), whose operands
    `names` must be rank-`rank` tensors computed from the inputs or
    parameters, and the call's beta, each checked to be a number."""
    where = c.where
    beta, alpha = unwrap(c.kw.get("beta", 1)), unwrap(c.kw.get("alpha", 1))
    for name, v in (("beta", beta), ("alpha", alpha)):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            where.fail("%s with %s=%r has no equivalent" % (op, name, v))
    a, b = c.arg(1, names[0]), c.arg(2, names[1])
    if not is_sym(a) or not is_sym(b) or len(a.shape) != rank or \
            len(b.shape) != rank:
        where.fail("%s of %s that are not %d-D tensors computed from the "
                   "inputs or parameters" % (op, what, rank))
    y = low.matmul(a, b, c.value, where)
    if alpha != 1:
        y = low.scale(y, alpha, where)
    return y, beta


@_rule(FUNCTIONS, torch.addmm)
def _addmm(low, c):
    """beta * input + alpha * (mat1 @ mat2), as GPT-2's Conv1D computes
    x @ W + b with W [in, out]."""
    where = c.where
    y, beta = _scaled_product(low, c, "addmm", ("mat1", "mat2"),
                              "operands", 2)
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
    y, beta = _scaled_product(low, c, "baddbmm", ("batch1", "batch2"),
                              "batches", 3)
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
    recognises before an attention's softmax; with a mask computed in the
    step (a float mask, as the step holds booleans), nn.where."""
    if len(c.a) != 3 or c.kw:
        c.where.fail("torch.where other than where(mask, x, fill) has no "
                     "equivalent")
    mask, x, fill = c.a
    if is_sym(mask):
        return low.where(mask, x, fill, c.value, c.where)
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
    """x.mean() of every element (a per-sequence loss's mean over the
    batch, as TRL's GRPO loss takes it) is x.sum() (its arguments are
    mean's) scaled by 1 / numel; a mean over the last dimension is an RMS
    norm's (lower_blocks)."""
    x, dim = c.a[0], unwrap(c.arg(1, "dim"))
    if is_sym(x) and dim is None and unwrap(c.kw.get("dtype")) is None:
        n = math.prod(x.shape)
        return low.scale(_sum(low, c), 1.0 / n, c.where)
    return low.mean(x, c.arg(1, "dim"), c.arg(2, "keepdim", False),
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
    if dim is None and len(x.shape) >= 1 and dtype in (None, torch.float32):
        # Every element: each row's sum (x @ ones), then the rows' by
        # nn.reduce_sum, so that dimension 0, the batch a rank divides,
        # stays outermost (a vector's, per-sequence losses' x.sum(), too).
        rows = x
        if len(x.shape) >= 2:
            n = math.prod(x.shape[1:])
            if len(x.shape) > 2:
                x = low.emit("reshape", [x], {}, [(x.shape[0], n)], where)
            rows = x if n == 1 else \
                low.emit("matmul", [x, low.fill(1.0, (1, n), where)],
                         {"transpose_rhs": True}, [(x.shape[0], 1)], where)
        return low.emit("reduce_sum", [rows], {}, [tuple(c.value.shape)],
                        where)
    if isinstance(dim, (tuple, list)) or dim is None or \
            norm_axis(dim, len(x.shape), where) != len(x.shape) - 1:
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
    # Integer ids expanded to their own shape are themselves (transformers
    # expands position_ids to the batch they have).
    if is_sym(c.x) and not c.x.is_float and \
            tuple(c.value.shape) == c.x.shape:
        return c.x
    return low.pseudo("expand", [low.float_sym(c.x, c.where)], {}, c.value,
                      c.where)


@_rule(FUNCTIONS, torch.max, torch.maximum)
def _max_lowest(low, c):
    """torch.max(x, lowest), lowest one constant, float32's least finite
    value (XGLM's clamp after adding its mask): x wherever x is finite,
    which fuse.py recognises between an attention's mask and softmax; of
    two tensors computed from the inputs or parameters, nn.maximum."""
    if _two_tensors(c):
        return _min_max(low, c, "maximum")
    lowest = unwrap(c.a[1]) if len(c.a) == 2 and not c.kw else None
    if not is_sym(c.x) or not torch.is_tensor(lowest) or \
            lowest.numel() != 1 or \
            float(lowest) != torch.finfo(torch.float32).min:
        c.where.fail("%s other than the clamp max(x, torch.finfo(float32)."
                     "min) before an attention's softmax has no equivalent"
                     % c.where.op)
    return low.pseudo("clamp_lowest", [low.float_sym(c.x, c.where)], {},
                      c.value, c.where)


# A policy-gradient loss's operations (GRPO as TRL writes it): clamp,
# minimum and maximum, where with a computed mask, detach, gather along the
# last dimension.

def _two_tensors(c):
    return len(c.a) == 2 and not c.kw and is_sym(c.a[0]) and is_sym(c.a[1])


def _min_max(low, c, kind):
    """nn.minimum or nn.maximum of two tensors, each expanded to the
    result's shape first (nn.minimum does not broadcast)."""
    other = c.arg(1, "other")
    if len(c.a) + len(c.kw) != 2 or not is_sym(c.x) or not is_sym(other):
        c.where.fail("%s other than of two tensors computed from the inputs "
                     "or parameters has no equivalent" % c.where.op)
    out = tuple(c.value.shape)
    a = low.expand_to(low.float_sym(c.x, c.where), out, c.where)
    b = low.expand_to(low.float_sym(other, c.where), out, c.where)
    return low.emit(kind, [a, b], {}, [out], c.where)


@_rule(FUNCTIONS, torch.min, torch.minimum)
@_rule(METHODS, "min", "minimum")
def _minimum(low, c):
    if not _two_tensors(c) and not (len(c.a) == 1 and "other" in c.kw):
        c.where.fail("%s other than torch.minimum of two tensors (a "
                     "reduction, or with a number) has no equivalent"
                     % c.where.op)
    return _min_max(low, c, "minimum")


@_rule(METHODS, "max", "maximum")
def _maximum(low, c):
    if not _two_tensors(c) and not (len(c.a) == 1 and "other" in c.kw):
        c.where.fail("%s other than torch.maximum of two tensors (a "
                     "reduction, or with a number) has no equivalent"
                     % c.where.op)
    return _min_max(low, c, "maximum")


def _bound(v, name, where):
    """A clamp bound: None, or a number (a 0-d constant tensor's value)."""
    v = unwrap(v)
    if torch.is_tensor(v) and v.dim() == 0:
        v = v.item()
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        where.fail("%s with a %s bound that is not a number (a tensor of "
                   "bounds) has no equivalent" % (where.op, name))
    return float(v)


@_rule(FUNCTIONS, torch.clamp, torch.clip)
@_rule(METHODS, "clamp", "clip")
def _clamp(low, c):
    return low.clamp(c.x, _bound(c.arg(1, "min"), "min", c.where),
                     _bound(c.arg(2, "max"), "max", c.where), c.where)


@_rule(FUNCTIONS, getattr(torch, "clamp_min", None))
@_rule(METHODS, "clamp_min")
def _clamp_min(low, c):
    return low.clamp(c.x, _bound(c.arg(1, "min"), "min", c.where), None,
                     c.where)


@_rule(FUNCTIONS, getattr(torch, "clamp_max", None))
@_rule(METHODS, "clamp_max")
def _clamp_max(low, c):
    return low.clamp(c.x, None, _bound(c.arg(1, "max"), "max", c.where),
                     c.where)


@_rule(FUNCTIONS, torch.detach)
@_rule(METHODS, "detach")
def _detach(low, c):
    """x.detach(): nn.stop_gradient (integer ids have no gradient anyway)."""
    return low.stop_gradient(c.x, c.where)


@_rule(METHODS, "bool")
def _bool(low, c):
    """A float tensor as a boolean one: the step's booleans are float masks
    of 1 and 0 (nn.where's condition), so x.bool() is where(x, 1, 0)."""
    x = low.float_sym(c.x, c.where)
    ones, zeros = (low.fill(v, x.shape, c.where) for v in (1.0, 0.0))
    return low.emit("where", [x, ones, zeros], {}, [x.shape], c.where)


@_rule(FUNCTIONS, torch.gather)
@_rule(METHODS, "gather")
def _gather(low, c):
    if unwrap(c.kw.get("sparse_grad", False)):
        c.where.fail("gather with sparse_grad has no equivalent")
    return low.gather(c.x, unwrap(c.arg(1, "dim")), c.arg(2, "index"),
                      c.value, c.where)


@_rule(FUNCTIONS, torch.take_along_dim)
@_rule(METHODS, "take_along_dim")
def _take_along_dim(low, c):
    dim = unwrap(c.arg(2, "dim"))
    if dim is None:
        c.where.fail("take_along_dim without dim (of the flattened tensor) "
                     "has no equivalent")
    return low.gather(c.x, dim, c.arg(1, "indices"), c.value, c.where)


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


def xielu_module(low, c):
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
            norm_axis(dim, len(x.shape), where) != len(x.shape) - 1:
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
