#!/usr/bin/env python3
"""Adafactor's exact optimizer state of a partitioned step, against the
report's.

torch.optim.Adafactor keeps, for a tensor of two or more dims, row_var and
col_var (the leading dims a batch: batch x (rows + cols) floats) and, for a
vector, one float per element. Under ZeRO a rank keeps the factors whole
of every tensor its shard touches and the variance of the vector elements
it holds; every rank plans the same buffer, the largest rank's. This
counts that from the step's zero.param shapes and zero.partition layouts
(the shard of stage s on n ranks: padded / n elements, the whole group at
stage 0) and compares its bytes with the report's model_state_breakdown
adafactor_v.

  adafactor_state.py STEP.mlir REPORT.json
"""

import json
import re
import sys


def main():
    text = open(sys.argv[1]).read()
    report = json.load(open(sys.argv[2]))
    shapes = {}
    for m in re.finditer(r"zero\.param @(\S+) : tensor<([0-9x]+)x[a-z0-9]+>"
                         r"(.*)", text):
        dims = [int(d) for d in m.group(2).split("x")]
        shapes[m.group(1)] = (dims, " frozen" in m.group(3))
    for m in re.finditer(r"zero\.param @(\S+) : tensor<([a-z0-9]+)>", text):
        shapes.setdefault(m.group(1), ([], False))
    total = 0
    for m in re.finditer(
            r"zero\.partition @\S+ stage (\d+) world_size (\d+) alignment \d+"
            r" numel (\d+) padded (\d+) params \[([^\]]*)\] offsets "
            r"\[([^\]]*)\]", text):
        stage, n, numel, padded = (int(m.group(i)) for i in range(1, 5))
        names = [p.strip().lstrip("@") for p in m.group(5).split(",")]
        offsets = [int(o) for o in m.group(6).split(",")]
        shard = numel if stage == 0 else padded // n
        worst = 0
        for r in range(1 if stage == 0 else n):
            begin, end = r * shard, min((r + 1) * shard, numel)
            count = 0
            for name, off in zip(names, offsets):
                dims, frozen = shapes[name]
                size = 1
                for d in dims:
                    size *= d
                lo, hi = max(begin, off), min(end, off + size)
                if frozen or lo >= hi:
                    continue
                if len(dims) >= 2:
                    batch = size // (dims[-2] * dims[-1])
                    count += batch * (dims[-2] + dims[-1])
                else:
                    count += hi - lo
            worst = max(worst, count)
        total += worst
    got = report["model_state_breakdown"].get("adafactor_v")
    if got != 4 * total:
        print("FAIL: the report's adafactor_v is %s bytes, the factored "
              "state is %d floats (%d bytes)" % (got, total, 4 * total))
        sys.exit(1)
    print("adafactor_v %d bytes == 4 x %d factored floats" % (got, total))


if __name__ == "__main__":
    main()
