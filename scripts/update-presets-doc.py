#!/usr/bin/env python3
"""Regenerates the table of every preset rate and its source in
docs/HardwarePresets.md from lib/Dialect/Zero/Analysis/HardwarePresets.cpp,
or checks it (--check: prints a unified diff and exits 1 when it is stale).

The script evaluates the preset table in the code (its `constexpr double`
constants, its `static const double` arrays and each preset's
`/*field=*/value` initializers) and writes, between the markers
`<!-- presets:rates -->` and `<!-- /presets:rates -->`, every number of
every GPU and CPU preset with the source it comes from. A number whose
field has no source below, or a source key the page does not define under
"Sources of the rates", fails: every number on the page cites a source.
The summary table at the top of the page is written by hand; a number of it
that is not the code's (within its rounding) fails too.
"""

import argparse
import difflib
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DOC = os.path.join(ROOT, "docs", "HardwarePresets.md")
CODE = os.path.join(ROOT, "lib", "Dialect", "Zero", "Analysis",
                    "HardwarePresets.cpp")
BEGIN, END = "<!-- presets:rates -->", "<!-- /presets:rates -->"

HOPPER = ("h100-sxm", "h100-sxm-96gb", "h200-sxm")
MEASURED = ("h100-sxm", "h200-sxm")
# Presets of the A100, whose matmul rate has a measurement of its own.
AMPERE = ("a100-40gb", "a100-80gb")
# The power-capped H100 of the torchtitan hosts: its peak is [power]'s.
CAPPED = ("h100-sxm-96gb",)

# The fields the page lists, their unit and scale, and where each preset's
# value comes from: a function of the preset's name giving source keys
# (defined on the page under "Sources of the rates").
FIELDS = [
    ("gemmFlops16", "TFLOP/s", 1e12,
     lambda p: "[cal]" if p == "cpu" else
     "[power] x [mamf]" if p in CAPPED else
     "[mamf]" if p in HOPPER + AMPERE else "[sheet] x [mamf]"),
    ("gemmFlops32", "TFLOP/s", 1e12,
     lambda p: "[cal]" if p == "cpu" else
     "[hopper] x [power] x [mamf]" if p in CAPPED else
     "[hopper] x [mamf]" if p in HOPPER else "[sheet] x [mamf]"),
    ("peakFlops16", "TFLOP/s", 1e12,
     lambda p: "[power]" if p in CAPPED else
     "[hopper]" if p in HOPPER else "[sheet]"),
    ("multiprocessors", "", 1,
     lambda p: "[hopper]" if p in HOPPER else "[sheet]"),
    ("misalignedGemmFraction", "", 1, lambda p: "[h100-profile]"),
    ("memoryBandwidth", "GB/s", 1e9,
     lambda p: "[cal]" if p == "cpu" else
     "[stream]" if p in MEASURED + ("a100-80gb",) else
     "[titan]" if p == "h100-sxm-96gb" else "[sheet] x [stream]"),
    ("linkBandwidth", "GB/s", 1e9,
     lambda p: "[cal]" if p == "cpu" else "[nccl]" if p in HOPPER else
     "[sheet] x [nccl]"),
    ("collectiveLatency", "us", 1e-6,
     lambda p: "[cal]" if p == "cpu" else "[nccl]"),
    ("kernelOverhead", "us", 1e-6,
     lambda p: "[cal]" if p == "cpu" else "[h100-profile]"),
    ("interNodeLinks", "", 1, lambda p: "[fabric]"),
    ("interNodeLinkBandwidth", "GB/s", 1e9, lambda p: "[fabric]"),
    ("interNodeLatency", "us", 1e-6, lambda p: "[nccl-tuning]"),
    ("deviceMemoryBytes", "GB", 1e9,
     lambda p: "[titan]" if p == "h100-sxm-96gb" else "[sheet]"),
    ("hostLinkBandwidth", "GB/s", 1e9, lambda p: "[offload]"),
    ("hostMemoryBandwidth", "GB/s", 1e9, lambda p: "[offload]"),
    ("nvmeReadBandwidth", "GB/s", 1e9,
     lambda p: "[cal]" if p == "cpu" else "[nvme]"),
    ("nvmeWriteBandwidth", "GB/s", 1e9,
     lambda p: "[cal]" if p == "cpu" else "[nvme]"),
]
# Fields that hold no rate of their own (flags, tables, rows by ranks).
NOT_RATES = {"shares", "attention", "copiesOnComputeStream",
             "nvmeSharedByRanks", "attentionFlops", "activationElements",
             "backToBackLatency", "skewCompute", "reduceScatterBandwidth",
             "allGatherBandwidth", "busbwCurve"}
# The attention tables the presets point at.
ATTENTION = {
    "kFa2Hopper": "FA2 [fa3]",
    "kFa2Ampere": "FA2 [fa3] x [fa2]",
    "nullptr": "GEMM rate",
}
# The bus bandwidth curves the presets point at.
CURVES = {
    "kBusbwH100": "ND H100 v5 [azure-nccl]",
    "kBusbwH200": "ND H200 v5 [azure-nccl]",
    "kBusbwA100": "ND A100 v4 [azure-nccl]",
    "nullptr": "flat",
}
# The curves' arrays: the sizes, then each sweep and where it was read.
SWEEPS = [
    ("kNcclNdH100", "ND H100 v5"),
    ("kNcclNdH200", "ND H200 v5"),
    ("kNcclNdA100", "ND A100 v4"),
]
# The attention arrays and where they were read.
ARRAYS = [
    ("kFaSeqLens", "query length", "[fa3]"),
    ("kFa2Forward64", "forward, no mask, head dim 64", "[fa3] Fig. 5"),
    ("kFa2Forward128", "forward, no mask, head dim 128", "[fa3] Fig. 5"),
    ("kFa2ForwardCausal128", "forward, causal, head dim 128", "[fa3] Fig. 5"),
    ("kFa2Backward64", "backward, no mask, head dim 64", "[fa3] Fig. 6"),
    ("kFa2Backward128", "backward, no mask, head dim 128", "[fa3] Fig. 6"),
]


class Failure(Exception):
    pass


def strip_comments(text):
    return re.sub(r"//[^\n]*", "", text)


def evaluate(expr, names):
    expr = " ".join(expr.split()).replace("'", "")
    if expr in ("true", "false"):
        return expr == "true"
    if expr.startswith("&") or expr in ("nullptr", "{}") or \
            re.fullmatch(r"k[A-Za-z0-9]*Shares", expr):
        return None
    try:
        return float(eval(expr, {"__builtins__": {}}, names))
    except Exception as e:
        raise Failure("cannot evaluate '%s': %s" % (expr, e))


def parse(path):
    text = open(path).read()
    code = strip_comments(re.sub(r"/\*(?!\w+=\*/).*?\*/", "", text,
                                 flags=re.S))
    names = {}
    for m in re.finditer(r"constexpr double ([^;]*);", code):
        for part in m.group(1).split(","):
            name, _, expr = part.partition("=")
            names[name.strip()] = evaluate(expr, names)
    arrays = {}
    for m in re.finditer(r"static const double (\w+)\[\] = \{([^}]*)\}",
                         code):
        arrays[m.group(1)] = [float(v) for v in m.group(2).split(",")]
    for m in re.finditer(r"/\*(forwardScale|backwardScale)=\*/([^,}]+)", code):
        arrays[m.group(1)] = evaluate(m.group(2), names)
    table = code[code.index("kPresets[] = {"):]
    table = table[:table.index("\n};")]
    presets = []
    for m in re.finditer(r'\{"([\w.-]+)",(.*?)(?=\n    \{"|\Z)', table, re.S):
        fields = {}
        for f in re.finditer(r"/\*(\w+)=\*/\s*([^,\n]+)",
                             m.group(2)):
            expr = f.group(2).strip()
            # The last field closes the preset's braces.
            if expr.count("}") > expr.count("{"):
                expr = expr[:-1]
            fields[f.group(1)] = (expr if f.group(1) in ("attention",
                                                         "busbwCurve") else
                                  evaluate(expr, names))
        presets.append((m.group(1), fields))
    if not presets:
        raise Failure("%s: no presets found" % path)
    return presets, arrays


def number(v, scale):
    x = v / scale
    if x == int(x) and abs(x) < 1e6:
        return "{:,}".format(int(x))
    return ("%.4g" % x) if abs(x) < 1e6 else "{:,.0f}".format(x)


def render(presets, arrays, defined):
    known = {f for f, *_ in FIELDS}
    missing = []
    for name, fields in presets:
        for field, value in fields.items():
            if field in NOT_RATES or field in known:
                continue
            if isinstance(value, float) and value:
                missing.append("%s.%s" % (name, field))
    if missing:
        raise Failure("no source for: " + ", ".join(missing) +
                      " (add the field to FIELDS in "
                      "scripts/update-presets-doc.py with its source)")
    names = [n for n, _ in presets]
    out = [BEGIN, "",
           "Generated by scripts/update-presets-doc.py from "
           "lib/Dialect/Zero/Analysis/HardwarePresets.cpp; do not edit. "
           "Each cell: the preset's value and its source (keys under "
           "\"Sources of the rates\"); - : none (0 in the code).", "",
           "| rate | unit | " + " | ".join("`%s`" % n for n in names) + " |",
           "|---|---|" + "---:|" * len(names)]
    used = set()
    for field, unit, scale, source in FIELDS:
        cells = []
        for name, fields in presets:
            v = fields.get(field)
            if not isinstance(v, float) or v == 0:
                cells.append("-")
                continue
            keys = source(name)
            used.update(re.findall(r"\[[\w-]+\]", keys))
            cells.append("%s %s" % (number(v, scale), keys))
        out.append("| `%s` | %s | %s |" % (field, unit, " | ".join(cells)))
    cells = []
    for name, fields in presets:
        table = (fields.get("attention") or "nullptr").lstrip("&")
        keys = "[cal]" if name == "cpu" else ATTENTION.get(table)
        if keys is None:
            raise Failure("no source for the attention table " + table)
        used.update(re.findall(r"\[[\w-]+\]", keys))
        cells.append(keys)
    out.append("| `attention` | | %s |" % " | ".join(cells))
    cells = []
    for name, fields in presets:
        curve = (fields.get("busbwCurve") or "nullptr").lstrip("&")
        keys = CURVES.get(curve)
        if keys is None:
            raise Failure("no source for the busbw curve " + curve)
        used.update(re.findall(r"\[[\w-]+\]", keys))
        cells.append(keys)
    out.append("| `busbwCurve` | | %s |" % " | ".join(cells))
    out += ["", "FlashAttention-2 on an H100 SXM5 in BF16, TFLOP/s, as the "
            "cost model counts attention FLOPs: `kFa2Hopper` takes them as "
            "fractions of 989 TFLOP/s, `kFa2Ampere` multiplies those by "
            "%.4g forward and %.4g backward ([fa2]: 73%% and 63%% of the "
            "A100's peak, over 370 and 322 of 989 here)." % (
                arrays["forwardScale"], arrays["backwardScale"]), ""]
    lens = arrays["kFaSeqLens"]
    out.append("| kernel | " + " | ".join("%d" % v for v in lens) +
               " | source |")
    out.append("|---|" + "---:|" * len(lens) + "---|")
    for name, label, source in ARRAYS[1:]:
        out.append("| %s | %s | %s |" % (
            label, " | ".join("%g" % v for v in arrays[name]), source))
        used.update(re.findall(r"\[[\w-]+\]", source))
    out += ["", "NCCL's bus bandwidth on one node of 8 GPUs by message size, "
            "GB/s: nccl-tests' all_reduce_perf, in place ([azure-nccl]). "
            "The cost model reads it for all-gathers and reduce-scatters "
            "within a node, at most the preset's `linkBandwidth`.", ""]
    out.append("| bytes | " + " | ".join(l for _, l in SWEEPS) + " |")
    out.append("|---:|" + "---:|" * len(SWEEPS))
    for i, size in enumerate(arrays["kSweepBytes"]):
        out.append("| %s | %s |" % ("{:,}".format(int(size)), " | ".join(
            "%g" % arrays[a][i] for a, _ in SWEEPS)))
    used.add("[azure-nccl]")
    undefined = sorted(used - defined)
    if undefined:
        raise Failure("source keys not defined under \"Sources of the "
                      "rates\": " + ", ".join(undefined))
    out += ["", END]
    return "\n".join(out)


# The summary table at the top of the page: its columns after the device
# and the field each holds, in the unit its cells are written in.
SUMMARY = [("deviceMemoryBytes", 1), ("gemmFlops16", 1e12),
           ("gemmFlops32", 1e12), ("memoryBandwidth", 1e9),
           ("linkBandwidth", 1e9)]


def cell_value(cell, scale):
    """The number a summary cell states, in the field's unit: `0.8 x 312
    TFLOP/s` is 249.6e12, `2.97 TB/s (measured)` 2.97e12, `40,000,000,000`
    that many bytes; a parenthesis only comments. None for `none`."""
    text = re.sub(r"\(.*?\)", "", cell).replace(",", "").strip()
    if text == "none":
        return None
    unit = 1e12 if "TB/s" in text or "TFLOP/s" in text else \
        1e9 if "GB/s" in text or "GFLOP/s" in text else 1
    factors = re.findall(r"[0-9]+(?:\.[0-9]+)?", text)
    if not factors:
        raise Failure("summary cell '%s' states no number" % cell)
    value = unit
    for f in factors:
        value *= float(f)
    return value


def check_summary(doc, presets):
    """Every number of the summary table at the top of the page is the
    code's (whose table below cites its source), within the rounding of
    the cell: a cell that drifts from the code fails, naming it."""
    values = dict(presets)
    header = "| preset | device | memory (bytes) |"
    if header not in doc:
        raise Failure("no summary table at the top of the page")
    table = doc.split(header, 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `([\w-]+)`(?: \(`[\w-]+`\))? \| [^|]+ \|(.*)\|$",
                      table, re.M)
    if not rows:
        raise Failure("no summary table at the top of the page")
    wrong = []
    for name, cells in rows:
        if name not in values:
            raise Failure("summary row of unknown preset `%s`" % name)
        cells = [c.strip() for c in cells.split("|")]
        for (field, scale), cell in zip(SUMMARY, cells):
            stated = cell_value(cell, scale)
            code = values[name].get(field) or 0
            if stated is None and code == 0:
                continue
            if stated is None or abs(stated - code) > 0.006 * code:
                wrong.append("%s %s: the page says '%s', the code %s" % (
                    name, field, cell, number(code, scale)))
    if len(rows) != len(presets):
        wrong.append("%d presets in the code, %d summary rows" % (
            len(presets), len(rows)))
    if wrong:
        raise Failure("the summary table disagrees with the code: " +
                      "; ".join(wrong))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--doc", default=DOC)
    ap.add_argument("--code", default=CODE)
    args = ap.parse_args()
    try:
        presets, arrays = parse(args.code)
        doc = open(args.doc).read()
        if BEGIN not in doc or END not in doc:
            raise Failure("%s has no %s ... %s block" % (args.doc, BEGIN, END))
        # A source key is defined by a list item that starts with it and
        # names where it was read.
        defined = set(re.findall(r"^- (\[[\w-]+\]) \S", doc, re.M))
        block = render(presets, arrays, defined)
        check_summary(doc, presets)
        head, rest = doc.split(BEGIN, 1)
        new = head + block + rest.split(END, 1)[1]
    except Failure as e:
        print("update-presets-doc.py: %s" % e, file=sys.stderr)
        return 1
    if args.check:
        if new != doc:
            sys.stdout.writelines(difflib.unified_diff(
                doc.splitlines(True), new.splitlines(True), args.doc,
                "generated"))
            print("%s differs from the preset table in the code; regenerate "
                  "it with\n  python3 scripts/update-presets-doc.py%s" %
                  (os.path.basename(args.doc),
                   "" if args.doc == DOC else " --doc " + args.doc))
            return 1
        return 0
    with open(args.doc, "w") as f:
        f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
