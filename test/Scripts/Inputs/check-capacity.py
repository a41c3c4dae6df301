"""Checks bench/gpu/offload_capacity.py's sizes without its bisection: for
each mode, zero-opt's report of the chosen layers must fit every budget and
equal the recorded numbers, and that of one layer more must exceed a budget.

    check-capacity.py SIZES.json TOOLS-DIR WORK-DIR
"""
import json
import os
import subprocess
import sys

sizes, tools, work = sys.argv[1:]
doc = json.load(open(sizes))
f, budgets = doc["family"], doc["budgets"]
keys = {"device": "peak_bytes", "host": "host_peak_bytes", "nvme": "nvme_bytes"}


def report(flags, layers):
    model = os.path.join(work, "check_%d.mlir" % layers)
    subprocess.check_call([
        os.path.join(tools, "zero-model-gen"), "gpt2", "--layers", str(layers),
        "--hidden", str(f["hidden"]), "--heads", str(f["heads"]), "--vocab",
        str(f["vocab"]), "--seq", str(f["seq"]), "--batch", str(f["batch"]),
        "--dtype", f["dtype"], "-o", model])
    opts = "stage=3 world-size=1 remat=%s " % f["remat"] + " ".join(
        "%s=%s" % (a.lstrip("-"), b) for a, b in zip(flags[::2], flags[1::2]))
    out = subprocess.check_output([
        os.path.join(tools, "zero-opt"), model, "--zero-pipeline=" + opts,
        "--zero-report=format=json", "-o", os.devnull],
        universal_newlines=True)
    r = json.loads(out)
    return {k: r.get(v, 0) for k, v in keys.items()}


for m in doc["modes"]:
    at, above = report(m["flags"], m["layers"]), \
        report(m["flags"], m["layers"] + 1)
    over = lambda p: [k for k in keys if p[k] > budgets[k]]
    recorded = {k: m[v] for k, v in keys.items()}
    if at != recorded:
        sys.exit("%s: recorded %r, zero-opt %r" % (m["mode"], recorded, at))
    if over(at) or not over(above) or over(above) != m["next"]["exceeds"]:
        sys.exit("%s: %d layers exceed %r, %d exceed %r" % (
            m["mode"], m["layers"], over(at), m["layers"] + 1, over(above)))
    print("%s: %d layers fit, %d exceed %s" % (
        m["mode"], m["layers"], m["layers"] + 1, ", ".join(over(above))))
