"""The importer's IR: a list of ops on symbolic tensors (printed as MLIR by
printer.py).

Ops are `nn` ops or pseudo ops that the torch code used but the dialect has
no op for (a mean, an rsqrt, a product with a constant table, a slice,
...). The fusion patterns (fuse.py) turn groups of pseudo ops into one `nn`
op; a pseudo op still live afterwards is an error at its torch operation.
"""

from .errors import ImportFailure
from .printer import tensor_type


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
        self.dtype = dtype  # 'f32', 'i32' or 'i64'; 'bf16' or 'f16' in a
        # step written in mixed precision (precision.py)
        self.op = op
        self.param = param
        self.arg = arg

    @property
    def is_float(self):
        return self.dtype in ("f32", "bf16", "f16")

    def type(self):
        return tensor_type(self.shape, self.dtype)


class Op:
    # An operand None: an optional operand absent before a present one
    # (attention's sinks beside its segments), as the printer takes it.
    def __init__(self, kind, operands, attrs, where):
        self.kind = kind
        self.operands = list(operands)
        self.attrs = dict(attrs)
        self.where = where
        self.results = []


class Graph:
    def __init__(self):
        self.ops = []
        self.args = []  # block arguments (Syms), in order
        self.params = []  # (name, shape, init text), declaration order
        self.compute = {}  # parameter name -> the dtype it computes in
        self.frozen = set()  # names of the parameters that do not train
        # Why the parameters without a compute type stay float32, for the
        # summary (precision.keep_in_fp32).
        self.fp32_reasons = []
        # (config.json text, {tied name: parameter}, {buffer: float32
        # tensor}, {unused tensor: parameter}) of a Hugging Face model,
        # which the module's zero.hf_model records; None otherwise.
        self.hf_model = None
        # (adapter config text, prefix, [layer]) of a PEFT LoRA model,
        # which the module's zero.peft records (lora.py); None otherwise.
        self.peft = None

    def rename_params(self, names):
        """Each parameter `old` in `names` renamed names[old], wherever the
        step names it (the declarations, the reads, the tied names of
        #zero.hf_model and the layers of #zero.peft)."""
        if not names:
            return

        def new(name):
            return names.get(name, name)
        self.params = [(new(n), shape, init) for n, shape, init in self.params]
        self.compute = {new(n): t for n, t in self.compute.items()}
        self.frozen = {new(n) for n in self.frozen}
        for op in self.ops:
            for sym in op.operands:
                if sym is not None and sym.param is not None:
                    sym.param = new(sym.param)
        if self.hf_model is not None:
            config, tied, buffers, unused = self.hf_model
            self.hf_model = (config, {new(a): new(p) for a, p in
                                      tied.items()}, buffers, unused)
        if self.peft is not None:
            config, prefix, layers = self.peft
            for layer in layers:
                for k in ("base", "a", "b"):
                    layer[k] = new(layer[k])
                layer["merged_key"] = layer["base"][len(prefix):].replace(
                    ".base_layer.", ".")

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
            stack.extend(o for o in op.operands
                         if o is not None and o.op is not None)
        self.ops = [op for op in self.ops if id(op) in live]
