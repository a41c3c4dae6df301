import json
import os
import sys

d = sys.argv[1]


def get(name):
    r = json.load(open(os.path.join(d, name + ".json")))
    return r["predicted_step_ms"] - r["exposed_comm_ms"]


c1, c2, c4, c8 = get("c1"), get("c2"), get("c4"), get("c8")
assert c1 * 2 < c2, (c1, c2)
print("cpu: 1 rank faster than 2 by more than 2x")
assert c8 > c4, (c4, c8)
print("cpu: 8 ranks slower than 4")
g1, g2 = get("g1"), get("g2")
assert abs(g1 - g2) <= 0.05 * g1, (g1, g2)
print("h100-sxm: compute independent of the world size")
