import json
import os
import sys

d = sys.argv[1]


def adam_us(name):
    """Predicted time of rank 0's zero.optimizer_step spans (stage 0: every rank
    updates all parameters, so the work does not depend on the world size;
    only the rates do)."""
    trace = json.load(open(os.path.join(d, name + ".json")))
    return sum(e["dur"] for e in trace["traceEvents"]
               if e.get("cat") == "compute" and e.get("pid") == 0 and
               e["name"].startswith("zero.optimizer_step"))


c4, c8 = adam_us("c4"), adam_us("c8")
# Beyond the last calibrated row (4 ranks), twice the ranks share the same
# cores: half the memory bandwidth each.
assert 1.9 * c4 < c8 < 2.1 * c4, (c4, c8)
print("cpu: 8 ranks get half the 4-rank bandwidth")
c1, c2 = adam_us("c1"), adam_us("c2")
assert c1 > 0 and c2 > 0, (c1, c2)
print("cpu: rows for 1 and 2 ranks")
g1, g2 = adam_us("g1"), adam_us("g2")
assert abs(g1 - g2) <= 0.01 * g1, (g1, g2)
print("h100-sxm: rates independent of the world size")


def rate(trace, prefix):
    """FLOPs per microsecond of rank 0's compute spans named `prefix`."""
    flops = us = 0.0
    for e in trace["traceEvents"]:
        if (e.get("cat") == "compute" and e.get("pid") == 0 and
                e["name"].split()[0] == prefix):
            flops += e["args"]["flops"]
            us += e["dur"]
    return flops / us


gc = json.load(open(os.path.join(d, "gc.json")))
assert rate(gc, "nn.attention") < 0.5 * rate(gc, "nn.matmul"), (
    rate(gc, "nn.attention"), rate(gc, "nn.matmul"))
print("cpu: attention FLOPs at their own, slower rate")


def busbw(trace, prefix, passes, n=2):
    """Bus bandwidth of rank 0's collectives named `prefix` (bytes moved
    per ring over their predicted time, latency included)."""
    moved = us = 0.0
    for e in trace["traceEvents"]:
        if (e.get("cat") == "comm" and e.get("pid") == 0 and
                e["name"].split()[0] == prefix):
            moved += passes * (n - 1) / n * e["args"]["bytes"]
            us += e["dur"]
    return moved / us


s2 = json.load(open(os.path.join(d, "s2.json")))
c2 = json.load(open(os.path.join(d, "c2.json")))
rs, ar = busbw(s2, "zero.reduce_scatter", 1), busbw(c2, "zero.all_reduce", 2)
assert 0 < rs < 0.9 * ar, (rs, ar)
print("cpu: reduce-scatters at their own, slower bus bandwidth")
names = [e["name"] for e in s2["traceEvents"]
         if e.get("pid") == 0 and e.get("ph") == "X"]
reductions = [i for i, x in enumerate(names)
              if x.startswith("zero.reduce_scatter")]
completions = [x for x in names if x.startswith("complete zero.reduce_scatter")]
assert reductions and len(completions) == len(reductions), names
print("cpu: each stage-2 reduce-scatter completes with an add")
