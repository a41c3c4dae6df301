#!/usr/bin/env python3
"""Records what a set of small trainings compute, bit for bit, and compares
two records: the check that a refactor kept every loss bit and byte.

  bit-baseline.py record OUT.json [--tools DIR] [--work DIR] [--only A,B]
  bit-baseline.py compare OLD.json NEW.json

`record` compiles each case below with the built tools, trains it for a few
steps on the bytes of test/Inputs/training-text.md under mpirun, and keeps,
per case: every step's loss and gradient norm as the log prints them (all
the digits of the value), the SHA-256 of the exported weights, and the
measured and planned peaks. `compare`
prints each field that differs and exits 1 if any does. Take a record on
main before a refactor and one after it, on the same machine.
"""

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "examples", "gpt2-tiny.mlir")

# name: (model, zero-compile options, ranks, steps). A model is a file of
# the repository or zero-model-gen's arguments (a list).
LLAMA = ["llama", "--layers", "2", "--hidden", "64", "--heads", "4",
         "--kv-heads", "2", "--ffn", "128", "--vocab", "256", "--seq", "32",
         "--batch", "8"]
CASES = {
    "gpt2-s0-w1": (TINY, "--stage 0 --world-size 1", 1, 3),
    "gpt2-s1-w2": (TINY, "--stage 1 --world-size 2", 2, 3),
    "gpt2-s2-w2": (TINY, "--stage 2 --world-size 2", 2, 3),
    "gpt2-s3-w4": (TINY, "--stage 3 --world-size 4", 4, 3),
    "gpt2-s3-w2-bf16": (TINY, "--stage 3 --world-size 2 --dtype bf16", 2, 3),
    "gpt2-s3-w2-offload": (TINY, "--stage 3 --world-size 2 "
                           "--offload-optimizer cpu --offload-param cpu", 2, 3),
    "gpt2-s3-w4-hpz-qwz": (TINY, "--stage 3 --world-size 4 --dtype bf16 "
                           "--hpz-partition-size 2 --quantized-weights", 4, 3),
    "gpt2-s2-w2-remat": (TINY, "--stage 2 --world-size 2 --remat layer", 2, 3),
    "llama-s3-w2": (LLAMA, "--stage 3 --world-size 2", 2, 3),
    "llama-lion-s2-w2": (LLAMA + ["--optimizer", "lion"],
                         "--stage 2 --world-size 2", 2, 3),
    "llama-sgd-s1-w2": (LLAMA + ["--optimizer", "sgd", "--momentum", "0.9"],
                        "--stage 1 --world-size 2", 2, 3),
    "llama-adafactor-s0-w1": (LLAMA + ["--optimizer", "adafactor"],
                              "--stage 0 --world-size 1", 1, 3),
    "llama-muon-s3-w2": (LLAMA + ["--optimizer", "muon"],
                         "--stage 3 --world-size 2", 2, 3),
}


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run(argv, cwd):
    p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("bit-baseline.py: `%s` failed (exit %d):\n%s%s" % (
            shlex.join(argv), p.returncode, p.stdout, p.stderr))
    return p.stdout


def tokens(work):
    """The training text's bytes as the uint16 token file train reads."""
    path = os.path.join(work, "tokens.bin")
    with open(os.path.join(ROOT, "test", "Inputs", "training-text.md"),
              "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(b"".join(b.to_bytes(2, "little") for b in data))
    return path


def record_case(name, tools, work, data, mpirun):
    model, options, ranks, steps = CASES[name]
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    if isinstance(model, list):
        path = os.path.join(d, "model.mlir")
        run([os.path.join(tools, "zero-model-gen")] + model + ["-o", path], d)
        model = path
    opts = shlex.split(options)
    run([os.path.join(tools, "zero-compile"), model] + opts + ["-o", "train"],
        d)
    out = run(mpirun + ["-np", str(ranks), "./train", "--steps", str(steps),
                        "--data", data, "--log-json", "log.json",
                        "--export", "weights.safetensors", "--quiet"], d)
    steps_logged = []
    with open(os.path.join(d, "log.json")) as f:
        for line in f:
            entry = json.loads(line)
            steps_logged.append({k: entry[k] for k in (
                "step", "loss", "grad_norm", "peak_bytes",
                "planned_peak_bytes") if k in entry})
    peak = [line for line in out.splitlines()
            if line.startswith("peak memory:")]
    return {"options": options, "ranks": ranks, "steps": steps_logged,
            "weights_sha256": sha256(os.path.join(d, "weights.safetensors")),
            "peak": peak}


def record(args):
    tools = os.path.abspath(args.tools)
    names = args.only.split(",") if args.only else list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        sys.exit("bit-baseline.py: no case %s (cases: %s)" % (
            ", ".join(unknown), ", ".join(CASES)))
    mpirun = [shutil.which("mpirun") or "mpirun", "--allow-run-as-root",
              "--oversubscribe"]
    work = args.work or tempfile.mkdtemp(prefix="bit-baseline-")
    os.makedirs(work, exist_ok=True)
    data = tokens(work)
    result = {}
    for name in names:
        result[name] = record_case(name, tools, work, data, mpirun)
        print("%s: %d steps, loss %r" % (
            name, len(result[name]["steps"]),
            result[name]["steps"][-1]["loss"]), file=sys.stderr)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write("\n")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def compare(args):
    with open(args.old) as f:
        old = json.load(f)
    with open(args.new) as f:
        new = json.load(f)
    differ = 0
    for name in sorted(set(old) | set(new)):
        if name not in old or name not in new:
            print("%s: only in %s" % (name, args.old if name in old
                                      else args.new))
            differ += 1
            continue
        for key in sorted(set(old[name]) | set(new[name])):
            if old[name].get(key) != new[name].get(key):
                print("%s: %s differs:\n  %s\n  %s" % (
                    name, key, json.dumps(old[name].get(key)),
                    json.dumps(new[name].get(key))))
                differ += 1
    if differ:
        print("%d field(s) differ" % differ)
        return 1
    print("%d cases: every loss, gradient norm, peak and weight bit equal"
          % len(old))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("record")
    r.add_argument("out")
    r.add_argument("--tools", default=os.path.join(ROOT, "build", "bin"))
    r.add_argument("--work", help="keep the programs and runs here")
    r.add_argument("--only", help="comma-separated case names")
    c = sub.add_parser("compare")
    c.add_argument("old")
    c.add_argument("new")
    args = p.parse_args()
    return record(args) if args.command == "record" else compare(args)


if __name__ == "__main__":
    sys.exit(main())
