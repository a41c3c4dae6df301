#!/usr/bin/env python3
"""Checks what scripts/gpu-check.sh brought back from a GPU machine, with the
assertions and tolerances of test/E2E/cuda (which cannot run there: no
zero-compile, mpirun or FileCheck), and prints one line per check and
"N passed, N failed".

    scripts/gpu-verify.py RESULTS-DIR
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
    for t in ("zrt-cuda-kernels-test", "zrt-cuda-matmul-attention-test",
              "zrt-cuda-optimizer-test"):
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


def losses(r, name, ref, rtol, steps):
    path = os.path.join(r, "e2e", name + ".json")
    if not os.path.exists(path):
        check(name, False, "no log")
        return
    log = zrt_e2e.read_log(path)
    ref = zrt_e2e.read_log(os.path.join(r, "e2e", ref + ".json"))
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


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    r = sys.argv[1]
    unit(r)
    for s in range(4):
        losses(r, "f32_s%d" % s, "cpu_f32", 2e-4, 10)
    for s in range(4):
        losses(r, "bf16_s%d" % s, "cpu_bf16", 2e-2, 10)
    losses(r, "wide_f32_s3", "cpu_wide_f32", 2e-4, 5)
    losses(r, "wide_bf16_s3", "cpu_wide_bf16", 2e-2, 5)
    fp16(r)
    passed = sum(results)
    print("%d passed, %d failed" % (passed, len(results) - passed))
    sys.exit(0 if passed == len(results) else 1)


if __name__ == "__main__":
    main()
