"""Checks each JSON report's predicted_step_band against ValidationBands.inc."""
import json
import re
import sys

bands = {}
for m in re.finditer(r'\{"([^"]+)", \{"([^"]+)", /\*runs=\*/(\d+), '
                     r'/\*minRatio=\*/([0-9.]+), /\*maxRatio=\*/([0-9.]+)\}\}',
                     open(sys.argv[1]).read()):
    bands[m.group(1)] = (m.group(2), int(m.group(3)), float(m.group(4)),
                         float(m.group(5)))
for path in sys.argv[2:]:
    r = json.load(open(path))
    band = r["predicted_step_band"]
    if r["hardware"] not in bands:
        assert band is None, (path, band)
        print("%s: no band" % r["hardware"])
        continue
    gpu, runs, lo, hi = bands[r["hardware"]]
    assert (band["gpu"], band["runs"]) == (gpu, runs), (path, band)
    assert abs(band["min_ratio"] - lo) < 1e-12, (path, band)
    assert abs(band["max_ratio"] - hi) < 1e-12, (path, band)
    step = r["predicted_step_ms"]
    assert abs(band["low_ms"] - step * lo) <= 1e-9 * step, (path, band)
    assert abs(band["high_ms"] - step * hi) <= 1e-9 * step, (path, band)
    assert band["low_ms"] <= band["high_ms"], (path, band)
    print("%s: %s band as generated; low_ms and high_ms are its ratios "
          "times the predicted step" % (r["hardware"], gpu))
