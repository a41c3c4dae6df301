"""Checks zero-tune's pick against the validation band of ValidationBands.inc:
with a band, the first candidate has the smallest peak of those whose
predicted steps and the fastest's lie within each other's band; without one, the ranking is fastest
first."""
import json
import re
import sys

bands = {}
for m in re.finditer(r'\{"([^"]+)", \{"[^"]+", /\*runs=\*/\d+, '
                     r'/\*minRatio=\*/([0-9.]+), /\*maxRatio=\*/([0-9.]+)\}\}',
                     open(sys.argv[1]).read()):
    bands[m.group(1)] = (float(m.group(2)), float(m.group(3)))
args = sys.argv[2:]
for preset, path in zip(args[::2], args[1::2]):
    ranked = json.load(open(path))
    times = [c["predicted_step_ms"] for c in ranked]
    if preset not in bands:
        assert times == sorted(times), times
        print("%s: no band, fastest first" % preset)
        continue
    lo, hi = bands[preset]
    fastest = min(ranked, key=lambda c: c["predicted_step_ms"])
    within = [c for c in ranked
              if c["predicted_step_ms"] <= fastest["predicted_step_ms"] * hi
              and c["predicted_step_ms"] * lo <= fastest["predicted_step_ms"]]
    assert ranked[0]["peak_bytes"] == min(c["peak_bytes"] for c in within), (
        ranked[0], within)
    assert ranked[0] is not fastest, "the band changed nothing"
    # The others stay fastest first.
    assert times[1:] == sorted(times[1:]), times
    print("%s: the first of %d has the smallest peak of the %d within the band "
          "of the fastest, stage %d" % (preset, len(ranked), len(within),
                                        fastest["stage"]))
