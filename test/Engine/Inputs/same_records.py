"""same_records.py A.json B.json: every step's record of two --log-json
files is the same, bit for bit (the wall time aside)."""

import json
import sys

a, b = ([json.loads(line) for line in open(p)] for p in sys.argv[1:3])
assert len(a) == len(b) > 0, (len(a), len(b))
for x, y in zip(a, b):
    for key in x:
        if key != "step_ms":
            assert x[key] == y.get(key), (x["step"], key, x[key], y.get(key))
print("same records:", len(a), "steps; losses", a[0]["loss"], "...",
      a[-1]["loss"])
