"""Checks runtime/include/zero_rt/optimizers.def against what it cannot
generate.

The build writes the compiler's OptimizerKind cases and #zero.optimizer's
hyper-parameters from the table (ZeroOptimizerTable.td); BufferKind is still
spelled in ZeroOps.td, whose cases the compiler checks when it compiles
(lib/Dialect/Zero/IR/Optimizers.cpp). This script checks the rest, on the
sources alone:

- every ZRT_OPTIMIZER_BUFFER is a BufferKind case;
- every ZRT_OPTIMIZER_PARAM but `lr` (ZeroOps.td's own) is a ZRT_HYPER_PARAM
  row with the same default (an enum's by its case in ZeroOps.td);
- every update entry is a ZRT_CTX row of abi.def;
- a row's bytes are the sum of its ZRT_OPTIMIZER_STATE rows (with
  ZRT_OPTIMIZER_STATE_PART rows, the larger part's sum), and every state
  names a ZRT_OPTIMIZER_BUFFER;
- every ZRT_OPTIMIZER_STATE_PART puts a state of its optimizer in
  `Matrices` or `Others`;
- every ZRT_OPTIMIZER_STATE_GATE gates a state of its optimizer by one of
  its ZRT_OPTIMIZER_PARAM rows;
- every ZRT_OPTIMIZER_STATE_FACTORED names a state of its optimizer;
- an optimizer with ZRT_OPTIMIZER_STATE_PART or ZRT_OPTIMIZER_STATE_FACTORED
  rows has a ZRT_OPTIMIZER_LAYOUT_STATES row (how its checkpoints name
  them).

Usage: optimizers_table_check.py OPTIMIZERS_DEF ZEROOPS_TD ABI_DEF
"""

import re
import sys


def rows(text, macro):
    """The argument lists of `macro`'s rows (not its #define)."""
    body = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    body = "\n".join(l for l in body.splitlines()
                     if not l.lstrip().startswith("#"))
    out = []
    for m in re.finditer(r"\b" + macro + r"\(([^()]*)\)", body):
        out.append([a.strip() for a in m.group(1).split(",")])
    return out


def enum_cases(td, name):
    m = re.search(r'def \w+ : I32EnumAttr<"' + name + r'",[^\[]*\[(.*?)\]>',
                  td, flags=re.S)
    if not m:
        return None
    return [(c, int(v)) for c, v in
            re.findall(r'I32EnumAttrCase<"(\w+)",\s*(\d+)>', m.group(1))]


def hyper_params(table, td):
    """The ZRT_HYPER_PARAM rows' defaults by name, an enum's as its case."""
    out = {}
    for name, htype, default, _ in rows(table, "ZRT_HYPER_PARAM"):
        if htype not in ("Double", "Bool", "Int"):
            cases = dict((v, c) for c, v in enum_cases(td, htype) or [])
            default = cases.get(int(default), default)
        out[name] = default
    return out


def same_default(a, b):
    try:
        return float(a) == float(b)
    except ValueError:
        return a == b


def main(defPath, tdPath, abiPath):
    table = open(defPath).read()
    td = open(tdPath).read()
    abi = open(abiPath).read()
    problems = []
    optimizers = rows(table, "ZRT_OPTIMIZER")
    buffers = rows(table, "ZRT_OPTIMIZER_BUFFER")
    params = rows(table, "ZRT_OPTIMIZER_PARAM")
    states = rows(table, "ZRT_OPTIMIZER_STATE")
    gates = rows(table, "ZRT_OPTIMIZER_STATE_GATE")
    parts = rows(table, "ZRT_OPTIMIZER_STATE_PART")
    factored = rows(table, "ZRT_OPTIMIZER_STATE_FACTORED")

    bufferCases = [c for c, _ in enum_cases(td, "BufferKind") or []]
    for _, key in buffers:
        if key not in bufferCases:
            problems.append("buffer %s is not a BufferKind case" % key)
    hyper = hyper_params(table, td)
    ids = {r[0]: r[1] for r in optimizers}
    for id, name, key, default in params:
        default = default.strip('"')
        if name == "lr":
            continue
        if name not in hyper:
            problems.append("%s's parameter %s is no ZRT_HYPER_PARAM row" %
                            (ids.get(id, id), name))
        elif not same_default(hyper[name], default):
            problems.append("%s's parameter %s defaults to '%s', its "
                            "ZRT_HYPER_PARAM row to '%s'" %
                            (ids.get(id, id), name, default, hyper[name]))
    ctx = set(re.findall(r"ZRT_CTX\((\w+),", abi))
    bufferIds = {r[0] for r in buffers}
    for id, name, decoupled, bytes, *entries in optimizers:
        for entry in entries:
            if entry not in ctx:
                problems.append("%s's entry %s is not a ZRT_CTX row of "
                                "abi.def" % (name, entry))
        mine = [s for s in states if s[0] == id]
        part = {p[1]: p[2] for p in parts if p[0] == id}
        if part:
            expected = max(sum(int(s[3]) for s in mine
                               if part.get(s[1], which) == which)
                           for which in ("Matrices", "Others"))
        else:
            expected = sum(int(s[3]) for s in mine)
        if expected != int(bytes):
            problems.append("%s has %s bytes per parameter, its states %d" %
                            (name, bytes, expected))
    for s in states:
        if s[1] not in bufferIds:
            problems.append("a state of %s is %s, not a ZRT_OPTIMIZER_BUFFER"
                            % (ids.get(s[0], s[0]), s[1]))
    for id, buffer, param in gates:
        if not any(s[0] == id and s[1] == buffer for s in states):
            problems.append("%s's gate of %s is not on one of its states" %
                            (ids.get(id, id), buffer))
        if not any(p[0] == id and p[1] == param for p in params):
            problems.append("%s's state %s is gated by %s, not one of its "
                            "parameters" % (ids.get(id, id), buffer, param))
    for id, buffer, part in parts:
        if not any(s[0] == id and s[1] == buffer for s in states):
            problems.append("%s's part of %s is not on one of its states" %
                            (ids.get(id, id), buffer))
        if part not in ("Matrices", "Others"):
            problems.append("%s's state %s is in part %s, not Matrices or "
                            "Others" % (ids.get(id, id), buffer, part))
    for id, buffer in factored:
        if not any(s[0] == id and s[1] == buffer for s in states):
            problems.append("%s's factored %s is not one of its states" %
                            (ids.get(id, id), buffer))
    body = "\n".join(l for l in re.sub(r"/\*.*?\*/", "", table,
                                        flags=re.S).splitlines()
                     if not l.lstrip().startswith("#"))
    layout = set(re.findall(r"\bZRT_OPTIMIZER_LAYOUT_STATES\(\s*(\w+)\s*,",
                            body))
    for id in sorted({r[0] for r in parts + factored} - layout):
        problems.append("%s keeps states by part or factored but has no "
                        "ZRT_OPTIMIZER_LAYOUT_STATES row" % ids.get(id, id))
    for p in problems:
        print("optimizers.def: " + p)
    if problems:
        return 1
    print("optimizers.def: %d optimizers, %d state buffers, %d parameters, "
          "all in ZeroOps.td and abi.def" %
          (len(optimizers), len(buffers), len(params)))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
