#!/usr/bin/env python3
"""Draws a rank's measured memory over one training step against the plan.

    scripts/memory-plot.py trace.rank0.json -o memory.svg [--step N]

The input is one file that a zero-mlir executable's `--trace FILE.json`
wrote. Its "memory" counter track holds what the runtime measured (the
persistent arena, the live bytes of the step arena, the kernel scratch in
use), its "op index" track the position in the step of each sample, and its
`zeroMemoryPlan` the compiler's plan by op index (from the program
manifest's `memory_timeline`). Both curves are drawn over the op index of
the step, as `zero-opt --zero-report="memory-svg=FILE"` draws the plan:

* planned: persistent + live step-arena bytes + the op's kernel scratch;
* measured: the same sum at the largest sample of each op of the chosen
  step (every micro step of it);
* the planned peak (persistent + step arena + largest scratch) and the
  measured peak (the largest allocated total of the "memory" track: both
  arenas whole plus the scratch in use), which the runtime prints as
  "peak memory: measured X bytes".

Standard library only. Bad input ends with a message naming the file and a
non-zero exit.
"""

import argparse
import json
import sys

PROG = "memory-plot"


class InputError(Exception):
    pass


def load_trace(path):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputError(f"cannot read '{path}': {e.strerror}")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text ({e.reason} at byte "
                         f"{e.start})")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}:{e.colno}: not JSON: {e.msg}")
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"),
                                                   list):
        raise InputError(f"{path}: not a Chrome trace (no traceEvents list)")
    return doc


def number(value, path, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{path}: {what} is not a number: {value!r}")
    return value


def read_plan(doc, path):
    plan = doc.get("zeroMemoryPlan")
    if not isinstance(plan, dict):
        raise InputError(
            f"{path}: no planned memory (zeroMemoryPlan); write the trace "
            "with --trace of an executable from this zero-compile")
    out = {}
    for key in ("persistent_bytes", "arena_bytes", "scratch_bytes",
                "peak_bytes", "backward_start"):
        if key not in plan:
            raise InputError(f"{path}: zeroMemoryPlan has no {key}")
        out[key] = int(number(plan[key], path, f"zeroMemoryPlan.{key}"))
    for key in ("live_bytes", "op_scratch_bytes"):
        values = plan.get(key)
        if not isinstance(values, list):
            raise InputError(f"{path}: zeroMemoryPlan.{key} is not a list")
        out[key] = [int(number(v, path, f"zeroMemoryPlan.{key}[{i}]"))
                    for i, v in enumerate(values)]
    if len(out["live_bytes"]) != len(out["op_scratch_bytes"]):
        raise InputError(f"{path}: zeroMemoryPlan.live_bytes and "
                         "op_scratch_bytes differ in length")
    if not out["live_bytes"]:
        raise InputError(f"{path}: zeroMemoryPlan has no ops")
    out["rank"] = plan.get("rank", 0)
    return out


def read_samples(doc, path):
    """The memory samples in file order: (ts, op index, args)."""
    memory, positions = [], []
    for e in doc["traceEvents"]:
        if not isinstance(e, dict) or e.get("ph") != "C":
            continue
        if e.get("name") == "memory":
            memory.append(e)
        elif e.get("name") == "op index":
            positions.append(e)
    if not memory:
        raise InputError(f"{path}: no \"memory\" counter track (ph \"C\" "
                         "events); was it written by --trace of a zero-mlir "
                         "executable?")
    if len(positions) != len(memory):
        raise InputError(f"{path}: {len(memory)} \"memory\" samples but "
                         f"{len(positions)} \"op index\" samples")
    samples = []
    for i, (m, p) in enumerate(zip(memory, positions)):
        ts = number(m.get("ts"), path, f"ts of memory sample {i}")
        if p.get("ts") != ts:
            raise InputError(f"{path}: memory sample {i} at ts {ts} has no "
                             "\"op index\" sample at the same time")
        args = m.get("args")
        if not isinstance(args, dict):
            raise InputError(f"{path}: memory sample {i} has no args")
        vals = {}
        for key in ("persistent", "step_arena_live", "step_arena_unused",
                    "kernel_scratch"):
            if key not in args:
                raise InputError(f"{path}: memory sample {i} has no {key}")
            vals[key] = int(number(args[key], path,
                                   f"memory sample {i} {key}"))
        pargs = p.get("args")
        if not isinstance(pargs, dict) or "op" not in pargs:
            raise InputError(f"{path}: op index sample {i} has no op")
        op = int(number(pargs["op"], path, f"op index sample {i}"))
        samples.append((ts, op, vals))
    return samples


def step_spans(doc):
    spans = {}
    for e in doc["traceEvents"]:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        name = e.get("name")
        if isinstance(name, str) and name.startswith("step "):
            try:
                spans[int(name[5:])] = (float(e["ts"]),
                                        float(e["ts"]) + float(e["dur"]))
            except (KeyError, TypeError, ValueError):
                continue
    return spans


def live(vals):
    return vals["persistent"] + vals["step_arena_live"] + vals["kernel_scratch"]


def allocated(vals):
    return (vals["persistent"] + vals["step_arena_live"] +
            vals["step_arena_unused"] + vals["kernel_scratch"])


def measure(samples, span, num_ops, path, step):
    """Per op index: the largest live total of the step's samples there
    (an op without samples keeps the last value before it), the largest
    allocated total, and how many samples the step has."""
    lo, hi = span
    in_step = [(op, v) for ts, op, v in samples if lo <= ts <= hi]
    if not in_step:
        raise InputError(f"{path}: no memory samples during step {step}")
    best, last = {}, {}
    for op, v in in_step:
        if op < -1 or op >= num_ops:
            raise InputError(f"{path}: op index {op} outside the plan's "
                             f"{num_ops} ops")
        best[op] = max(best.get(op, 0), live(v))
        last[op] = live(v)
    curve, carry = [], last.get(-1, 0)
    for i in range(num_ops):
        if i in best:
            curve.append(best[i])
            carry = last[i]
        else:
            curve.append(carry)
    peak = max(allocated(v) for _, v in in_step)
    return curve, peak, len(in_step)


def fmt_bytes(b):
    for scale, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if b >= scale:
            return f"{b / scale:.2f} {unit}"
    return f"{b} B"


def nice_step(maximum, count):
    import math
    raw = maximum / count
    p = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5):
        if m * p >= raw:
            return m * p
    return 10 * p


def escape(s):
    return (s.replace("&", "&amp;").replace("<", "&lt;")
            .replace(">", "&gt;").replace('"', "&quot;"))


def svg(plan, planned, measured, measured_peak, step, source):
    width, height = 1060, 580
    left, right, top, bottom = 90, 290, 50, 60
    pw, ph = width - left - right, height - top - bottom
    n = len(planned)
    # At most one bin per pixel; a bin shows its largest value.
    bins = min(n, int(pw))
    edges = [(b * n // bins, (b + 1) * n // bins) for b in range(bins)]
    pb = [max(planned[lo:hi]) for lo, hi in edges]
    mb = [max(measured[lo:hi]) for lo, hi in edges]
    y_max = max(plan["peak_bytes"], measured_peak, max(pb), max(mb), 1) * 1.1
    scale, unit = 1, "B"
    for s, u in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if y_max >= s:
            scale, unit = s, u
            break

    def x(i):
        return left + i / n * pw

    def y(b):
        return top + ph * (1 - b / y_max)

    def steps(values):
        pts = []
        for (lo, hi), v in zip(edges, values):
            pts += [f"{x(lo):.1f},{y(v):.1f}", f"{x(hi):.1f},{y(v):.1f}"]
        return " ".join(pts)

    out = []
    w = out.append
    w(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
      f'height="{height}" viewBox="0 0 {width} {height}" '
      'font-family="sans-serif" font-size="12">')
    w('<rect width="100%" height="100%" fill="white"/>')
    w(f'<text x="{left}" y="24" font-size="15" font-weight="bold">Memory of '
      f'rank {plan["rank"]}, step {step}: measured against planned</text>')
    tick = nice_step(y_max / scale, 8)
    v = 0.0
    while v * scale <= y_max:
        yy = y(v * scale)
        w(f'<line x1="{left}" y1="{yy:.1f}" x2="{left + pw}" y2="{yy:.1f}" '
          'stroke="#e0e0e0"/>')
        w(f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end">'
          f'{v:g}</text>')
        v += tick
    w(f'<text transform="translate(20,{top + ph / 2:.1f}) rotate(-90)" '
      f'text-anchor="middle">bytes per rank ({unit})</text>')
    xs = max(1, int(nice_step(n, 8)))
    for i in range(0, n + 1, xs):
        w(f'<text x="{x(i):.1f}" y="{top + ph + 18}" text-anchor="middle">'
          f'{i}</text>')
    w(f'<text x="{left + pw / 2}" y="{height - 16}" text-anchor="middle">op '
      f'index in the step (program order; {n} ops)</text>')

    # The plan as a filled area, the measurement as a line over it.
    w(f'<polygon id="planned-area" points="{x(0):.1f},{y(0):.1f} '
      f'{steps(pb)} {x(n):.1f},{y(0):.1f}" fill="#4e79a7" '
      'fill-opacity="0.25" stroke="none"/>')
    w(f'<polyline id="planned" points="{steps(pb)}" fill="none" '
      'stroke="#4e79a7" stroke-width="2"/>')
    w(f'<polyline id="measured" points="{steps(mb)}" fill="none" '
      'stroke="#f28e2b" stroke-width="1.5" stroke-dasharray="5,3"/>')
    w(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" '
      'stroke="#444"/>')
    if 0 <= plan["backward_start"] < n:
        bx = x(plan["backward_start"])
        w(f'<line x1="{bx:.1f}" y1="{top}" x2="{bx:.1f}" y2="{top + ph}" '
          'stroke="#333" stroke-dasharray="6,4"/>')
        w(f'<text x="{bx + 4:.1f}" y="{top + 14}" fill="#333">backward</text>')
    for name, value, color, dy in (("planned peak", plan["peak_bytes"],
                                    "#4e79a7", -6),
                                   ("measured peak", measured_peak, "#d62728",
                                    14)):
        yy = y(value)
        w(f'<line x1="{left}" y1="{yy:.1f}" x2="{left + pw}" y2="{yy:.1f}" '
          f'stroke="{color}" stroke-width="1" stroke-dasharray="8,4"/>')
        w(f'<text x="{left + pw - 4}" y="{yy + dy:.1f}" text-anchor="end" '
          f'fill="{color}">{name} {fmt_bytes(value)} ({value} bytes)</text>')

    lx, ly = left + pw + 20, top
    legend = [
        ("#4e79a7", "planned", "persistent + live step arena",
         "+ the op's kernel scratch (compiler)"),
        ("#f28e2b", "measured", "the same, as the runtime counted",
         "it (largest sample of each op)"),
        ("#d62728", "measured peak", "both arenas, allocated whole,",
         "+ the scratch in use"),
    ]
    for color, label, line1, line2 in legend:
        w(f'<rect x="{lx}" y="{ly}" width="14" height="14" fill="{color}"/>')
        w(f'<text x="{lx + 20}" y="{ly + 11}">{label}</text>')
        w(f'<text x="{lx + 20}" y="{ly + 25}" fill="#666" font-size="10">'
          f'{line1}</text>')
        w(f'<text x="{lx + 20}" y="{ly + 37}" fill="#666" font-size="10">'
          f'{line2}</text>')
        ly += 50
    w(f'<text x="{lx}" y="{ly + 10}" fill="#666" font-size="10">'
      f'{escape(source)}</text>')
    w("</svg>")
    return "\n".join(out) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(
        prog=PROG, description="Draw a rank's measured memory (--trace) "
        "over the compiler's plan as an SVG.")
    ap.add_argument("trace", help="a FILE.rank<R>.json that --trace wrote")
    ap.add_argument("-o", "--output", required=True, help="the SVG to write")
    ap.add_argument("--step", type=int,
                    help="the training step to draw (default: the last one "
                    "traced)")
    args = ap.parse_args(argv)
    try:
        doc = load_trace(args.trace)
        samples = read_samples(doc, args.trace)
        plan = read_plan(doc, args.trace)
        spans = step_spans(doc)
        if not spans:
            raise InputError(f"{args.trace}: no \"step N\" spans")
        step = max(spans) if args.step is None else args.step
        if step not in spans:
            raise InputError(f"{args.trace}: no step {step} (traced steps: "
                             f"{min(spans)}..{max(spans)})")
        n = len(plan["live_bytes"])
        planned = [plan["persistent_bytes"] + lv + sc for lv, sc in
                   zip(plan["live_bytes"], plan["op_scratch_bytes"])]
        measured, peak, count = measure(samples, spans[step], n, args.trace,
                                        step)
        text = svg(plan, planned, measured, peak, step, args.trace)
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            raise InputError(f"cannot write '{args.output}': {e.strerror}")
    except InputError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    same = sum(1 for p, m in zip(planned, measured) if p == m)
    above = sum(1 for p, m in zip(planned, measured) if m > p)
    print(f"{PROG}: wrote {args.output}: rank {plan['rank']}, step {step}, "
          f"{count} samples; measured peak {peak} bytes, planned peak "
          f"{plan['peak_bytes']} bytes; largest measured {max(measured)}, "
          f"planned {max(planned)} bytes in use; measured equals planned at "
          f"{same} of {n} ops, exceeds it at {above}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
