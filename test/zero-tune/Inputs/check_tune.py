"""Checks zero-tune's JSON ranking against the compiler run by hand.

  check_tune.py TOOLS_DIR MODEL WORLD_SIZE HARDWARE BUDGET_BYTES TUNE.json
                [REMATS [OFFLOAD [HOST_BUDGET_BYTES]]]

- the candidates are ranked 1..n, fastest first, each within the budget;
- every candidate's ds_config, given to zero-opt's zero-pipeline with the
  world size, plans and costs exactly as zero-tune printed (peak_bytes,
  predicted_step_ms, exposed_comm_ms, and with offload searched
  host_peak_bytes, nvme_bytes and exposed_transfer_ms);
- no configuration of the search space at DeepSpeed's default knobs (every
  stage and accumulation, and every remat policy of the comma-separated
  REMATS, default none; every offload choice DeepSpeed allows up to the
  tier OFFLOAD, none, cpu or nvme=DIR, default none, the optimizer and
  the parameter shards both up to it, the NVMe swap files of either in DIR;
  the pipeline's defaults otherwise) that fits
  the budget (and HOST_BUDGET_BYTES, its host peak) is faster than the
  winner.

Prints one line per check group so that FileCheck sees them.
"""

import json
import os
import subprocess
import sys
import tempfile

tools, model, world, hardware, budget, tuned = sys.argv[1:7]
remats = sys.argv[7].split(",") if len(sys.argv) > 7 else ["none"]
offload = sys.argv[8] if len(sys.argv) > 8 else "none"
host_budget = int(sys.argv[9]) if len(sys.argv) > 9 else None
tier, _, nvme_path = offload.partition("=")
world, budget = int(world), int(budget)
tiers = ["none", "cpu", "nvme"][:["none", "cpu", "nvme"].index(tier) + 1]


def offload_choices(stage):
    """(optimizer, parameters) offload choices of the stage."""
    optimizers = tiers if stage >= 1 else ["none"]
    params = tiers if stage == 3 else ["none"]
    return [(o, p) for p in params for o in optimizers]


def offload_options(optimizer, param):
    if (optimizer, param) == ("none", "none"):
        return ""
    options = " offload-optimizer=%s offload-param=%s" % (optimizer, param)
    if optimizer == "nvme":
        options += " nvme-path=" + nvme_path
    if param == "nvme":
        options += " param-nvme-path=" + nvme_path
    return options
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
    if host_budget is not None:
        assert c["host_peak_bytes"] <= host_budget, c
    if tier != "none":
        zero = c["ds_config"]["zero_optimization"]
        for key in ("offload_optimizer", "offload_param"):
            device = zero.get(key, {}).get("device", "none")
            assert device == c[key], (c["rank"], key, device, c[key])
            # DeepSpeed reads nvme_path only beside device nvme.
            path = zero.get(key, {}).get("nvme_path")
            assert path == (nvme_path if device == "nvme" else None), (
                c["rank"], key, path)
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
        keys = ["peak_bytes", "predicted_step_ms", "exposed_comm_ms",
                "recompute_ms"]
        if tier != "none":
            keys += ["host_peak_bytes", "nvme_bytes", "exposed_transfer_ms"]
        for key in keys:
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
            for optimizer, param in offload_choices(stage):
                r = report("stage=%d world-size=%d "
                           "gradient-accumulation-steps=%d remat=%s%s" %
                           (stage, world, k, remat,
                            offload_options(optimizer, param)))
                if r["peak_bytes"] > budget or (
                        host_budget is not None and
                        r["host_peak_bytes"] > host_budget):
                    continue
                baselines += 1
                assert best <= r["predicted_step_ms"], (
                    stage, k, remat, optimizer, param, r)
print("the winner is no slower than %d fitting default configurations" %
      baselines)
