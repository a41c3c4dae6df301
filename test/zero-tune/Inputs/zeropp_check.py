"""zero-tune --zeropp's candidates: DeepSpeed's rules, and each candidate's
ds_config compiled back to the plan the tuner printed.

  zeropp_check.py TUNE.json TOOLS MODEL WORLD RANKS_PER_NODE HARDWARE BW DIR

For every candidate of TUNE.json (zero-tune --format json): hpZ and MiCS
never together; the hpZ size divides the ranks per node; the MiCS shard
size is a divisor of the world between 1 and the world; qgZ only at stage 3
across nodes and never with MiCS; then its ds_config
is written to DIR, compiled by zero-compile --config, and the zero-report of
the compiled step must equal the candidate's peak, predicted step and bytes
across nodes exactly. Prints the ZeRO++ choices seen, best first.
"""

import json
import os
import subprocess
import sys

tune, tools, model, world, per_node, hardware, bw, out = sys.argv[1:9]
world, per_node = int(world), int(per_node)
candidates = json.load(open(tune))


def tool(name, *args):
    return subprocess.run([os.path.join(tools, name)] + list(args),
                          check=True, capture_output=True, text=True).stdout


seen = []
for c in candidates:
    h, m, q, g = c["hpz_partition_size"], c["mics_shard_size"], \
        c["quantized_weights"], c["quantized_gradients"]
    name = "+".join(["hpz%d" % h] * (h > 1) + ["mics%d" % m] * (m > 0) +
                    ["qwz"] * q + ["qgz"] * g) or "zero%d" % c["stage"]
    if h > 1 and m > 0:
        sys.exit("%s: hpZ and MiCS together" % name)
    if h > 1 and (c["stage"] != 3 or per_node % h):
        sys.exit("%s: hpZ %d does not divide %d ranks per node" %
                 (name, h, per_node))
    if m > 0 and (c["stage"] != 3 or not 1 < m < world or world % m):
        sys.exit("%s: MiCS %d is not a proper divisor of %d" %
                 (name, m, world))
    if g and (c["stage"] != 3 or m > 0 or per_node >= world):
        sys.exit("%s: qgZ on one node, with MiCS or below stage 3" % name)
    zero = c["ds_config"]["zero_optimization"]
    for key, value, on in (("zero_hpz_partition_size", h, h > 1),
                           ("mics_shard_size", m, m > 0),
                           ("zero_quantized_weights", q, q),
                           ("zero_quantized_gradients", g, g)):
        if zero.get(key) != (value if on else None):
            sys.exit("%s: ds_config %s is %r" % (name, key, zero.get(key)))
    config = os.path.join(out, "rank%d.json" % c["rank"])
    step = os.path.join(out, "rank%d.mlir" % c["rank"])
    with open(config, "w") as f:
        json.dump(c["ds_config"], f)
    tool("zero-compile", model, "--config", config, "--world-size",
         str(world), "--ranks-per-node", str(per_node), "--emit", "mlir",
         "-o", step)
    report = json.loads(tool(
        "zero-opt", step, "--zero-report=format=json hardware=%s "
        "inter-node-bandwidth=%s" % (hardware, bw), "-o", os.devnull))
    got = (report["peak_bytes"], report["predicted_step_ms"],
           report["comm"]["inter_node_bytes_per_rank"])
    want = (c["peak_bytes"], c["predicted_step_ms"],
            c["inter_node_bytes_per_rank"])
    if got != want:
        sys.exit("%s: compiled (peak, step, inter-node bytes) %r, tuned %r" %
                 (name, got, want))
    seen.append(name)
print("%d candidates compiled as tuned: %s" % (len(seen), " ".join(seen)))
