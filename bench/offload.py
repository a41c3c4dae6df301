#!/usr/bin/env python3
"""The device-host copies of an offloaded optimizer (not a test; bench/run.sh
runs it).

With --transfer-bench BIN, first the copy path itself: zrt-bench-transfer
(runtime/bench/Transfer.cpp), the runtime's device::transfer between its
tensor and pinned host arenas against a plain memcpy of the same bytes,
1 MiB to 1 GiB; written to bench/results/transfer.json with the machine.

Then the exposed device-host transfer of an offloaded optimizer, measured
from the rank traces against the cost model's prediction.

For gpt2-tiny (examples/gpt2-tiny.mlir) at ZeRO stages 1-3 on 1 and 2
ranks: compile with `zero-compile --offload-optimizer cpu`, predict with
`zero-opt --zero-pipeline=... offload-optimizer=cpu --zero-report=
hardware=cpu` (`exposed_transfer_ms`, `predicted_step_ms`), and train with
mpirun, `--log-json` and `--trace`; the same configuration without offload
runs next to it in every round, for the step-time cost of offloading.
At stage 3 the parameter shards are offloaded too, without the optimizer:
`--offload-param cpu` (each shard staged to the device before its gather,
the new shard copied back after Adam) and `--offload-param nvme` (the same
through the rank's parameter swap file in the work directory: the read
from the file runs while the step computes, the copy out of the swap
buffer at its wait).

Measured exposed transfer: in each rank trace, per measured step span, the
time the compute thread spends in the copies and in waiting for them: the
copy spans (the CPU backend copies between its two arenas with a memcpy on
the calling thread, all of it exposed: the `copy to host` and
`copy to device` spans)
plus the `wait copy ...` spans (an asynchronous copy not yet complete when
the step needs it). The
share is that over the step span; medians over the measured steps and
ranks, then over rounds. Every configuration runs once per round, all of a
round back to back, the order alternating between rounds.

Writes bench/results/offload.json (or --out).
"""

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from e2e import finish, make_data, read_json_lines, run  # noqa: E402
from gather_once import add_output_options  # noqa: E402
from tune import machine  # noqa: E402


def loadavg():
    return open("/proc/loadavg").read().split()[:3]


def transfer_bench(binary, rounds, out):
    """zrt-bench-transfer's JSON with the machine and the load around it."""
    tmp = out + ".tmp"
    start = (time.strftime("%Y-%m-%d %H:%M", time.gmtime()), loadavg())
    print(run([binary, "--rounds", str(rounds), "--json", tmp]), end="")
    doc = json.load(open(tmp))
    os.remove(tmp)
    doc.update({"machine": machine(), "date": start[0], "loadavg": start[1],
                "loadavg_end": loadavg()})
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print("wrote " + out)


# The copies: the runtime records each zrt_ctx_transfer call (and each
# staging of a parameter shard) as a span named after its direction, each
# submission to a parameter swap file, and each wait for an asynchronous one
# (a swap-file transfer's wait has its own span for the time blocked on the
# file, `wait disk ...`, and a read's copy out of its swap buffer).
COPY_SPANS = ("copy to host", "copy to device", "copy params to host",
              "copy params to device", "read params from nvme",
              "write params to nvme", "disk read params", "disk write params")


def trace_transfer(trace_path, warmup):
    """Per measured step: (step span us, exposed transfer us inside it)."""
    events = [e for e in json.load(open(trace_path))["traceEvents"]
              if e.get("ph") == "X"]
    steps = sorted((e for e in events if e["name"].startswith("step ")),
                   key=lambda e: e["ts"])
    copies = [e for e in events
              if e["name"] in COPY_SPANS or
              (e["name"].startswith("wait ") and e["name"][5:] in COPY_SPANS)]
    out = []
    for s in steps[warmup:]:
        lo, hi = s["ts"], s["ts"] + s["dur"]
        t = sum(e["dur"] for e in copies if lo <= e["ts"] < hi)
        out.append((s["dur"], t))
    return out


def run_config(c, base, data, args):
    cmd = args.mpirun.split() + [
        "-np", str(c["world"]), c["exe"], "--quiet", "--steps",
        str(args.steps), "--threads", str(args.threads), "--log-json",
        base + ".log.json", "--trace", base + ".trace.json"] + data
    run(cmd)
    log = read_json_lines(base + ".log.json")
    step_ms = statistics.median(l["step_ms"] for l in log[args.warmup:])
    spans = []
    for rank in range(c["world"]):
        spans += trace_transfer(base + ".trace.rank%d.json" % rank,
                                args.warmup)
    return {"step_ms": step_ms,
            "transfer_ms": statistics.median(t / 1000.0 for d, t in spans),
            "transfer_share": statistics.median(t / d for d, t in spans
                                                if d > 0),
            "copies": sum(1 for d, t in spans if t > 0)}


def offload_name(optimizer, param):
    """How the tables name an offload choice."""
    if param == "none":
        return "optimizer %s" % optimizer if optimizer != "none" else "none"
    return "param %s" % param


def predict(opt, model, stage, world, optimizer, param, work):
    """The JSON report, with the time of all copies (exposed or not) that
    only the text report gives ("of X ms copying") as `copying_ms`."""
    doc = {}
    options = "offload-optimizer=%s offload-param=%s" % (optimizer, param)
    if param == "nvme":
        options += " param-nvme-path=%s" % work
    for fmt in ("json", "text"):
        out = os.path.join(work, "report-s%d-w%d-%s-%s.%s" % (
            stage, world, optimizer, param, fmt))
        run([opt, model, "--zero-pipeline=stage=%d world-size=%d %s" % (
                stage, world, options),
             "--zero-report=format=%s hardware=cpu out=%s" % (fmt, out),
             "-o", os.devnull])
        if fmt == "json":
            doc = json.load(open(out))
            doc = doc[0] if isinstance(doc, list) else doc
        else:
            m = re.search(r"of ([0-9.]+) ms copying", open(out).read())
            doc["copying_ms"] = float(m.group(1)) if m else 0.0
    return doc


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    add_output_options(p, "offload.json")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--worlds", default="1,2")
    p.add_argument("--stages", default="1,2,3")
    p.add_argument("--threads", type=int, default=1,
                   help="OpenMP threads per rank")
    p.add_argument("--mpirun",
                   default="mpirun --allow-run-as-root --oversubscribe")
    p.add_argument("--keep", help="keep the work directory here")
    p.add_argument("--transfer-bench", help="zrt-bench-transfer to run first")
    p.add_argument("--transfer-rounds", type=int, default=21)
    args = p.parse_args()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    if args.transfer_bench:
        transfer_bench(args.transfer_bench, args.transfer_rounds,
                       os.path.join(os.path.dirname(args.out),
                                    "transfer.json"))
    start = (time.strftime("%Y-%m-%d %H:%M", time.gmtime()), loadavg())

    bindir = os.path.join(args.build, "bin")
    compiler = os.path.join(bindir, "zero-compile")
    opt = os.path.join(bindir, "zero-opt")
    work = args.keep or tempfile.mkdtemp(prefix="zero-offload-")
    os.makedirs(work, exist_ok=True)
    data = make_data(work)["gpt2-tiny"]
    model = os.path.join(ROOT, "examples", "gpt2-tiny.mlir")

    configs = []
    for world in [int(w) for w in args.worlds.split(",")]:
        for stage in [int(s) for s in args.stages.split(",")]:
            choices = [("cpu", "none"), ("none", "none")]
            if stage == 3:
                choices += [("none", "cpu"), ("none", "nvme")]
            for optimizer, param in choices:
                exe = os.path.join(work, "gpt2-tiny-s%d-w%d-%s-%s" % (
                    stage, world, optimizer, param))
                cmd = [compiler, model, "--stage", str(stage),
                       "--world-size", str(world), "--offload-optimizer",
                       optimizer, "--offload-param", param, "-o", exe]
                if param == "nvme":
                    cmd += ["--param-nvme-path", work]
                run(cmd)
                report = predict(opt, model, stage, world, optimizer, param,
                                 work)
                configs.append({"stage": stage, "world": world,
                                "offload": offload_name(optimizer, param),
                                "exe": exe, "report": report, "runs": []})
    print("compiled %d configurations in %s" % (len(configs), work))

    for r in range(args.rounds):
        order = configs if r % 2 == 0 else list(reversed(configs))
        for c in order:
            base = "%s-r%d" % (c["exe"], r)
            c["runs"].append(run_config(c, base, data, args))
            x = c["runs"][-1]
            print("round %d stage %d world %d offload %-13s: %.3f ms, "
                  "transfers %.3f ms (%.1f%%)" % (
                      r, c["stage"], c["world"], c["offload"], x["step_ms"],
                      x["transfer_ms"], 100 * x["transfer_share"]),
                  flush=True)

    results = []
    for c in configs:
        if c["offload"] == "none":
            continue
        twin = next(t for t in configs if t["offload"] == "none" and
                    (t["stage"], t["world"]) == (c["stage"], c["world"]))
        if any(x["copies"] == 0 for x in c["runs"]):
            raise SystemExit("no transfer spans in the traces of stage %d, "
                             "world %d, offload %s: are the runtime's copy "
                             "spans (COPY_SPANS) there?" % (
                                 c["stage"], c["world"], c["offload"]))
        rep = c["report"]
        measured = statistics.median(x["transfer_ms"] for x in c["runs"])
        results.append({
            "model": "gpt2-tiny", "stage": c["stage"], "world": c["world"],
            "offload": c["offload"],
            "nvme_bytes": rep.get("nvme_bytes", 0),
            "measured_step_ms": statistics.median(x["step_ms"]
                                                  for x in c["runs"]),
            "measured_step_ms_no_offload": statistics.median(
                x["step_ms"] for x in twin["runs"]),
            "offload_over_no_offload": statistics.median(
                a["step_ms"] / b["step_ms"]
                for a, b in zip(c["runs"], twin["runs"])),
            "transfer_ms": measured,
            "transfer_share": statistics.median(x["transfer_share"]
                                                for x in c["runs"]),
            "transfer_ms_per_round": [x["transfer_ms"] for x in c["runs"]],
            "host_peak_bytes": rep["host_peak_bytes"],
            "predicted_step_ms": rep["predicted_step_ms"],
            "predicted_exposed_transfer_ms": rep["exposed_transfer_ms"],
            "predicted_copying_ms": rep["copying_ms"],
            "predicted_share": rep["exposed_transfer_ms"] /
            rep["predicted_step_ms"],
            "measured_over_predicted": measured / rep["exposed_transfer_ms"]
            if rep["exposed_transfer_ms"] > 0 else None})
    doc = {"threads_per_rank": args.threads, "steps": args.steps,
           "warmup": args.warmup, "rounds": args.rounds,
           "mpirun": args.mpirun, "machine": machine(), "date": start[0],
           "loadavg": start[1], "loadavg_end": loadavg(),
           "results": results}
    finish(args, doc, work)


if __name__ == "__main__":
    main()
