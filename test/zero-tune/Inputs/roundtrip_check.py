"""zero-tune's ds_configs read back: each candidate's config compiles to the
plan the tuner ranked, and -o wrote the first candidate's.

  roundtrip_check.py TUNE.json BEST.json TOOLS MODEL WORLD RANKS_PER_NODE
                     HARDWARE BW DIR KEYS

For every candidate of TUNE.json (zero-tune --format json): its ds_config
is written to DIR and compiled by zero-compile --config, which must print
nothing (a key the reader does not know is a warning), and the zero-report
of the compiled step must equal the candidate's numbers exactly. BEST.json
(zero-tune -o) must be the first candidate's ds_config. The path of every
key written (section.key) is appended to KEYS, one a line.
"""

import json
import os
import subprocess
import sys

tune, best, tools, model, world, per_node, hardware, bw, out, keys = \
    sys.argv[1:11]
candidates = json.load(open(tune))
if json.load(open(best)) != candidates[0]["ds_config"]:
    sys.exit("-o wrote another config than the first candidate's")


def tool(name, *args):
    run = subprocess.run([os.path.join(tools, name)] + list(args),
                         capture_output=True, text=True)
    if run.returncode or run.stderr:
        sys.exit("%s %s:\n%s" % (name, " ".join(args), run.stderr))
    return run.stdout


def paths(value, prefix=""):
    for key, v in value.items():
        yield prefix + key
        if isinstance(v, dict):
            yield from paths(v, prefix + key + ".")


written = set()
for c in candidates:
    config = os.path.join(out, "rank%d.json" % c["rank"])
    step = os.path.join(out, "rank%d.mlir" % c["rank"])
    with open(config, "w") as f:
        json.dump(c["ds_config"], f)
    written.update(paths(c["ds_config"]))
    tool("zero-compile", model, "--config", config, "--world-size", world,
         "--ranks-per-node", per_node, "--emit", "mlir", "-o", step)
    options = "format=json hardware=%s" % hardware
    if bw != "-":
        options += " inter-node-bandwidth=%s" % bw
    report = json.loads(tool("zero-opt", step, "--zero-report=" + options,
                             "-o", os.devnull))
    names = ["stage", "gradient_accumulation_steps", "peak_bytes",
             "predicted_step_ms", "exposed_comm_ms", "recompute_ms"]
    if "host_peak_bytes" in c:
        names += ["host_peak_bytes", "nvme_bytes", "exposed_transfer_ms"]
    for name in names:
        if report[name] != c[name]:
            sys.exit("rank %d: %s compiled %r, tuned %r" %
                     (c["rank"], name, report[name], c[name]))
    if "inter_node_bytes_per_rank" in c and \
            report["comm"]["inter_node_bytes_per_rank"] != \
            c["inter_node_bytes_per_rank"]:
        sys.exit("rank %d: inter-node bytes compiled %r, tuned %r" %
                 (c["rank"], report["comm"]["inter_node_bytes_per_rank"],
                  c["inter_node_bytes_per_rank"]))
with open(keys, "a") as f:
    f.writelines(k + "\n" for k in sorted(written))
print("%d candidates compiled as tuned" % len(candidates))
