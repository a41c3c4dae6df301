"""MLIR text: nn ops in their assembly format (or the generic form), the
attributes zero-import writes, and the module of a step (print_module).

An `nn` op is printed in its assembly format from the table generated from
NNOps.td (nn_ops.py), following the spacing rules of MLIR's declarative
format printer, so that model.mlir reads as `zero-opt` prints it; an op
whose syntax C++ code defines (no declarative format, or a custom directive
without a counterpart in CUSTOM_DIRECTIVES) is printed in MLIR's generic
form, which every tool parses as well. #zero.optimizer's parameters are
printed in the order of the table generated from optimizers.def
(optimizers.py). Of the package it imports only the tables and errors.py,
and no PyTorch: the printer runs without it (test/Import/nn-printer.test).
"""

import math
import re
import struct

from .errors import ImportFailure
from .nn_ops import OPS as NN_OPS
from .optimizers import PARAMS, STATE_PRECISIONS


def tensor_type(shape, dtype):
    return "tensor<" + "".join("%dx" % d for d in shape) + dtype + ">"


def _mlir_float(s):
    """Python's float text `s` with the point MLIR's float literal needs."""
    if "e" in s and "." not in s.split("e")[0]:
        a, b = s.split("e")
        s = a + ".0e" + b
    return s


def fmt_float(v):
    """A float literal MLIR parses back to the same double."""
    if not math.isfinite(v):
        raise ImportFailure("a non-finite constant (%r) in an attribute" % v)
    return _mlir_float(repr(float(v)))


_F32_MAX = 3.4028234663852886e38


def _to_f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


def fmt_f32(v):
    """The shortest float literal MLIR parses back to v rounded to
    float32 (9 significant digits always do)."""
    if not math.isfinite(v) or abs(v) > _F32_MAX:
        raise ImportFailure("a non-finite constant (%r) in an attribute" % v)
    v = _to_f32(v)
    digits = 1
    while _to_f32(float("%.*g" % (digits, v))) != v:
        digits += 1
    return _mlir_float(repr(float("%.*g" % (digits, v))))


class OpFormatError(Exception):
    """An op the printer was given that its table entry does not allow."""


# The custom directives of NNOps.td's assembly formats, printed as NNOps.cpp
# prints them, from the texts of their arguments.
CUSTOM_DIRECTIVES = {
    # printAttentionTypes: the key's type only where it is not the query's.
    "AttentionTypes": lambda query, key: query if key == query else
    query + ", " + key,
    # printSlopes: the slopes as a bracketed list of f32 literals.
    "Slopes": lambda slopes: slopes,
}

# Attribute values as the declarative format prints them (the type of a
# buildable attribute elided) and as the generic form does.
_ATTR_TEXT = {
    "unit": lambda v: "unit",
    "f64": fmt_float,
    "i64": lambda v: "%d" % v,
    "i64_array": lambda v: "[%s]" % ", ".join("%d" % x for x in v),
    "f32_array": lambda v: "[%s]" % ", ".join(fmt_f32(x) + " : f32"
                                              for x in v),
    "dense_f32_array": lambda v: "[%s]" % ", ".join(fmt_f32(x) for x in v),
}
_ATTR_GENERIC = {
    "f64": lambda v: fmt_float(v) + " : f64",
    "i64": lambda v: "%d : i64" % v,
    "i64_array": lambda v: "array<i64%s>" % "".join(
        (":" if i == 0 else ",") + " %d" % x for i, x in enumerate(v)),
    "f32_array": lambda v: "[%s]" % ", ".join(fmt_f32(x) + " : f32"
                                              for x in v),
    "dense_f32_array": lambda v: "array<f32%s>" % "".join(
        (":" if i == 0 else ",") + " " + fmt_f32(x) for i, x in enumerate(v)),
}


def _bind(kind, groups, values, what):
    """{name: [values]} of an op's operand or result groups: one variadic
    group takes the values beyond the fixed ones, or optional groups take
    one each, left to right. With None among them, the values are one per
    group, None where an optional group is absent (an op with several
    optional operands, such as attention's sinks and segments)."""
    if any(v is None for v in values):
        if len(values) != len(groups) or any(
                v is None and arity != "optional"
                for v, (_, arity) in zip(values, groups)):
            raise OpFormatError("nn.%s: None stands for an absent optional "
                                "group of %s, one value per group" % (
                                    kind, what))
        return {name: [] if v is None else [v]
                for v, (name, _) in zip(values, groups)}
    fixed = sum(1 for _, arity in groups if arity == "one")
    optional = sum(1 for _, arity in groups if arity == "optional")
    variadic = any(arity == "variadic" for _, arity in groups)
    extra = len(values) - fixed
    if extra < 0 or (extra > optional and not variadic):
        raise OpFormatError("nn.%s takes %d %s, got %d" % (
            kind, fixed, what, len(values)))
    out, i = {}, 0
    for name, arity in groups:
        if arity == "one":
            n = 1
        elif arity == "variadic":
            n = extra
        else:
            n = 1 if extra > 0 else 0
            extra -= n
        out[name] = list(values[i:i + n])
        i += n
    return out


def _present_attrs(kind, spec, attrs):
    """{name: value} of the attributes set, checked against the table."""
    table = spec["attributes"]
    unknown = sorted(set(attrs) - set(table))
    if unknown:
        raise OpFormatError("nn.%s has no attribute '%s'" % (kind,
                                                               unknown[0]))
    out = {}
    for name, (attr_kind, optional) in table.items():
        value = attrs.get(name)
        if value is None or (attr_kind == "unit" and not value):
            if not optional:
                raise OpFormatError("nn.%s needs attribute '%s'" % (kind,
                                                                     name))
            continue
        out[name] = value
    return out


class _FormatPrinter:
    """MLIR's generated printer of a declarative format: a space before each
    element but where punctuation asks for none."""

    def __init__(self, kind, operands, operand_types, result_types, attrs):
        self.text = "nn." + kind
        self.should_space, self.last_punct = True, False
        self.operands, self.operand_types = operands, operand_types
        self.result_types, self.attrs = result_types, attrs

    def literal(self, value):
        if self.should_space and self._space_before(value):
            self.text += " "
        self.text += value
        self.should_space = len(value) != 1 or value not in "<({["
        self.last_punct = not (value[0] == "_" or value[0].isalpha())

    def _space_before(self, value):
        if len(value) != 1 and value != "->":
            return True
        if self.last_punct:
            return value[0] not in ">)}],"
        return value[0] not in "<>(){}[],"

    def value(self, text):
        if self.should_space or not self.last_punct:
            self.text += " "
        self.last_punct, self.should_space = False, True
        self.text += text

    def types(self, name):
        if name in self.operand_types:
            return ", ".join(self.operand_types[name])
        return ", ".join(self.result_types[name])

    def argument(self, element, specs):
        """The text of a custom directive's argument."""
        if element[0] == "type":
            return self.types(element[1])
        if element[0] == "operand":
            return ", ".join(self.operands[element[1]])
        if element[0] == "attribute":
            return _ATTR_TEXT[specs[element[1]][0]](self.attrs[element[1]])
        raise OpFormatError("a custom directive argument %r" % (element,))

    def element(self, e, specs):
        what = e[0]
        if what == "literal":
            self.literal(e[1])
        elif what == "space":
            if e[1]:
                self.text += " "
                self.last_punct = False
            else:
                self.last_punct = True
            self.should_space = False
        elif what == "attr-dict":
            # Every attribute the importer sets is in the format.
            self.last_punct = False
        elif what == "operand":
            self.value(", ".join(self.operands[e[1]]))
        elif what == "attribute":
            kind = specs[e[1]][0]
            self.value(_ATTR_TEXT[kind](self.attrs[e[1]]))
        elif what == "type":
            self.value(self.types(e[1]))
        elif what == "custom":
            args = [self.argument(a, specs) for a in e[2]]
            self.value(CUSTOM_DIRECTIVES[e[1]](*args))
        elif what == "optional":
            anchor, elements = e[1], e[2]
            if anchor in specs:
                present = anchor in self.attrs
            else:
                present = bool(self.operands.get(anchor) or
                               self.result_types.get(anchor))
            if not present:
                return
            for child in elements:
                # A unit attribute anchoring its group is the group itself.
                if child is not elements[0] and child[0] == "attribute" \
                        and child[1] == anchor and specs[anchor][0] == "unit":
                    continue
                self.element(child, specs)
        else:
            raise OpFormatError("format element %r" % (e,))


def _printable(fmt, specs):
    """Whether this module prints every element of a format."""
    for e in fmt or ():
        if e[0] == "custom" and e[1] not in CUSTOM_DIRECTIVES:
            return False
        if e[0] == "attribute" and specs[e[1]][0] not in _ATTR_TEXT:
            return False
        if e[0] == "optional" and not _printable(e[2], specs):
            return False
    return fmt is not None


def format_op(kind, operands, operand_types, result_types, attrs,
              generic=False):
    """The text of `nn.<kind>` with these operands (SSA names), their types
    (None for both where an optional operand is absent, _bind), the result
    types and the attributes ({name: value}; None, or False for a unit
    attribute, leaves one out), in its assembly format or, with `generic`
    or where this module cannot print the format, in the generic form."""
    if kind not in NN_OPS:
        raise OpFormatError("no nn op '%s'" % kind)
    spec = NN_OPS[kind]
    present = _present_attrs(kind, spec, attrs)
    names = _bind(kind, spec["operands"], operands, "operands")
    types = _bind(kind, spec["operands"], operand_types, "operands")
    results = _bind(kind, spec["results"], result_types, "results")
    specs = spec["attributes"]
    if generic or not _printable(spec["format"], specs):
        sizes = None
        if sum(1 for _, a in spec["operands"] if a != "one") > 1:
            sizes = [len(names[n]) for n, _ in spec["operands"]]
        return _generic(kind, [v for v in operands if v is not None],
                        [t for t in operand_types if t is not None],
                        result_types, present, specs, sizes)
    p = _FormatPrinter(kind, names, types, results, present)
    for e in spec["format"]:
        p.element(e, specs)
    return p.text


def _generic(kind, operands, operand_types, result_types, attrs, specs,
             sizes=None):
    """`sizes`: each operand group's count, for an op with several optional
    groups (its operandSegmentSizes)."""
    text = '"nn.%s"(%s)' % (kind, ", ".join(operands))
    if attrs or sizes:
        items = []
        for name in sorted(attrs):
            attr_kind = specs[name][0]
            if attr_kind != "unit" and attr_kind not in _ATTR_GENERIC:
                raise OpFormatError("nn.%s: attribute '%s' is %s, which the "
                                    "importer does not print" % (
                                        kind, name, attr_kind))
            items.append(name if attr_kind == "unit" else "%s = %s" % (
                name, _ATTR_GENERIC[attr_kind](attrs[name])))
        if sizes:
            items.append("operandSegmentSizes = array<i32: %s>" %
                         ", ".join(str(n) for n in sizes))
        text += " <{%s}>" % ", ".join(items)
    results = ", ".join(result_types)
    if len(result_types) != 1:
        results = "(" + results + ")"
    return text + " : (%s) -> %s" % (", ".join(operand_types), results)


# SSA name hints of the results of some ops (the op's name otherwise).
_RESULT_NAMES = {"softmax_cross_entropy": "loss", "layer_norm": "ln",
                 "rms_norm": "norm", "gelu_erf": "gelu", "attention": "att"}


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
        # None: an absent optional operand before a present one (_bind).
        operands = [None if o is None else self.use(o) for o in op.operands]
        res = self.define(op, _RESULT_NAMES.get(op.kind, op.kind))
        try:
            text = format_op(op.kind, operands,
                             [None if o is None else o.type()
                              for o in op.operands],
                             [r.type() for r in op.results], op.attrs)
        except OpFormatError as e:
            op.where.fail("internal: %s" % e)
        self.lines.append("    %s = %s" % (res, text))


def symbol(name):
    """A symbol name, quoted unless it is a bare identifier."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$.]*", name):
        return name
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def mlir_string(text):
    """`text` as an MLIR string literal."""
    out = []
    for b in text.encode("utf-8"):
        c = chr(b)
        out.append(c if 0x20 <= b < 0x7f and c not in '"\\' else
                   "\\%02X" % b)
    return '"' + "".join(out) + '"'


def dense_f32(t):
    """A float32 tensor as an MLIR dense attribute of its exact bits (the
    hexadecimal form: little-endian float32s)."""
    values = [float(v) for v in t.flatten().tolist()]
    data = struct.pack("<%df" % len(values), *values)
    return 'dense<"0x%s"> : %s' % (data.hex().upper(),
                                   tensor_type(list(t.shape), "f32"))


def hf_model_attr(config, tied, buffers=None, unused=()):
    """The #zero.hf_model attribute of a config.json text, tied names, the
    persistent buffers the step holds as constants ({name: float32
    tensor}) and the names of the parameters it never uses."""
    text = "#zero.hf_model<config = " + mlir_string(config)
    if tied:
        text += ", tied = {%s}" % ", ".join(
            "%s = %s" % (mlir_string(k), mlir_string(v))
            for k, v in sorted(tied.items()))
    if buffers:
        text += ", buffers = {%s}" % ", ".join(
            "%s = %s" % (mlir_string(k), dense_f32(v))
            for k, v in sorted(buffers.items()))
    if unused:
        text += ", unused = [%s]" % ", ".join(
            mlir_string(k) for k in sorted(unused))
    return text + ">"


def optimizer_attr(opt):
    """#zero.optimizer of an options dict: its kind, then each parameter
    it holds in the order of optimizers.def's rows (optimizers.PARAMS), and
    its states when they are not the first precision."""
    text = "#zero.optimizer<kind = %s" % opt["kind"]
    for name in PARAMS:
        if name in opt:
            value = opt[name]
            text += ", %s = %s" % (name, ("true" if value else "false")
                                   if isinstance(value, bool)
                                   else fmt_float(value))
    if opt.get("states", STATE_PRECISIONS[0]) != STATE_PRECISIONS[0]:
        text += ", states = %s" % opt["states"]
    return text + ">"


def peft_attr(info):
    """The #zero.peft attribute of peft_info's result."""
    config, prefix, layers = info
    items = []
    for layer in layers:
        items.append(
            "#zero.lora<base = %s, a = %s, b = %s, scaling = %s, "
            "merged_key = %s, a_key = %s, b_key = %s>" % (
                mlir_string(layer["base"]), mlir_string(layer["a"]),
                mlir_string(layer["b"]), fmt_scaling(layer["scaling"]),
                mlir_string(layer["merged_key"]),
                mlir_string(layer["a_key"]), mlir_string(layer["b_key"])))
    return "#zero.peft<config = %s, prefix = %s, layers = [%s]>" % (
        mlir_string(config), mlir_string(prefix), ", ".join(items))


def fmt_scaling(v):
    """A float as MLIR prints a double (2.000000e+00) where that is exact,
    else with every digit the double needs."""
    text = "%.6e" % v
    return text if float(text) == v else fmt_float(v)


def print_module(graph, loss, optimizer, precision, clip, header,
                 labels=None):
    pr = Printer(graph)
    args = []
    for a in graph.args:
        name = "%" + a.arg
        pr.names[id(a)] = name
        args.append("%s: %s" % (name, a.type()))
    for op in graph.ops:
        pr.op(op)
    out = [header, "module {"]
    attrs = []
    if graph.hf_model is not None:
        attrs.append("zero.hf_model = " + hf_model_attr(*graph.hf_model))
    if graph.peft is not None:
        attrs.append("zero.peft = " + peft_attr(graph.peft))
    if attrs:
        out[1] = "module attributes {%s} {" % ", ".join(attrs)
    for name, shape, init in graph.params:
        compute = graph.compute.get(name)
        out.append("  zero.param @%s : %s init %s%s%s" % (
            symbol(name), tensor_type(shape, "f32"), init,
            " compute " + compute if compute else "",
            " frozen" if name in graph.frozen else ""))
    step = "  zero.train_step @train(%s) optimizer %s precision %s" % (
        ", ".join(args), optimizer, precision)
    if clip:
        step += " gradient_clipping " + fmt_float(clip)
    if labels:
        step += " labels " + labels
    # The forward's argument names, by which the runtime library's step
    # takes the inputs (the manifest's input names).
    if graph.args:
        step += " attributes {input_names = [%s]}" % ", ".join(
            mlir_string(a.arg) for a in graph.args)
    out.append(step + " {")
    out.extend(pr.lines)
    out.append("    zero.return %s : tensor<f32>" % pr.use(loss))
    out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"
