#!/usr/bin/env python3
"""Checks zero-report's fit verdict against its own peak, independently of
the compiler's arithmetic.

  check_fit.py ZERO_OPT MODEL.mlir OPTIONS
runs `ZERO_OPT MODEL --zero-report="format=json OPTIONS"`, reads peak_bytes
P and the verdict, and asserts free_bytes = device - P and fits = (P <=
device); then reruns with device-memory=P (fits, 0 B free) and
device-memory=P-1 (does not fit by 1 B) in both formats, so the verdict
flips exactly at the peak. Prints one line per check.
"""
import json
import subprocess
import sys


def report(zero_opt, model, options, fmt):
    r = subprocess.run([zero_opt, model, "--zero-report=format=%s %s" %
                        (fmt, options), "-o", "/dev/null"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("zero-opt failed:\n" + r.stderr)
    return r.stdout


def main():
    zero_opt, model, options = sys.argv[1], sys.argv[2], sys.argv[3]
    r = json.loads(report(zero_opt, model, options, "json"))
    peak, fit = r["peak_bytes"], r["fit"]
    assert fit["free_bytes"] == fit["device_memory_bytes"] - peak, fit
    assert fit["fits"] == (peak <= fit["device_memory_bytes"]), fit
    assert 0 < fit["largest_item"]["bytes"] <= peak, fit
    print("device %d, peak %d, fits %s, largest %s" %
          (fit["device_memory_bytes"], peak, fit["fits"],
           fit["largest_item"]["name"]))
    for device, fits in ((peak, True), (peak - 1, False)):
        opts = "%s device-memory=%dB" % (options, device)
        f = json.loads(report(zero_opt, model, opts, "json"))["fit"]
        assert f["device_memory_bytes"] == device, f
        assert f["fits"] == fits and f["free_bytes"] == device - peak, f
        text = report(zero_opt, model, opts, "text")
        line = "fits: 0 B free of " if fits else "does not fit by 1 B; "
        verdict = [l for l in text.splitlines()
                   if l.startswith(("fits:", "does not fit"))]
        assert len(verdict) == 1 and verdict[0].startswith(line), verdict
        print("device-memory=peak%s: %s" % ("" if fits else "-1", verdict[0]))


if __name__ == "__main__":
    main()
