"""Checks zero-tune's model-state pruning against the planner, with offload.

  check_states.py TOOLS_DIR MODEL WORLD_SIZE HARDWARE BUDGET_BYTES
                  HOST_BUDGET_BYTES|- SUMMARY [OFFLOAD]

SUMMARY holds zero-tune's summary line (stderr with --format json) of a
search with --offload OFFLOAD: cpu (the default) or nvme=DIR, the search's
--nvme-path. Each (stage, offload) choice DeepSpeed allows up to that tier
(the optimizer at stages 1-3, the parameter shards at stage 3) is planned
by zero-opt at its defaults; the choices whose persistent device bytes
exceed the budget, or whose host states exceed the host budget, are the
ones the tuner may skip, and it must skip exactly those at every
accumulation: skipping more would drop a configuration that can fit. The
host states are the planned host peak: the offloaded states and, with the
optimizer states or the parameter shards on NVMe, their swap buffers.
"""

import json
import os
import re
import subprocess
import sys

tools, model, world, hardware, budget, host_budget, summary = sys.argv[1:8]
tier, _, nvme_path = (sys.argv[8] if len(sys.argv) > 8 else "cpu").partition(
    "=")
tiers = ["none", "cpu", "nvme"][:["none", "cpu", "nvme"].index(tier) + 1]
world, budget = int(world), int(budget)
host_budget = None if host_budget == "-" else int(host_budget)
zero_opt = os.path.join(tools, "zero-opt")

choices = []
for stage in range(4):
    for param in (tiers if stage == 3 else ["none"]):
        for optimizer in (tiers if stage >= 1 else ["none"]):
            choices.append((stage, optimizer, param))

over = []
for stage, optimizer, param in choices:
    pipeline = "stage=%d world-size=%d offload-optimizer=%s offload-param=%s" % (
        stage, world, optimizer, param)
    if optimizer == "nvme":
        pipeline += " nvme-path=" + nvme_path
    if param == "nvme":
        pipeline += " param-nvme-path=" + nvme_path
    out = subprocess.run(
        [zero_opt, model, "--zero-pipeline=" + pipeline,
         "--zero-report=format=json hardware=" + hardware, "-o", os.devnull],
        check=True, capture_output=True, text=True).stdout
    r = json.loads(out)
    host_states = r["host_peak_bytes"]
    if r["persistent_bytes"] > budget or (
            host_budget is not None and host_states > host_budget):
        over.append((stage, optimizer, param))

line = open(summary).read()
m = re.search(r"in (\d+) groups .*: (\d+) skipped by their model states", line)
assert m, line
groups, skipped = int(m.group(1)), int(m.group(2))
assert groups % len(choices) == 0, (groups, len(choices))
accumulations = groups // len(choices)
assert skipped == len(over) * accumulations, (skipped, over, accumulations)
print("%d groups skipped: the %d of %d (stage, offload) choices over the "
      "budgets, at each of %d accumulations" %
      (skipped, len(over), len(choices), accumulations))
print("over: " + ", ".join("%d/%s/%s" % c for c in over))
