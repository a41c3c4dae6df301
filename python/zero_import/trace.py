"""torch.fx tracing with concrete values beside the symbolic ones.

The example arguments fix every shape, so each traced node is also run on
real tensors: sizes, dtypes and devices read during tracing are plain
Python values (a model may compute with them, assert on them, build
`torch.arange(T)` from them), and the importer knows every node's result.
Control flow on tensor *values* stays an error, as in torch.fx.

torch.fx with concrete values rather than torch.export: the importer maps
torch-level calls (functions, Tensor methods, nn modules) one to one onto
`nn` ops and keeps each call's module path and source line for its errors;
torch.export would hand it ATen ops after decomposition, and every pattern
(RMS norm, rotary embedding, attention, SwiGLU) would have to be found
again in decomposed form. Python control flow on sizes, which export
specialises, is already plain Python here. Tested with the torch that
scripts/requirements.txt pins.

A model whose parameters are on PyTorch's meta device (as `--hf` traces)
is traced without materialising anything: a node reading a meta tensor
runs on the meta device (shapes only), every other node, a constant such
as a rotary table or a mask, runs on the CPU, so the patterns that read
constants' values still see them; a meta tensor's device reads as the CPU.
"""

import contextlib
import functools
import linecache
import operator
import os
import sys
import traceback

import torch
import torch.fx as fx

from . import activations, moe, packed
from .errors import ImportFailure

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))


@functools.lru_cache(maxsize=None)
def _is_user_frame(filename):
    f = os.path.abspath(filename)
    return not (f.startswith(_PACKAGE_DIR) or f.startswith(_TORCH_DIR)
                or "<" in filename)


def _source_text(filename, lineno, code):
    return "%s:%d%s" % (filename, lineno, ": " + code if code else "")


def caller_source():
    """user_source of the current stack, reading one source line."""
    f = sys._getframe(1)
    while f is not None:
        name = f.f_code.co_filename
        if _is_user_frame(name):
            return _source_text(name, f.f_lineno,
                                linecache.getline(name, f.f_lineno).strip())
        f = f.f_back
    return None


def _source_outside(skipped):
    """caller_source, also skipping the frames of file `skipped`."""
    f = sys._getframe(1)
    while f is not None:
        name = f.f_code.co_filename
        if _is_user_frame(name) and name != skipped:
            return _source_text(name, f.f_lineno,
                                linecache.getline(name, f.f_lineno).strip())
        f = f.f_back
    return None


def user_source(frames):
    """'file:line: code' of the innermost frame outside torch and us."""
    for fr in reversed(frames):
        if _is_user_frame(fr.filename):
            return _source_text(fr.filename, fr.lineno,
                                (fr.line or "").strip())
    return None


def op_name(kind, target):
    """How a node's operation reads in messages: torch.rsqrt, Tensor.view,
    nn.Conv2d, operator.truediv."""
    if kind == "call_function":
        mod = getattr(target, "__module__", None) or ""
        name = getattr(target, "__name__", str(target))
        if mod.startswith("torch.nn.functional"):
            return "torch.nn.functional." + name
        if mod in ("_operator", "operator"):
            return "operator." + name
        if mod.startswith("torch") or mod == "":
            return "torch." + name
        return mod + "." + name
    if kind == "call_method":
        return "Tensor." + target
    return str(target)


_OUT_OF_PLACE = {operator.iadd: operator.add, operator.isub: operator.sub,
                 operator.imul: operator.mul,
                 operator.itruediv: operator.truediv}


class ConcreteProxy(fx.Proxy):
    """A Proxy whose shape, dtype and device are those of its value."""

    @property
    def concrete(self):
        return self.node.meta["zi_value"]

    def size(self, dim=None):
        v = self.concrete
        return v.size() if dim is None else v.size(dim)

    @property
    def shape(self):
        return self.concrete.shape

    @property
    def dtype(self):
        return self.concrete.dtype

    @property
    def device(self):
        d = self.concrete.device
        return torch.device("cpu") if d.type == "meta" else d

    @property
    def ndim(self):
        return self.concrete.dim()

    def dim(self):
        return self.concrete.dim()

    def numel(self):
        return self.concrete.numel()

    def __len__(self):
        return len(self.concrete)

    def __iter__(self):
        v = self.concrete
        if isinstance(v, (tuple, list)) or torch.is_tensor(v):
            return iter([self[i] for i in range(len(v))])
        return super().__iter__()

    # x += y on a proxy would silently become x = x + y; as a node of its
    # own, the lowering can check that no alias of x is read afterwards.
    def _in_place(self, fn, other):
        return self.tracer.create_proxy("call_function", fn, (self, other),
                                        {})

    def __iadd__(self, other):
        return self._in_place(operator.iadd, other)

    def __isub__(self, other):
        return self._in_place(operator.isub, other)

    def __imul__(self, other):
        return self._in_place(operator.imul, other)

    def __itruediv__(self, other):
        return self._in_place(operator.itruediv, other)

    # An attribute read (w.T) is a node whose value the concrete run of
    # its user reads, as every other node's; fx's own Attribute has none,
    # and a user run with it would trace itself.
    def __getattr__(self, k):
        return ConcreteAttribute(self, k)

    def __bool__(self):
        raise ImportFailure(
            "control flow depends on a tensor's values (bool() of a traced "
            "tensor); only shapes are known when the step is compiled",
            path=self.node.meta.get("zi_path"),
            source=self.node.meta.get("zi_source"))


class ConcreteAttribute(fx.proxy.Attribute, ConcreteProxy):
    """x.<attr>: a call of method <attr> where it is called (fx.proxy.
    Attribute), else a getattr node with its value."""


def resolve_attr(root, target):
    """root.<target>, looked up in the module dictionaries themselves:
    Module.__getattr__ is patched while tracing (a parameter read makes a
    node)."""
    v = root
    for part in target.split("."):
        for d in ("_modules", "_parameters", "_buffers"):
            table = v.__dict__.get(d, {})
            if part in table:
                v = table[part]
                break
        else:
            v = v.__dict__[part]
    return v


def _concrete(x):
    return fx.node.map_aggregate(
        x, lambda a: a.concrete if isinstance(a, ConcreteProxy) else a)


def _leaves(x):
    out = []
    fx.node.map_aggregate(x, out.append)
    return out


def _on_meta(x):
    """x with its tensors and CPU devices on the meta device."""
    def move(a):
        if torch.is_tensor(a) and not a.is_meta:
            return a.to("meta")
        if isinstance(a, torch.device) and a.type == "cpu":
            return torch.device("meta")
        return a
    return fx.node.map_aggregate(x, move)


def _off_meta(x):
    """x with the meta device (a meta tensor's .device) as the CPU."""
    def move(a):
        if isinstance(a, torch.device) and a.type == "meta":
            return torch.device("cpu")
        return a
    return fx.node.map_aggregate(x, move)


def _reads_meta(args, kwargs, module=None):
    tensors = [a for a in _leaves((args, kwargs)) if torch.is_tensor(a)]
    if module is not None:
        tensors += list(module.parameters()) + list(module.buffers())
    return any(t.is_meta for t in tensors)


class ConcreteTracer(fx.Tracer):
    def __init__(self, example_args, packed_rows=False):
        super().__init__()
        self.example_args = list(example_args)
        # --packed: the rotary modules are one call each (packed.py).
        self.packed = packed_rows
        self.placeholders = 0
        self.path_stack = []
        self.concrete_mode = False
        self.failed_path = None
        self.param_names = None

    def proxy(self, node):
        return ConcreteProxy(node, self)

    @staticmethod
    def caller_source():
        """The user's source line of the call being traced (packed.py's
        messages)."""
        return caller_source()

    # While a node's value is computed, modules run as plain PyTorch.
    def getattr(self, attr, attr_val, parameter_proxy_cache):
        if self.concrete_mode:
            return attr_val
        # A parameter's get_attr node, as fx makes it, found by identity in
        # a table made once (fx searches every parameter on each read).
        if isinstance(attr_val, torch.nn.Parameter):
            if self.param_names is None:
                self.param_names = {
                    id(p): n for n, p in self.root.named_parameters()}
            name = self.param_names.get(id(attr_val))
            if name is not None:
                if name not in parameter_proxy_cache:
                    parameter_proxy_cache[name] = self.create_proxy(
                        "get_attr", name, (), {})
                return parameter_proxy_cache[name]
        return super().getattr(attr, attr_val, parameter_proxy_cache)

    def is_leaf_module(self, m, module_qualified_name):
        return (moe.is_leaf(m) or activations.is_leaf(m)
                or (self.packed and packed.is_rotary(m))
                or super().is_leaf_module(m, module_qualified_name))

    def call_module(self, m, forward, args, kwargs):
        if self.concrete_mode:
            return forward(*args, **kwargs)
        try:
            path = self.path_of_module(m)
        except NameError:
            return self._call_unowned(m, forward, args, kwargs)
        self.path_stack.append(path)
        try:
            out = super().call_module(m, forward, args, kwargs)
            if moe.is_leaf(m):
                # A leaf's forward does not run, so neither do its forward
                # hooks: transformers records the routers' logits by one
                # (output_router_logits), on the traced output here, a
                # tuple as the forward returns it.
                if isinstance(out.concrete, tuple):
                    out = tuple(out[i] for i in range(len(out.concrete)))
                for hook in list(m._forward_hooks.values()):
                    result = hook(m, args, out)
                    if result is not None:
                        out = result
            return out
        except Exception:
            if self.failed_path is None:  # the innermost module
                self.failed_path = self.path_stack[-1]
            raise
        finally:
            self.path_stack.pop()

    def _call_unowned(self, m, forward, args, kwargs):
        """A module that is not one of the root's, built inside forward()
        (`nn.Softmax(dim=-1)(x)`, `CrossEntropyLoss()(logits, labels)`,
        `ACT2FN[name](x)`): traced through, its operations those of the
        module that built it. One with parameters that are not the root's
        is refused: PyTorch would make them afresh on each call and never
        train them (one that reuses the root's layers, as BigBird's
        attention rebuilt for another attention type, is traced)."""
        own = {id(p) for p in self.root.parameters()}
        if any(id(p) not in own for p in m.parameters()):
            cls = type(m)
            prefix = "nn." if cls.__module__.startswith("torch.nn") else ""
            raise ImportFailure(
                "a module with parameters of its own built inside "
                "forward() (not a submodule: its parameters are new on "
                "every call)",
                op=prefix + cls.__name__,
                path=self.path_stack[-1] if self.path_stack else "",
                source=caller_source())
        return forward(*args, **kwargs)

    def create_proxy(self, kind, target, args, kwargs, name=None,
                     type_expr=None, proxy_factory_fn=None):
        p = super().create_proxy(kind, target, args, kwargs, name, type_expr,
                                 proxy_factory_fn)
        node = p.node
        node.meta["zi_path"] = self.path_stack[-1] if self.path_stack else ""
        node.meta["zi_source"] = caller_source()
        if kind == "call_module":
            cls = type(self.root.get_submodule(target))
            prefix = "nn." if cls.__module__.startswith("torch.nn") else ""
            node.meta["zi_op"] = prefix + cls.__name__
        elif kind in ("call_function", "call_method"):
            node.meta["zi_op"] = op_name(kind, target)
        else:
            node.meta["zi_op"] = None
        if kind == "output":
            return p
        if not torch.is_grad_enabled() and kind != "placeholder":
            # torch.no_grad() (or inference mode) inside forward(): the
            # lowering detaches what the region computes (zi_no_grad).
            node.meta["zi_no_grad"] = True
        cargs, ckwargs = _concrete(args), _concrete(kwargs)
        try:
            self.concrete_mode = True
            with torch.no_grad():
                node.meta["zi_value"] = self._run(node, kind, target, cargs,
                                                  ckwargs)
        except ImportFailure:
            raise
        except Exception as e:  # the user's op failed on the example
            raise ImportFailure(
                "%s failed on the example arguments: %s" % (
                    node.meta["zi_op"], e), op=node.meta["zi_op"],
                path=node.meta["zi_path"], source=node.meta["zi_source"])
        finally:
            self.concrete_mode = False
        return p

    def _run(self, node, kind, target, args, kwargs):
        if kind == "placeholder":
            i = self.placeholders
            self.placeholders += 1
            node.meta["zi_input"] = i
            if i < len(self.example_args):
                return self.example_args[i]
            if args:
                return args[0]  # the parameter's default
            raise ImportFailure(
                "forward() has more parameters than make() gave example "
                "arguments (%d), and '%s' has no default" % (
                    len(self.example_args), target))
        if kind == "get_attr":
            return resolve_attr(self.root, target)
        module = self.root.get_submodule(target) if kind == "call_module" \
            else None
        if module is not None and self.packed and packed.is_rotary(module):
            # cos and sin on the CPU, which the lowering checks.
            return packed.rotary_value(module, args, kwargs)
        # Shapes only where a meta tensor is read; constants on the CPU.
        move = _on_meta if _reads_meta(args, kwargs, module) else _off_meta
        args, kwargs = move(args), move(kwargs)
        if kind == "call_function":
            # x += y is x + y here: the traced values are not the module's
            # to change.
            return _OUT_OF_PLACE.get(target, target)(*args, **kwargs)
        if kind == "call_method":
            return getattr(args[0], target)(*args[1:], **kwargs)
        if kind == "call_module":
            if moe.is_leaf(module):
                # Without its hooks, which the traced call runs
                # (call_module).
                value = moe.leaf_value(module, args, kwargs)
                return module.forward(*args, **kwargs) if value is None \
                    else value
            return module(*args, **kwargs)
        raise ImportFailure("unexpected fx node kind '%s'" % kind)


def _transformers_models(module):
    """The transformers models (PreTrainedModel) inside `module`, itself
    included; none unless transformers is already imported (a module built
    from one imported it)."""
    tf = sys.modules.get("transformers")
    base = getattr(tf, "PreTrainedModel", None) if tf else None
    if base is None:
        return []
    return [m for m in module.modules() if isinstance(m, base)]


@contextlib.contextmanager
def _no_kv_cache(module, tracer):
    """transformers' KV cache off while `module` is traced: each of its
    models' configs says use_cache=False (transformers builds a cache in
    training too when it is on, the default), restored afterwards; a cache
    the step builds or updates anyway (use_cache=True or past_key_values
    passed explicitly) is refused where it appears: the step is one
    forward over whole sequences, a cache would only feed generation."""
    configs = {}
    for m in _transformers_models(module):
        cfg = getattr(m, "config", None)
        for c in (cfg, getattr(cfg, "get_text_config", lambda: None)()):
            if c is not None and id(c) not in configs and \
                    getattr(c, "use_cache", None) is not None:
                configs[id(c)] = (c, c.use_cache)
    cache_utils = sys.modules.get("transformers.cache_utils")
    cache = getattr(cache_utils, "Cache", None)
    saved = {}

    def refuse(name):
        def refused(self, *args, **kwargs):
            op = "%s.%s.%s" % (type(self).__module__, type(self).__name__,
                               name)
            raise ImportFailure(
                "a KV cache (transformers' %s) is used while tracing: the "
                "training step has none; call the model without "
                "use_cache=True or past_key_values" % type(self).__name__,
                op=op, path=tracer.path_stack[-1] if tracer.path_stack
                else "", source=_source_outside(cache_utils.__file__))
        return refused

    try:
        for c, _ in configs.values():
            c.use_cache = False
        for name in ("__init__", "update"):
            if cache is not None and name in cache.__dict__:
                saved[name] = cache.__dict__[name]
                setattr(cache, name, refuse(name))
        yield
    finally:
        for name, fn in saved.items():
            setattr(cache, name, fn)
        for c, value in configs.values():
            c.use_cache = value


# torch.autograd.Functions of transformers traced as the torch function
# they compute (their forward runs with gradients disabled, which the
# tracer refuses): (module, class, function). BLOOM's GeLUFunction is the
# tanh GELU forward with that GELU's exact derivative as its backward.
_KNOWN_FUNCTIONS = (
    ("transformers.models.bloom.modeling_bloom", "GeLUFunction",
     lambda x: torch.nn.functional.gelu(x, approximate="tanh")),
)


@contextlib.contextmanager
def _known_functions():
    """Each of _KNOWN_FUNCTIONS whose module is imported applies as its
    function while tracing; restored afterwards."""
    saved = []
    try:
        for module, name, fn in _KNOWN_FUNCTIONS:
            cls = getattr(sys.modules.get(module), name, None)
            if cls is None:
                continue
            saved.append((cls, cls.__dict__.get("apply")))
            cls.apply = staticmethod(fn)
        yield
    finally:
        for cls, apply in saved:
            if apply is None:
                del cls.apply
            else:
                cls.apply = apply


@contextlib.contextmanager
def _moe_aux_calls(tracer):
    """Each MoE family's load_balancing_loss_func, called on traced router
    logits, is one call of the trace (moe.lower_aux lowers it), and so are
    the eager attentions with sinks and gpt-oss's rotary embedding
    (moe.attention_calls); restored afterwards."""
    saved = []

    def traced(fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            if any(isinstance(a, fx.Proxy) for a in _leaves((args, kwargs))):
                return tracer.create_proxy("call_function", fn, args, kwargs)
            return fn(*args, **kwargs)
        return call

    def is_traced(x):
        return any(isinstance(a, fx.Proxy) for a in _leaves(x))

    try:
        for mod, fn in moe.aux_functions():
            saved.append((mod, "load_balancing_loss_func", fn))
            mod.load_balancing_loss_func = traced(fn)
        # Attentions with sinks, one call too.
        for mod, name, fn, call in moe.attention_calls(tracer, is_traced):
            saved.append((mod, name, fn))
            setattr(mod, name, call)
        yield
    finally:
        for mod, name, fn in saved:
            setattr(mod, name, fn)


# Calls that make an uninitialized tensor, which the model then fills.
_EMPTY = (("call_method", "new_empty"), ("call_function", torch.empty_like))


def _fail_at(node, message):
    raise ImportFailure(message, op=node.meta.get("zi_op"),
                        path=node.meta.get("zi_path"),
                        source=node.meta.get("zi_source"))


def _written_slice(buf, idx):
    """(axis, start, stop) of buf[idx], a slice of step 1 along one axis
    (None: the whole tensor), or a string saying why it is not."""
    shape = buf.meta["zi_value"].shape
    idx = idx if isinstance(idx, tuple) else (idx,)
    if sum(1 for i in idx if i is Ellipsis) > 1 or \
            any(not isinstance(i, slice) and i is not Ellipsis for i in idx):
        return "indexed by %r (only slices)" % (idx,)
    explicit = sum(1 for i in idx if i is not Ellipsis)
    if explicit > len(shape):
        return "indexed by %r, more indices than its rank" % (idx,)
    found, axis = None, 0
    for i in idx:
        if i is Ellipsis:
            axis += len(shape) - explicit
            continue
        if any(isinstance(b, fx.Node) for b in (i.start, i.stop, i.step)):
            return "sliced at bounds computed from tensors"
        start, stop, step = i.indices(shape[axis])
        if step != 1:
            return "sliced with step %d" % step
        if (start, stop) != (0, shape[axis]):
            if found is not None:
                return "sliced along two axes"
            found = (axis, start, max(start, stop))
        axis += 1
    return found


def _filled_buffers(graph):
    """A tensor made empty (Tensor.new_empty, torch.empty_like) and written
    by copy_ into slices of one axis that cover it once, before anything
    reads it, is the concatenation of what was copied (MiniCPM3's and
    DeepSeek's keys: the part without a rotary embedding beside the rotated
    one); its reads read that torch.cat instead. One written otherwise
    (in part, twice, through a strided view, read between its copies) is
    refused at a copy; one no copy_ writes stays as it is (and is refused
    as an unsupported operation)."""
    for buf in list(graph.nodes):
        if (buf.op, buf.target) not in _EMPTY:
            continue
        order = {n: i for i, n in enumerate(graph.nodes)}
        writes, reads = [], []
        for u in buf.users:
            copy = next(iter(u.users)) if len(u.users) == 1 else None
            if u.op == "call_function" and u.target is operator.getitem \
                    and u.args[0] is buf and copy is not None and \
                    copy.op == "call_method" and copy.target == "copy_" and \
                    copy.args[0] is u and len(copy.args) > 1:
                writes.append((u, copy))
            else:
                reads.append(u)
        if not writes:
            continue
        shape = tuple(buf.meta["zi_value"].shape)
        what = "a tensor from %s of shape %s" % (buf.meta.get("zi_op"),
                                                 list(shape))
        parts = []
        for view, copy in writes:
            where = _written_slice(buf, view.args[1])
            if isinstance(where, str):
                _fail_at(copy, "%s written by copy_ into a view %s; only "
                         "copies into slices of one axis are a "
                         "concatenation" % (what, where))
            if copy.users or any(order[r] < order[copy] for r in reads):
                _fail_at(copy, "%s read before copy_ has written all of it"
                         % what)
            parts.append((where, view, copy))
        axes = {w[0] for w, _, _ in parts if w is not None}
        whole = [p for p in parts if p[0] is None]
        if whole and len(parts) > 1 or len(axes) > 1:
            _fail_at(parts[-1][2], "%s written by copy_ into overlapping "
                     "slices or slices of several axes" % what)
        axis = axes.pop() if axes else 0
        if not whole:
            parts.sort(key=lambda p: p[0][1])
            at = 0
            for (_, start, stop), _, copy in parts:
                if start > at:
                    _fail_at(copy, "%s written by copy_ only in part: "
                             "elements %d..%d of axis %d are never written"
                             % (what, at, start - 1, axis))
                if start < at:
                    _fail_at(copy, "%s written twice by copy_: elements "
                             "%d..%d of axis %d" % (what, start, at - 1,
                                                    axis))
                at = stop
            if at != shape[axis]:
                _fail_at(parts[-1][2], "%s written by copy_ only in part: "
                         "elements %d..%d of axis %d are never written" % (
                             what, at, shape[axis] - 1, axis))
        last = max((copy for _, _, copy in parts), key=order.__getitem__)
        # Each copied tensor broadcast to its slice and cast to the
        # buffer's dtype, as copy_ does.
        srcs = []
        for w, view, copy in parts:
            src = copy.args[1]
            want = tuple(view.meta["zi_value"].shape)
            value = src.meta["zi_value"] if isinstance(src, fx.Node) \
                else src
            if not torch.is_tensor(value):
                _fail_at(copy, "%s written by copy_ of a %s" % (
                    what, type(value).__name__))
            for method, args, ok in (
                    ("to", (buf.meta["zi_value"].dtype,),
                     value.dtype == buf.meta["zi_value"].dtype),
                    ("expand", want, tuple(value.shape) == want)):
                if ok:
                    continue
                with graph.inserting_before(copy):
                    src = graph.call_method(method, (src,) + args)
                src.meta.update({k: copy.meta.get(k) for k in
                                 ("zi_path", "zi_source")})
                src.meta["zi_op"] = "Tensor." + method
                value = getattr(value, method)(*args)
                src.meta["zi_value"] = value
            srcs.append(src)
        with graph.inserting_after(last):
            cat = graph.call_function(torch.cat, (tuple(srcs), axis))
        values = [s.meta["zi_value"] if isinstance(s, fx.Node) else s
                  for s in srcs]
        if any(v.is_meta for v in values):
            values = [v.to("meta") for v in values]
        with torch.no_grad():
            cat.meta["zi_value"] = torch.cat(values, axis)
        for k in ("zi_op", "zi_path", "zi_source"):
            cat.meta[k] = buf.meta.get(k)
        for r in reads:
            r.replace_input_with(buf, cat)
        for _, view, copy in parts:
            graph.erase_node(copy)
            graph.erase_node(view)
        graph.erase_node(buf)


def trace(module, example_args, step=None, packed_rows=False):
    """The fx graph of module(*example_args), or of step(module,
    *example_args), each node carrying its value (meta zi_value), module
    path (zi_path) and source line (zi_source). Module paths and parameter
    names are the module's own either way. With `packed_rows` (--packed),
    transformers' packed documents and the rotary modules are calls of
    their own (packed.py)."""
    tracer = ConcreteTracer(example_args, packed_rows)
    cls = type(module)
    if step is not None:
        # fx traces a method of the root's class: a subclass of the module's
        # own, for this trace only, whose method is the step.
        tracer.traced_func_name = "_zero_import_step"
        module.__class__ = type(cls.__name__, (cls,), {
            "_zero_import_step": step, "__module__": cls.__module__})
    try:
        with _no_kv_cache(module, tracer), _known_functions(), \
                _moe_aux_calls(tracer), packed.traced_calls(tracer) \
                if packed_rows else contextlib.nullcontext():
            graph = tracer.trace(module)
    except ImportFailure:
        raise
    except Exception as e:
        tb = traceback.extract_tb(e.__traceback__)
        raise ImportFailure("tracing %s failed: %s: %s" % (
            cls.__name__, type(e).__name__, e),
            path=tracer.failed_path,
            source=user_source(tb))
    finally:
        module.__class__ = cls
    # fx makes get_attr nodes for parameters and tensor constants passed as
    # arguments without a proxy.
    for node in graph.nodes:
        if node.op == "get_attr" and "zi_value" not in node.meta:
            node.meta["zi_value"] = resolve_attr(module, node.target)
            node.meta.setdefault("zi_op", None)
    _filled_buffers(graph)
    if tracer.placeholders < len(example_args):
        raise ImportFailure(
            "make() gave %d example arguments; forward() takes %d" % (
                len(example_args), tracer.placeholders))
    return graph
