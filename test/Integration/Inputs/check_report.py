#!/usr/bin/env python3
"""Checks zero-report's exact numbers against the ZeRO formulas.

For every model, stage and world size given, runs
  zero-model-gen ... | zero-opt --zero-pipeline=... --zero-report=...
and asserts, independently of the compiler's own arithmetic:
  * param_count is the sum of the zero.param shapes of the model;
  * model states per rank are 16S (stage 0), 4S + 12S'/n (1), 2S + 14S'/n (2)
    and 16S'/n (3) bytes, with S' the padded count (per partition: numel
    rounded up to a multiple of n * alignment at stages 1-3);
  * the communication volume is 2S at stages 0-2 plus only the constant-size
    overflow/norm reduction (2 elements all-reduced: 4); at stage 3 (with
    persistence and reuse disabled) it is S for the reduce-scatters plus the
    elements of every gather in the schedule, which is S for the forward plus
    the layers the backward reads again: between 2S and DeepSpeed's 3S (a
    layer whose parameters the backward never reads, like the first linear
    layer whose input needs no gradient, is not gathered again);
  * peak_bytes is at least the model states plus the activations.
"""
import json
import re
import sys

from report_models import models, run


def param_shapes(mlir):
    shapes = []
    for m in re.finditer(r"zero\.param @([\w.]+) : tensor<([0-9x]+)x\w+>", mlir):
        n = 1
        for d in m.group(2).split("x"):
            n *= int(d)
        shapes.append((m.group(1), n))
    return shapes


def layer_key(name):
    parts = name.split(".")
    for i, p in enumerate(parts):
        if p.isdigit():
            return ".".join(parts[: i + 1])
    return ".".join(parts[:-1]) if len(parts) > 1 else name


def padded(numel, n, align):
    q = n * align
    return (numel + q - 1) // q * q


def main():
    zero_opt, model_gen = sys.argv[1], sys.argv[2]
    align = 2
    checked = 0
    for name, model in models(model_gen):
        shapes = param_shapes(model)
        S = sum(n for _, n in shapes)
        for n in [1, 2, 4, 8, 64]:
            for stage in range(4):
                opts = ("stage=%d world-size=%d param-persistence-threshold=0 "
                        "max-reuse-distance=0" % (stage, n))
                sched = run([zero_opt, "--zero-pipeline=" + opts], stdin=model)
                out = run([zero_opt, "--zero-report=out=-", "-o", "/dev/null"],
                          stdin=sched)
                rep = json.loads(out)
                numel = {m.group(1): int(m.group(2)) for m in re.finditer(
                    r"zero\.partition @([\w.]+) stage \d+ world_size \d+ "
                    r"alignment \d+ numel (\d+)", sched)}
                gathered = sum(numel[m.group(1)] for m in re.finditer(
                    r"zero\.(?:prefetch|all_gather) group @([\w.]+) [:{]", sched))
                if stage == 3:
                    groups = {}
                    for p, k in shapes:
                        groups.setdefault(layer_key(p), 0)
                        groups[layer_key(p)] += k
                    Sp = sum(padded(g, n, align) for g in groups.values())
                elif stage == 0:
                    Sp = S
                else:
                    Sp = padded(S, n, align)
                expect = {0: 16 * S, 1: 4 * S + 12 * Sp // n,
                          2: 2 * S + 14 * Sp // n, 3: 16 * Sp // n}[stage]
                where = "%s stage %d n=%d" % (name, stage, n)
                assert rep["param_count"] == S, (where, rep["param_count"], S)
                assert rep["param_tensors"] == len(shapes), where
                assert rep["padded_param_count"] == Sp, (where, rep["padded_param_count"], Sp)
                assert rep["model_state_bytes"] == expect, (where, rep["model_state_bytes"], expect)
                b = rep["model_state_breakdown"]
                assert sum(b.values()) == expect, where
                vol = rep["comm"]["volume_elements"]
                const = rep["comm"]["constant_volume_elements"]
                if n == 1:
                    assert rep["comm"]["bytes_per_rank"] == 0, where
                else:
                    want = S + gathered if stage == 3 else 2 * S
                    assert vol - const == want, (where, vol, const, want)
                    if stage == 3:
                        assert 2 * S <= want <= 3 * S, (where, want)
                    assert const in (0, 4), (where, const)
                assert rep["peak_bytes"] >= expect + rep["activation_bytes"], where
                checked += 1
    print("checked %d configurations" % checked)


if __name__ == "__main__":
    main()
