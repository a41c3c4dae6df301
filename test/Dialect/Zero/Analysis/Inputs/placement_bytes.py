"""Compares two zero-report JSONs of one MoE step, expert sets placed
contiguous (the first) and strided (the second): where each places the
all-to-alls and the expert replicas' reduce-scatters."""
import json
import sys

contiguous, strided = (json.load(open(p))["comm"]["bytes_by_kind"]
                       for p in sys.argv[1:3])


def split(kinds, kind):
    k = kinds.get(kind, {"intra_node": 0, "inter_node": 0})
    return k["intra_node"], k["inter_node"]


ci, cx = split(contiguous, "all_to_all")
si, sx = split(strided, "all_to_all")
if ci > 0 and cx == 0:
    print("contiguous all_to_all: intra > 0, inter 0")
else:
    print("contiguous all_to_all: intra %d, inter %d" % (ci, cx))
if si == 0 and sx == ci:
    print("strided all_to_all: intra 0, inter = contiguous intra")
else:
    print("strided all_to_all: intra %d, inter %d (contiguous intra %d)"
          % (si, sx, ci))
ri, rx = split(contiguous, "reduce_scatter")
qi, qx = split(strided, "reduce_scatter")
if ri == 0 and rx > 0 and qx == 0 and qi > 0:
    print("expert reduce_scatter: contiguous across nodes, strided within")
else:
    print("expert reduce_scatter: contiguous intra %d inter %d, strided "
          "intra %d inter %d" % (ri, rx, qi, qx))
print("same bytes by kind:", all(
    sum(split(contiguous, k)) == sum(split(strided, k))
    for k in set(contiguous) | set(strided)))
