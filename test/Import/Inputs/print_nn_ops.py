#!/usr/bin/env python3
"""Prints every nn op of a generic-form MLIR file with zero-import's printer.

Reads `zero-opt --mlir-print-op-generic` output, replaces each nn op by the
text zero_import.printer.format_op prints for it (its assembly format, or the
generic form with --generic) and writes the file; parsing both with
zero-opt must give the same IR. Fails when an op of the importer's table
(nn_ops.py) does not occur in the input.
"""

import argparse
import os
import re
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "python"))
from zero_import.nn_ops import OPS as NN_OPS  # noqa: E402
from zero_import.printer import format_op  # noqa: E402

_OP = re.compile(r'^(\s*)(?:(\S+(?::\d+)?) = )?"nn\.(\w+)"\((.*?)\)'
                 r'(?: <\{(.*)\}>)? : \((.*?)\) -> (.*)$')


def split_top(text):
    """Splits at the commas outside <...> and [...]."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "<[":
            depth += 1
        elif ch in ">]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def f32_value(text):
    if text.startswith("0x"):
        return struct.unpack(">f", bytes.fromhex(text[2:]))[0]
    return float(text)


def attr_value(text):
    m = re.fullmatch(r"array<i64(?:: (.*))?>", text)
    if m:
        return [int(v) for v in (m.group(1) or "").split(",") if v.strip()]
    m = re.fullmatch(r"array<f32(?:: (.*))?>", text)
    if m:
        return [float(v) for v in (m.group(1) or "").split(",") if v.strip()]
    if text.startswith("[") and text.endswith("]"):
        # An array of f32 attributes; MLIR prints one in hexadecimal where
        # its decimal form would not read back exactly.
        return [f32_value(v.rpartition(" : ")[0])
                for v in split_top(text[1:-1])]
    value, _, ty = text.rpartition(" : ")
    if ty == "f64":
        return float(value)
    if ty == "i64":
        return int(value)
    raise SystemExit("cannot read attribute value %r" % text)


def rewrite(line, generic, seen):
    m = _OP.match(line)
    if not m:
        if '"nn.' in line:
            raise SystemExit("cannot read: %s" % line.strip())
        return line
    indent, lhs, kind, operands, attrs, in_types, out_types = m.groups()
    seen.add(kind)
    values, sizes = {}, None
    for item in split_top(attrs or ""):
        name, eq, value = item.partition(" = ")
        if name == "operandSegmentSizes":
            # Several optional operands: one entry per group, None where
            # one is absent.
            sizes = [int(v) for v in re.fullmatch(
                r"array<i32: (.*)>", value).group(1).split(",")]
            continue
        values[name] = attr_value(value) if eq else True
    results = out_types
    if results.startswith("("):
        results = results[1:-1]
    names, types = split_top(operands), split_top(in_types)
    if sizes:
        if any(n > 1 for n in sizes):
            raise SystemExit("cannot read: %s" % line.strip())
        it_n, it_t = iter(names), iter(types)
        names = [next(it_n) if n else None for n in sizes]
        types = [next(it_t) if n else None for n in sizes]
    text = format_op(kind, names, types, split_top(results), values,
                     generic=generic)
    return indent + (lhs + " = " if lhs else "") + text


def main():
    p = argparse.ArgumentParser()
    p.add_argument("input")
    p.add_argument("--generic", action="store_true")
    args = p.parse_args()
    seen = set()
    for line in open(args.input).read().splitlines():
        print(rewrite(line, args.generic, seen))
    missing = sorted(set(NN_OPS) - seen)
    if missing:
        raise SystemExit("ops of nn_ops.py not in the input: %s" %
                         ", ".join(missing))


if __name__ == "__main__":
    main()
