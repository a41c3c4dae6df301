"""Hugging Face's modules kept in float32 under 16-bit training.

A transformers model names modules (or parameters) that stay in float32
when it is loaded in a 16-bit dtype: `_keep_in_fp32_modules` for float16
only, `_keep_in_fp32_modules_strict` for float16 and bfloat16, as
transformers' `_get_dtype_plan` reads them. Each name is a pattern searched
(`re.search`, `*` as `.*`) in a parameter's name, as transformers' loader
matches it; a parameter it finds keeps float32.

With `--dtype bf16|f16` and at least one parameter kept, the step is
written in mixed precision, which `zero-mixed-precision` then leaves as it
is: every other float parameter is `compute bf16` (or f16), and so is
every op, except the ops of a kept module (its module path matches a
pattern) or that read a kept parameter, which compute in float32. A value
crossing between the two is converted by an `nn.cast` where it is used;
the scalar loss stays float32. Without a kept parameter the step is left
in float32 for `zero-mixed-precision` to convert, as for any model.

An attention's sinks (gpt-oss's per-head logits, `nn.attention`'s `sinks`)
are kept too: nn.attention computes with sinks in float32 only, so that
attention reads its bf16 query, key and value through casts and computes
in float32, as the other attention kernels accumulate a 16-bit one; the
sinks differ from transformers' bf16 copy by its rounding alone.
"""

import re

from .errors import ImportFailure, source_of
from .graph import Op, Sym

_DTYPES = {"bf16": "bf16", "fp16": "f16"}


def _pretrained_roots(module):
    """(prefix, model) of the outermost transformers PreTrainedModels in
    `module`: the model itself, or those a make() wrapper holds."""
    try:
        from transformers import PreTrainedModel
    except ImportError:
        return []
    if isinstance(module, PreTrainedModel):
        return [("", module)]
    roots = []
    for path, m in module.named_modules():
        if isinstance(m, PreTrainedModel) and not any(
                path.startswith(p + ".") for p, _ in roots):
            roots.append((path, m))
    return roots


def _patterns(model, precision):
    """The names the model keeps in float32 at `precision`."""
    names = set(getattr(model, "_keep_in_fp32_modules_strict", None) or [])
    if precision == "fp16":
        names |= set(getattr(model, "_keep_in_fp32_modules", None) or [])
    return sorted(names)


class KeptInFp32:
    """Which parameters and module paths compute in float32."""

    def __init__(self, module, precision):
        self.rules = []  # (prefix, compiled alternation of the patterns)
        for prefix, model in _pretrained_roots(module):
            names = _patterns(model, precision)
            if not names:
                continue
            for n in names:
                try:
                    re.compile(n.replace("*", ".*"))
                except re.error as e:
                    raise ImportFailure(
                        "%s's _keep_in_fp32_modules names '%s', which is "
                        "not a pattern transformers can match: %s" % (
                            type(model).__name__, n, e), path=prefix,
                        source=source_of(type(model)))
            self.rules.append((prefix, re.compile("|".join(
                "(?:%s)" % n.replace("*", ".*") for n in names))))

    def matches(self, name):
        """Whether a parameter name or module path is kept: searched
        relative to the PreTrainedModel holding it."""
        for prefix, rx in self.rules:
            if prefix and not (name == prefix or
                               name.startswith(prefix + ".")):
                continue
            if rx.search(name[len(prefix) + 1:] if prefix else name):
                return True
        return False


def keep_in_fp32(g, module, precision):
    """Writes the step `g` of `module` in mixed precision when the model
    keeps parameters in float32 at `precision` (see the module's doc);
    returns the kept parameters' names."""
    compute = _DTYPES.get(precision)
    if compute is None:
        return []
    kept = KeptInFp32(module, precision)
    names = [name for name, _, _ in g.params]
    fp32 = {n for n in names if kept.rules and kept.matches(n)}
    sinks = _sink_params(g)
    g.fp32_reasons = (["the model's _keep_in_fp32_modules"] if fp32 else []) \
        + (["attention sinks"] if sinks else [])
    fp32 |= sinks
    if not fp32:
        return []
    for n in names:
        if n not in fp32:
            g.compute[n] = compute
    ops = []
    casts = {}  # (id(value), dtype) -> its cast
    for op in g.ops:
        in_fp32 = kept.matches(op.where.path or "") or any(
            o.param in fp32 for o in op.operands
            if o is not None and o.param is not None)
        dtype = "f32" if in_fp32 else compute
        for i, o in enumerate(op.operands):
            if o is None:
                continue
            if o.param is not None and o.param not in fp32:
                o.dtype = compute
            if not o.is_float or not o.shape or o.dtype == dtype:
                continue
            key = (id(o), dtype)
            if key not in casts:
                cast = _cast(o, dtype, op.where)
                ops.append(cast)
                casts[key] = cast.results[0]
            op.operands[i] = casts[key]
        for r in op.results:
            if r.is_float and r.shape:
                r.dtype = dtype
        ops.append(op)
    g.ops = ops
    return sorted(fp32)


def _sink_params(g):
    """The parameters read as an attention's sinks (operand 3)."""
    return {op.operands[3].param for op in g.ops
            if op.kind == "attention" and len(op.operands) > 3 and
            op.operands[3] is not None and op.operands[3].param is not None}


def _cast(value, dtype, where):
    op = Op("cast", [value], {}, where)
    op.results.append(Sym(value.shape, dtype, op=op))
    return op
