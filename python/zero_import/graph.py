"""The importer's IR: a list of ops on symbolic tensors, printed as MLIR.

Ops are `nn` ops (printed as such) or pseudo ops that the torch code used
but the dialect has no op for (a mean, an rsqrt, a product with a constant
table, a slice, ...). The fusion patterns (fuse.py) turn groups of pseudo
ops into one `nn` op; a pseudo op still live afterwards is an error at its
torch operation.
"""

import math

from .errors import ImportFailure

# nn ops a lowered model may contain, and their printers below.
NN_OPS = {"matmul", "add", "mul", "scale", "gelu", "gelu_erf", "silu",
          "relu", "softmax", "swiglu", "rope", "layer_norm", "rms_norm",
          "attention", "embedding", "reshape", "transpose", "split",
          "concat", "softmax_cross_entropy", "fill"}


class Where:
    """The torch operation an op came from, its module path, source line."""

    def __init__(self, op=None, path=None, source=None):
        self.op, self.path, self.source = op, path, source

    def fail(self, message):
        raise ImportFailure(message, op=self.op, path=self.path,
                            source=self.source)


class Sym:
    """A tensor of the step: a block argument, a parameter or an op result."""

    def __init__(self, shape, dtype, op=None, param=None, arg=None):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype  # 'f32', 'i32' or 'i64'
        self.op = op
        self.param = param
        self.arg = arg

    @property
    def is_float(self):
        return self.dtype == "f32"

    def type(self):
        return tensor_type(self.shape, self.dtype)


class Op:
    def __init__(self, kind, operands, attrs, where):
        self.kind = kind
        self.operands = list(operands)
        self.attrs = dict(attrs)
        self.where = where
        self.results = []


def tensor_type(shape, dtype):
    return "tensor<" + "".join("%dx" % d for d in shape) + dtype + ">"


def fmt_float(v):
    """A float literal MLIR parses back to the same double."""
    if not math.isfinite(v):
        raise ImportFailure("a non-finite constant (%r) in an attribute" % v)
    s = repr(float(v))
    if "e" in s and "." not in s.split("e")[0]:
        a, b = s.split("e")
        s = a + ".0e" + b
    return s


class Graph:
    def __init__(self):
        self.ops = []
        self.args = []  # block arguments (Syms), in order
        self.params = []  # (name, shape, init text), declaration order

    def emit(self, kind, operands, attrs, result_types, where):
        op = Op(kind, operands, attrs, where)
        for shape, dtype in result_types:
            op.results.append(Sym(shape, dtype, op=op))
        self.ops.append(op)
        return op

    def replace_uses(self, old, new):
        for op in self.ops:
            op.operands = [new if o is old else o for o in op.operands]

    def users(self, sym):
        return [op for op in self.ops if any(o is sym for o in op.operands)]

    def prune(self, roots):
        """Keeps the ops roots depend on, in order."""
        live = set()
        stack = [r for r in roots if r.op is not None]
        while stack:
            op = stack.pop().op
            if id(op) in live:
                continue
            live.add(id(op))
            stack.extend(o for o in op.operands if o.op is not None)
        self.ops = [op for op in self.ops if id(op) in live]


class Printer:
    def __init__(self, graph):
        self.graph = graph
        self.names = {}
        self.lines = []
        self.counter = 0

    def fresh(self, hint):
        name = "%%%s%d" % (hint, self.counter)
        self.counter += 1
        return name

    def use(self, sym):
        """The SSA name of an operand: a fresh zero.get_param per use, as a
        hand-written model reads a parameter where it needs it."""
        if sym.param is not None:
            name = self.fresh("p")
            self.lines.append("    %s = zero.get_param @%s : %s" % (
                name, symbol(sym.param), sym.type()))
            return name
        return self.names[id(sym)]

    def define(self, op, hint):
        names = [self.fresh(hint) for _ in op.results]
        for n, r in zip(names, op.results):
            self.names[id(r)] = n
        return ", ".join(names)

    def op(self, op):
        k, a = op.kind, op.attrs
        ops = [self.use(o) for o in op.operands]
        ty = [o.type() for o in op.operands]
        rt = [r.type() for r in op.results]
        res = self.define(op, {"softmax_cross_entropy": "loss", "layer_norm": "ln",
                              "rms_norm": "norm", "gelu_erf": "gelu",
                              "attention": "att"}.get(k, k))
        if k == "matmul":
            flags = "".join(" " + f for f in ("transpose_lhs", "transpose_rhs")
                            if a.get(f))
            line = "nn.matmul %s, %s%s : %s, %s -> %s" % (
                ops[0], ops[1], flags, ty[0], ty[1], rt[0])
        elif k in ("add", "mul"):
            line = "nn.%s %s, %s : %s, %s" % (k, ops[0], ops[1], ty[0], ty[1])
        elif k == "scale":
            line = "nn.scale %s by %s : %s" % (ops[0], fmt_float(a["factor"]),
                                               ty[0])
        elif k in ("gelu", "gelu_erf", "silu", "relu", "softmax"):
            line = "nn.%s %s : %s" % (k, ops[0], ty[0])
        elif k == "swiglu":
            line = "nn.swiglu %s, %s : %s" % (ops[0], ops[1], ty[0])
        elif k == "rope":
            line = "nn.rope %s theta %s : %s" % (ops[0], fmt_float(a["theta"]),
                                                 ty[0])
        elif k == "layer_norm":
            line = "nn.layer_norm %s, %s, %s eps %s : %s, %s, %s" % (
                ops[0], ops[1], ops[2], fmt_float(a["eps"]), ty[0], ty[1],
                ty[2])
        elif k == "rms_norm":
            line = "nn.rms_norm %s, %s eps %s : %s, %s" % (
                ops[0], ops[1], fmt_float(a["eps"]), ty[0], ty[1])
        elif k == "attention":
            line = "nn.attention %s, %s, %s%s" % (
                ops[0], ops[1], ops[2], " causal" if a.get("causal") else "")
            if a.get("scale") is not None:
                line += " scale " + fmt_float(a["scale"])
            line += " : " + ty[0]
            if ty[1] != ty[0]:
                line += ", " + ty[1]
        elif k == "embedding":
            line = "nn.embedding %s[%s] : %s, %s -> %s" % (
                ops[0], ops[1], ty[0], ty[1], rt[0])
        elif k == "reshape":
            line = "nn.reshape %s : %s -> %s" % (ops[0], ty[0], rt[0])
        elif k == "transpose":
            line = "nn.transpose %s [%s] : %s -> %s" % (
                ops[0], ", ".join(str(p) for p in a["permutation"]), ty[0],
                rt[0])
        elif k == "split":
            line = "nn.split %s axis %d : %s -> %s" % (
                ops[0], a["axis"], ty[0], ", ".join(rt))
        elif k == "concat":
            line = "nn.concat %s axis %d : %s -> %s" % (
                ", ".join(ops), a["axis"], ", ".join(ty), rt[0])
        elif k == "softmax_cross_entropy":
            line = "nn.softmax_cross_entropy %s, %s : %s, %s -> %s" % (
                ops[0], ops[1], ty[0], ty[1], rt[0])
        elif k == "fill":
            line = "nn.fill %s : %s" % (fmt_float(a["value"]), rt[0])
        else:
            op.where.fail("internal: no printer for '%s'" % k)
        self.lines.append("    %s = %s" % (res, line))


def symbol(name):
    """A symbol name, quoted unless it is a bare identifier."""
    import re
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$.]*", name):
        return name
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def print_module(graph, loss, optimizer, precision, clip, header):
    pr = Printer(graph)
    args = []
    for a in graph.args:
        name = "%" + a.arg
        pr.names[id(a)] = name
        args.append("%s: %s" % (name, a.type()))
    for op in graph.ops:
        pr.op(op)
    out = [header, "module {"]
    for name, shape, init in graph.params:
        out.append("  zero.param @%s : %s init %s" % (
            symbol(name), tensor_type(shape, "f32"), init))
    step = "  zero.train_step @train(%s) optimizer %s precision %s" % (
        ", ".join(args), optimizer, precision)
    if clip:
        step += " gradient_clipping " + fmt_float(clip)
    out.append(step + " {")
    out.extend(pr.lines)
    out.append("    zero.return %s : tensor<f32>" % pr.use(loss))
    out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"
