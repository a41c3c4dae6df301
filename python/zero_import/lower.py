"""Lowering of a traced fx graph onto the importer's IR (graph.py).

Every node whose operands do not depend on the step's inputs or parameters
is a constant: its value (computed while tracing) is folded, as
`torch.arange(T)`, a causal mask buffer or a rotary cos/sin table are.
Every other node becomes `nn` ops, or pseudo ops that fuse.py must turn
into `nn` ops, or an error naming the node's torch operation.

Which rule lowers a node is looked up in three tables (FUNCTIONS, METHODS,
MODULES, in lower_rules.py): the rules written there, and one per
PyTorch operation that an op of NNOps.td names in its `torchOps`, from the
generated table of ops (nn_ops.py).
"""

import operator
import re

import torch
import torch.nn as nn

from . import activations, moe, packed
from .fuse_attention import attention
from .fuse_rope import rope_freqs, rotary_tables, table_key
from .graph import Graph, Sym, Where
from .lower_blocks import INT_TYPES, Blocks, Const, any_sym, is_sym, unwrap
from .lower_rules import FUNCTIONS, METHODS, MODULES, Call, xielu_module

_FLOAT_TYPES = {torch.float32: "f32"}


def _lower_gpt_oss_rope(low, c):
    """nn.rope: gpt-oss rotates the halves x1, x2 of each head into x1 cos -
    x2 sin and x2 cos + x1 sin, Hugging Face's x * cos + rotate_half(x) *
    sin with its [.., d / 2] tables repeated (emb = cat(freqs, freqs))."""
    where = c.where
    x = low.float_sym(c.a[0], where)
    if is_sym(c.a[1]) or is_sym(c.a[2]):
        return packed.lower_halves_rope(low, x, c.a[1], c.a[2], where)
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
    window, segments = 0, None
    if mask is not None:
        window, segments = low.attention_mask(mask, q, False, where)
    attrs = {"causal": True}
    if scaling is not None and float(scaling) != 1.0 / (q.shape[-1] ** 0.5):
        attrs["scale"] = float(scaling)
    if window:
        attrs["window"] = window
    if len(k.shape) != 4 or q.shape[1] % k.shape[1] or \
            len(v.shape) != 4 or v.shape[:-1] != k.shape[:-1]:
        where.fail("attention with queries %s, keys %s and values %s" % (
            list(q.shape), list(k.shape), list(v.shape)))
    # fuse_attention.attention pads the narrower of the values' and the
    # keys' head dims (MiMo-V2-Flash's differ).
    o = attention(low.g, q, k, v, attrs, where, sinks=sinks,
                  segments=segments)
    b, h, t, d = o.shape
    return low.emit("transpose", [o], {"permutation": [0, 2, 1, 3]},
                    [(b, t, h, d)], where)


class Lowering(Blocks):
    def __init__(self, module, graph_fx, packed_rows=False):
        self.module = module
        self.fx = graph_fx
        # --packed: the rotary modules are calls of their own (packed.py).
        self.packed = packed_rows
        # The example's value of each input, by id of its Sym.
        self.input_values = {}
        # --packed: the nn.document_ids of the position_ids input, by id of
        # its Sym (every mask transformers builds finds them again).
        self.documents = {}
        self.g = Graph()
        self.env = {}
        # Parameters by identity: a tied parameter has one name, its first
        # in named_parameters() (which lists each parameter once).
        self.param_names = {}
        self.param_syms = {}
        # id(parameter): (read with gradients enabled, first read, it).
        self.param_reads = {}
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
        sym = self._param_sym(p, self.param_names.get(id(p)), "parameter",
                              not p.requires_grad, where)
        # Where it is read with gradients enabled (any read will do).
        grad = not getattr(self, "no_grad", False)
        first = self.param_reads.get(id(p), (False, where, p))
        self.param_reads[id(p)] = (first[0] or grad, first[1], p)
        return sym

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
            self.no_grad = bool(node.meta.get("zi_no_grad"))
            self.env[node] = self.lower(node, where)
            if self.no_grad:
                self.env[node] = self.detach_region(node, self.env[node],
                                                    where)
        self.no_grad = False
        # A parameter read only under torch.no_grad() has no gradient in
        # PyTorch, which leaves it alone; the step's optimizer would still
        # decay it.
        for grad, where, p in self.param_reads.values():
            if not grad and p.requires_grad:
                where.fail("parameter '%s' is only read with gradients "
                           "disabled (torch.no_grad() or inference mode "
                           "inside forward()): PyTorch would not train it; "
                           "freeze it (requires_grad_(False))" %
                           self.param_names.get(id(p)))
        return self.g

    def detach_region(self, node, value, where):
        """A value computed under torch.no_grad() that a node outside the
        region reads: nn.stop_gradient of it, as PyTorch gives it no
        gradient (inside the region, none flows either way)."""
        if not any(not u.meta.get("zi_no_grad") for u in node.users):
            return value

        def detach(v):
            if isinstance(v, (tuple, list)):
                return type(v)(detach(x) for x in v)
            return self.stop_gradient(v, where) if is_sym(v) else v
        return detach(value)

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
            if value.dtype in INT_TYPES:
                dtype = INT_TYPES[value.dtype]
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
            self.input_values[id(sym)] = value
            return sym
        if node.op == "get_attr":
            if isinstance(value, nn.Parameter):
                return self.param(value, where)
            return Const(value)
        args = self.lookup(node.args)
        kwargs = self.lookup(node.kwargs)
        mod = self.module.get_submodule(node.target) \
            if node.op == "call_module" else None
        if self.packed:
            packed.check_positions_use(self, node.op, node.target, mod, args,
                                       kwargs, where)
        if node.op == "call_module":
            return self.lower_module(mod, args, kwargs, value, where)
        if not any_sym(args) and not any_sym(kwargs):
            return Const(value)
        if packed.has_doc_mask((args, kwargs)) and \
                not _takes_doc_mask(node):
            return packed.lower_mask_use(self, node.op, node.target, args,
                                         kwargs, value, where)
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
            return xielu_module(self, Call(args, kwargs, value, where,
                                           module=mod))
        if moe.is_leaf(mod):
            where.op = type(mod).__name__
            lower = moe.lower_router if moe.is_router(mod) else \
                moe.lower_experts
            return lower(self, Call(args, kwargs, value, where, module=mod))
        if self.packed and packed.is_rotary(mod):
            where.op = type(mod).__name__
            return packed.lower_rotary(self, Call(args, kwargs, value, where,
                                                  module=mod))
        if packed.has_doc_mask((args, kwargs)):
            where.fail("--packed: the attention mask of the packed documents "
                       "is passed to module %s" % type(mod).__name__)
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
        if packed.is_document_ids(fn):
            return packed.lower_document_ids(self, Call(args, kwargs, value,
                                                        where))
        if packed.is_document_mask(fn):
            return packed.lower_document_mask(self, Call(args, kwargs, value,
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


_IN_PLACE = (operator.iadd, operator.isub, operator.imul, operator.itruediv)


def _takes_doc_mask(node):
    """Whether the call takes packed documents' mask as an attention's
    (their rules read the DocMask; packed.lower_mask_use the others)."""
    return node.op == "call_function" and (
        node.target is nn.functional.scaled_dot_product_attention or
        moe.is_sink_attention(node.target))


def _arg_name(name):
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not re.match(r"[A-Za-z_]", s):
        s = "a" + s
    return s
