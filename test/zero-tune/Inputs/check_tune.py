"""Checks zero-tune's JSON ranking against the compiler run by hand.

  check_tune.py TOOLS_DIR MODEL WORLD_SIZE HARDWARE BUDGET_BYTES TUNE.json
                [REMATS]

- the candidates are ranked 1..n, fastest first, each within the budget;
- every candidate's ds_config, given to zero-opt's zero-pipeline with the
  world size, plans and costs exactly as zero-tune printed (peak_bytes,
  predicted_step_ms, exposed_comm_ms);
- no configuration of the search space at DeepSpeed's default knobs (every
  stage and accumulation, and every remat policy of the comma-separated
  REMATS, default none; the pipeline's defaults otherwise) that fits the
  budget is faster than the winner.

Prints one line per check group so that FileCheck sees them.
"""

import json
import os
import subprocess
import sys
import tempfile

tools, model, world, hardware, budget, tuned = sys.argv[1:7]
remats = sys.argv[7].split(",") if len(sys.argv) > 7 else ["none"]
world, budget = int(world), int(budget)
zero_opt = os.path.join(tools, "zero-opt")
ranked = json.load(open(tuned))


def report(pipeline):
    out = subprocess.run(
        [zero_opt, model, "--zero-pipeline=" + pipeline,
         "--zero-report=format=json hardware=" + hardware, "-o", os.devnull],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)


assert ranked, "no candidates"
assert [c["rank"] for c in ranked] == list(range(1, len(ranked) + 1))
times = [c["predicted_step_ms"] for c in ranked]
assert times == sorted(times), "not fastest first: %s" % times
for c in ranked:
    assert c["peak_bytes"] <= budget, c
    assert c["ds_config"]["zero_optimization"]["stage"] == c["stage"]
    granularity = c["ds_config"].get("activation_checkpointing", {}).get(
        "recompute_granularity")
    assert granularity == {"none": None, "selective": "selective",
                           "layer": "full"}[c["remat"]], c
print("ranked %d candidates, fastest first, within the budget" % len(ranked))

with tempfile.TemporaryDirectory() as tmp:
    for c in ranked:
        path = os.path.join(tmp, "ds_config.json")
        with open(path, "w") as f:
            json.dump(c["ds_config"], f)
        r = report("config=%s world-size=%d" % (path, world))
        # zero-report leaves out a recompute time of 0.
        r.setdefault("recompute_ms", 0)
        for key in ("peak_bytes", "predicted_step_ms", "exposed_comm_ms",
                    "recompute_ms"):
            assert r[key] == c[key], (c["rank"], key, r[key], c[key])
        assert r["stage"] == c["stage"]
        assert r["gradient_accumulation_steps"] == \
            c["gradient_accumulation_steps"]
print("every ds_config reproduces its peak and predicted step")

batch = ranked[0]["ds_config"]["train_batch_size"]
best = ranked[0]["predicted_step_ms"]
baselines = 0
for stage in range(4):
    for k in range(1, batch // world + 1):
        if (batch // world) % k:
            continue
        for remat in remats:
            r = report("stage=%d world-size=%d gradient-accumulation-steps=%d "
                       "remat=%s" % (stage, world, k, remat))
            if r["peak_bytes"] <= budget:
                baselines += 1
                assert best <= r["predicted_step_ms"], (stage, k, remat, r)
print("the winner is no slower than %d fitting default configurations" %
      baselines)
