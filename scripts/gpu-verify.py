#!/usr/bin/env python3
"""Checks what scripts/gpu-check.sh brought back from a GPU machine, with the
assertions and tolerances of test/E2E/cuda (which cannot run there: no
zero-compile, mpirun or FileCheck), and prints one line per check and
"N passed, N failed".

    scripts/gpu-verify.py RESULTS-DIR [unit|e2e|models|shared|fp16|offload ...]

(default: all six, as gpu-check.sh's default parts bring them back).
"""

import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "E2E", "Inputs"))
import zrt_e2e  # noqa: E402

results = []


def check(name, ok, detail=""):
    results.append(ok)
    print("%s: %s%s" % ("PASS" if ok else "FAIL", name,
                        " (%s)" % detail if detail else ""))


def unit(r):
    # The bundle's every unit program (gpu-check.sh runs each), at least
    # the first three.
    names = {"zrt-cuda-kernels-test", "zrt-cuda-matmul-attention-test",
             "zrt-cuda-optimizer-test"}
    names.update(f[:-5] for f in os.listdir(r)
                 if f.startswith("zrt-cuda-") and f.endswith("-test.json"))
    for t in sorted(names):
        path = os.path.join(r, t + ".json")
        if not os.path.exists(path):
            check("unit " + t, False, "no gtest JSON")
            continue
        j = json.load(open(path))
        tests = [c for s in j["testsuites"] for c in s["testsuite"]]
        failed = [c["classname"] + "." + c["name"] for c in tests
                  if c.get("failures")]
        skipped = [c for c in tests if c.get("result") == "SKIPPED"]
        check("unit %s: %d tests, %d skipped" % (t, len(tests), len(skipped)),
              not failed and len(tests) > 0, ", ".join(failed)[:500])


def losses(r, name, ref, rtol, steps, part="e2e"):
    path = os.path.join(r, part, name + ".json")
    if not os.path.exists(path):
        check(name, False, "no log")
        return
    log = zrt_e2e.read_log(path)
    ref = zrt_e2e.read_log(os.path.join(r, part, ref + ".json"))
    if len(log) != steps or len(ref) != steps:
        check(name, False, "%d log lines, %d reference lines, %d steps" %
              (len(log), len(ref), steps))
        return
    diff = max(zrt_e2e.rel_diff(a["loss"], b["loss"]) for a, b in zip(ref, log))
    peaks = all(l["peak_bytes"] == l["planned_peak_bytes"] for l in log)
    skipped = any(l["skipped"] for l in log)
    check("%s: losses within %g of %s (max %.2g), peak %d %s planned" %
          (name, rtol, "the CPU backend", diff,
           log[-1]["peak_bytes"], "==" if peaks else "!="),
          diff <= rtol and peaks and not skipped)


def graphs(r, name, steps):
    """A --cuda-graphs run against the plain run of the same program on the
    same GPU: the same losses bit for bit (graphs change when kernels are
    launched, not what they compute), and a trace whose graphs were updated
    after they were instantiated."""
    path = os.path.join(r, "e2e", "graphs_%s.json" % name)
    plain = os.path.join(r, "e2e", "%s.json" % name)
    if not os.path.exists(path) or not os.path.exists(plain):
        check("graphs " + name, False, "no log")
        return
    log, ref = zrt_e2e.read_log(path), zrt_e2e.read_log(plain)
    same = len(log) == steps and [l["loss"] for l in log] == \
        [l["loss"] for l in ref]
    traces = [f for f in os.listdir(os.path.join(r, "e2e"))
              if f.startswith("graphs_%s.trace" % name)]
    events = []
    for f in traces:
        doc = json.load(open(os.path.join(r, "e2e", f)))
        events += [e["name"] for e in (doc.get("traceEvents", doc)
                                       if isinstance(doc, dict) else doc)
                   if isinstance(e, dict) and
                   str(e.get("name", "")).startswith("cuda graph")]
    updated = sum(1 for e in events if "updated" in e)
    ms = lambda l: sorted(x["step_ms"] for x in l[2:])[len(l[2:]) // 2]
    check("graphs %s: losses %s the plain run's, %d graph launches (%d "
          "updated), median step %.2f ms against %.2f ms" % (
              name, "equal to" if same else "differ from", len(events),
              updated, ms(log) if len(log) > 2 else 0,
              ms(ref) if len(ref) > 2 else 0),
          same and updated > 0)


def cases(r, part):
    """A part's cases (cases.txt: NAME STEPS ARGS) against the CPU backend's
    run of the same compile, with test/E2E/cuda's tolerances: 2e-4
    relative in fp32, 2e-2 in bf16."""
    path = os.path.join(r, part, "cases.txt")
    if not os.path.exists(path):
        check(part, False, "no %s/cases.txt" % part)
        return
    for line in open(path):
        name, steps = line.split()[:2]
        losses(r, name, "cpu_" + name, 2e-2 if "bf16_" in name else 2e-4,
               int(steps), part)


def fp16(r):
    e = os.path.join(r, "e2e")
    missing = [f for f in ("f16_30.json", "f16_skip.out", "f16_skip.json",
                           "f16_same_state.out")
               if not os.path.exists(os.path.join(e, f))]
    if missing:
        check("fp16 overflow steps", False, "missing " + ", ".join(missing))
        return
    log = zrt_e2e.read_log(os.path.join(e, "f16_30.json"))
    fall = log[0]["loss"] - log[-1]["loss"]
    check("fp16: loss falls by more than 0.3 in 30 steps (%.3f)" % fall,
          fall > 0.3)
    out = open(os.path.join(e, "f16_skip.out")).read()
    ok = re.search(r"^step 3 \| loss [0-9.]+ \| scale 4096 \|.*\n"
                   r"step 3 skipped: gradient overflow, loss scale 4096 -> "
                   r"2048$", out, re.M)
    check("fp16: injected overflow at step 3 skips it, scale 4096 -> 2048",
          bool(ok))
    skip = {l["step"]: l for l in
            zrt_e2e.read_log(os.path.join(e, "f16_skip.json"))}
    check("fp16: the log marks only step 3 skipped",
          [s for s, l in sorted(skip.items()) if l["skipped"]] == [3])
    same = open(os.path.join(e, "f16_same_state.out")).read()
    check("fp16: masters and moments bitwise equal across the skipped step",
          "masters and moments bitwise equal" in same, same.strip())


# The swap files a mode keeps per rank (one rank here).
SWAP_FILES = {"opt_nvme": ["zero-optimizer.rank0.swp"],
              "param_nvme": ["zero-params.rank0.swp"],
              "both_nvme": ["zero-optimizer.rank0.swp", "zero-params.rank0.swp"]}


def adam_note(r):
    """zrt-cuda-optimizer-test's note when the CUDA Adam's values differ in
    the last bits from the host Adam's (both compiled on the build machine)."""
    path = os.path.join(r, "zrt-cuda-optimizer-test.log")
    if not os.path.exists(path):
        return "no zrt-cuda-optimizer-test.log"
    notes = [l for l in open(path) if l.startswith("note:")]
    return ("the optimizer test saw Adam values differ: " + notes[0].strip()
            if notes else "the optimizer test's Adam values were bitwise")


def offload(r):
    """Each offloaded run against the same stage without offload on the GPU.
    Criterion: bitwise equal losses, gradient norms, loss scales and skips
    at every step, in every mode. Where the parameters alone are offloaded
    the same CUDA kernels run on the same values (the shards only move
    between memories). Where the optimizer is offloaded the host Adam
    (HostAdam.cpp, as the CPU backend) replaces the CUDA fused Adam; that
    kernel replays the host Adam's fp32 operations one for one, with fused
    multiply-adds exactly where GCC contracts the host loop and correctly
    rounded division and sqrt, the unscale factor formed identically from
    the same device statistics, so it too is bitwise (the CPU backend's
    offload.test shows the host path bitwise; zrt-cuda-optimizer-test
    compares the two Adams element by element and prints a note where they
    differ, quoted on a failure). Memory: every step's measured device peak
    == its planned peak == zero-opt's peak_bytes, measured host peak ==
    host_peak_bytes, and the swap files' sizes add up to nvme_bytes."""
    d = os.path.join(r, "offload")
    plans = sorted(f for f in os.listdir(d) if f.endswith(".plan.json")) \
        if os.path.isdir(d) else []
    if not plans:
        check("offload", False, "no offload results")
        return
    for f in plans:
        plan = json.load(open(os.path.join(d, f)))
        name = plan["name"]
        path = os.path.join(d, name + ".log.json")
        base_path = os.path.join(d, plan["baseline"] + ".log.json")
        if not os.path.exists(path) or not os.path.exists(base_path):
            check("offload " + name, False, "no log" if not os.path.exists(
                path) else "no log of " + plan["baseline"])
            continue
        log = zrt_e2e.read_log(path)
        base = zrt_e2e.read_log(base_path)
        errors = []
        if len(log) != 10 or len(base) != 10:
            errors.append("%d steps, %d without offload" % (len(log), len(base)))
        for b, l in zip(base, log):
            diff = [k for k in ("loss", "grad_norm", "loss_scale", "skipped")
                    if b[k] != l[k]]
            if diff:
                errors.append("step %d: %s differ (loss %r vs %r)" % (
                    l["step"], ", ".join(diff), l["loss"], b["loss"]))
                if plan["mode"] not in ("param_cpu", "param_nvme"):
                    errors.append(adam_note(r))
                break
        for l in log:
            want = [(l["peak_bytes"], l["planned_peak_bytes"],
                     plan["peak_bytes"], "device peak"),
                    (l.get("host_peak_bytes"), l.get("planned_host_peak_bytes"),
                     plan["host_peak_bytes"], "host peak")]
            for measured, planned, report, what in want:
                if not measured == planned == report:
                    errors.append("step %d: %s measured %s, planned %s, "
                                  "report %s" % (l["step"], what, measured,
                                                 planned, report))
            if errors:
                break
        swap = {}
        swap_path = os.path.join(d, name + ".swap")
        if os.path.exists(swap_path):
            for line in open(swap_path):
                fname, size = line.split()
                swap[fname] = int(size)
        files = SWAP_FILES.get(plan["mode"], [])
        if sorted(swap) != sorted(files):
            errors.append("swap files %r, expected %r" % (sorted(swap), files))
        nvme = sum(swap.values())
        if nvme != plan["nvme_bytes"] or (log and log[-1].get(
                "planned_nvme_bytes", 0) != plan["nvme_bytes"]):
            errors.append("swap files %d bytes, nvme_bytes %d" %
                          (nvme, plan["nvme_bytes"]))
        base_peak = base[-1]["peak_bytes"] if base else 0
        check("offload %s: %d steps bitwise equal to %s; device peak %d "
              "(%d without), host peak %d, swap files %d bytes, all == planned"
              % (name, len(log), plan["baseline"], plan["peak_bytes"],
                 base_peak, plan["host_peak_bytes"], plan["nvme_bytes"]),
              not errors, "; ".join(errors)[:600])


def main():
    known = ["unit", "e2e", "models", "shared", "fp16", "offload"]
    parts = sys.argv[2:] or known
    if len(sys.argv) < 2 or set(parts) - set(known):
        sys.exit(__doc__)
    r = sys.argv[1]
    if "unit" in parts:
        unit(r)
    if "e2e" in parts:
        for s in range(4):
            losses(r, "f32_s%d" % s, "cpu_f32", 2e-4, 10)
        for s in range(4):
            losses(r, "bf16_s%d" % s, "cpu_bf16", 2e-2, 10)
        # The GPT-2-width steps where the bundle had them (its reference
        # logs came with it).
        if os.path.exists(os.path.join(r, "e2e", "cpu_wide_f32.json")):
            losses(r, "wide_f32_s3", "cpu_wide_f32", 2e-4, 5)
            losses(r, "wide_bf16_s3", "cpu_wide_bf16", 2e-2, 5)
        for name in ("f32_s0", "bf16_s0", "bf16_s3"):
            graphs(r, name, 10)
    if "models" in parts:
        cases(r, "models")
    # 2 ranks on one GPU, --collectives host.
    if "shared" in parts:
        cases(r, "shared")
    if "fp16" in parts:
        fp16(r)
    if "offload" in parts:
        offload(r)
    passed = sum(results)
    print("%d passed, %d failed" % (passed, len(results) - passed))
    sys.exit(0 if passed == len(results) else 1)


if __name__ == "__main__":
    main()
