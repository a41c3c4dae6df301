"""zero-estimate --zeropp's numbers are the compiler's: each option's row
equals the zero-report of the same model compiled under that option.

  zeropp_report.py ESTIMATE.json TOOLS MODEL PIPELINE HARDWARE

PIPELINE: the zero-pipeline options the estimate compiles with (stage,
ranks, dtype, buckets); each row adds its own.
"""

import json
import os
import subprocess
import sys

estimate, tools, model, pipeline, hardware = sys.argv[1:6]
rows = json.load(open(estimate))["zeropp"]
for row in rows:
    if row["error"]:
        print("%s: refused" % row["option"])
        continue
    report = json.loads(subprocess.run(
        [os.path.join(tools, "zero-opt"), model,
         "--zero-pipeline=%s %s" % (pipeline, row["pipeline"]),
         "--zero-report=format=json hardware=%s" % hardware,
         "-o", os.devnull], check=True, capture_output=True, text=True).stdout)
    ours = row["ours"]
    want = {
        "model_state_bytes": report["model_state_bytes"],
        "hpz_secondary_bytes": report["hpz_secondary_bytes"],
        "peak_bytes": report["peak_bytes"],
        "intra_node_bytes_per_rank":
            report["comm"]["intra_node_bytes_per_rank"],
        "inter_node_bytes_per_rank":
            report["comm"]["inter_node_bytes_per_rank"],
        "predicted_step_ms": report["predicted_step_ms"],
    }
    for key, value in want.items():
        if ours[key] != value:
            sys.exit("%s: %s is %r, zero-report says %r" %
                     (row["option"], key, ours[key], value))
    print("%s: as zero-report" % row["option"])
