"""zero-tune's best candidate against what its ds_config compiled to.

  compare_best.py TUNE.json REPORT.json [LOG.jsonl [SWAP_DIR]]

REPORT.json: zero-report of the step zero-compile --config scheduled;
LOG.jsonl: the --log-json of the compiled executable, whose measured peak at
every step must be the tuner's peak (and, with offload, its measured host
peak the tuner's host peak); SWAP_DIR: the ds_config's nvme_path after the
run, where each rank's swap files (zero-optimizer.rankN.swp,
zero-params.rankN.swp) must add up to the tuner's nvme_bytes. Exact equality
throughout.
"""

import collections
import json
import os
import re
import sys

best = json.load(open(sys.argv[1]))[0]
report = json.load(open(sys.argv[2]))
keys = ["peak_bytes", "predicted_step_ms", "exposed_comm_ms", "recompute_ms",
        "stage", "gradient_accumulation_steps"]
# Searched with --offload: the offload's bytes and transfers too.
offload = "host_peak_bytes" in best
if offload:
    keys += ["host_peak_bytes", "nvme_bytes", "exposed_transfer_ms"]
for key in keys:
    if report[key] != best[key]:
        sys.exit("%s: compiled %r, tuned %r" % (key, report[key], best[key]))
print("compiled: remat %s, peak %d, predicted step %r ms, as tuned" %
      (best["remat"], report["peak_bytes"], report["predicted_step_ms"]))
if offload:
    print("compiled: offload_optimizer %s, offload_param %s, host peak %d, "
          "NVMe %d bytes, as tuned" %
          (best["offload_optimizer"], best["offload_param"],
           report["host_peak_bytes"], report["nvme_bytes"]))
if len(sys.argv) > 3:
    log = [json.loads(line) for line in open(sys.argv[3])]
    for line in log:
        if line["peak_bytes"] != best["peak_bytes"]:
            sys.exit("step %d: measured peak %d, tuned %d" %
                     (line["step"], line["peak_bytes"], best["peak_bytes"]))
        if offload and line["host_peak_bytes"] != best["host_peak_bytes"]:
            sys.exit("step %d: measured host peak %d, tuned %d" %
                     (line["step"], line["host_peak_bytes"],
                      best["host_peak_bytes"]))
    print("measured: peak %d at each of %d steps" %
          (best["peak_bytes"], len(log)))
    if offload:
        print("measured: host peak %d at each of %d steps" %
              (best["host_peak_bytes"], len(log)))
if len(sys.argv) > 4:
    sizes = collections.Counter()
    for name in os.listdir(sys.argv[4]):
        m = re.fullmatch(r"zero-(optimizer|params)\.rank(\d+)\.swp", name)
        if not m:
            sys.exit("unexpected file %s in the swap directory" % name)
        sizes[int(m.group(2))] += os.stat(
            os.path.join(sys.argv[4], name)).st_size
    if not sizes or set(sizes.values()) != {best["nvme_bytes"]}:
        sys.exit("swap files per rank: %r bytes, tuned %d" %
                 (dict(sizes), best["nvme_bytes"]))
    print("measured: swap files %d x %d bytes" %
          (len(sizes), best["nvme_bytes"]))
