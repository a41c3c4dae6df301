#!/usr/bin/env python3
"""The largest GPT-2 that trains on one GPU with each offload mode, and its
step time (issue 19's GPU benchmark).

    offload_capacity.py plan    [--bin DIR] [budgets] [family] -o SIZES.json
    offload_capacity.py compile --sizes SIZES.json --out DIR [--bin DIR]
    offload_capacity.py run     --sizes SIZES.json --programs DIR
                                --data TOKENS --results DIR [--modes ...]

plan (no GPU): for each mode (none; optimizer cpu; optimizer nvme;
parameters and optimizer cpu; parameters and optimizer nvme; all at stage
3 on one rank, the only stage where parameters can be offloaded, so the
modes differ in nothing else) finds by bisection the most layers L of the
family whose plan, zero-opt's --zero-report of the same pipeline that
zero-compile builds, fits all three budgets: peak_bytes the device's
memory, host_peak_bytes (pinned host arena) the host's and nvme_bytes (the
swap files) the disk's, each minus a reserve; it records the plan of L and
of L + 1, which exceeds at least one. The family is GPT-2 at GPT-2 XL's
width (hidden 1600, 25 heads, vocab 50257, seq 1024, batch 4) with every
transformer block recomputed in the backward (remat layer) and a growing
number of layers: GPT-2 because it is the model the CUDA backend's kernels
and benchmarks are checked on (bench/gpu/run.sh, gpu-verify.py), layers
only because the model states then grow by one block's 30.7M parameters per
step of the search while the activations of a step (one block's, recomputed)
stay put, so the peak grows with L and the largest L is well defined, and
remat because without it the activations, not the model states that
offload moves, would decide the size.

compile: zero-compile --target cuda (--target) of each chosen size (NVMe swap files in
./nvme of the directory the program runs in), checked against the plan.

run (on the GPU): trains each mode's program --steps steps (after --warmup
untimed ones) in a directory of its own under --work (where the NVMe swap
files go: give a directory on the disk to measure), and merges into
RESULTS/gpu_offload.json per mode: the median step time, tokens/s, measured
device and host peaks and swap-file bytes against the plan. A mode whose
swap files do not fit the free space of --work, or that exits non-zero or
runs past --timeout, is recorded as such.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

MODES = [
    ("none", []),
    ("opt_cpu", ["--offload-optimizer", "cpu"]),
    ("opt_nvme", ["--offload-optimizer", "nvme", "--nvme-path", "nvme"]),
    ("both_cpu", ["--offload-param", "cpu", "--offload-optimizer", "cpu"]),
    ("both_nvme", ["--offload-param", "nvme", "--offload-optimizer", "nvme",
                   "--nvme-path", "nvme"]),
]
LABELS = {"none": "no offload", "opt_cpu": "optimizer cpu",
          "opt_nvme": "optimizer nvme", "both_cpu": "params + optimizer cpu",
          "both_nvme": "params + optimizer nvme"}
UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
         "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def size(text):
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([A-Za-z]*)", text.strip())
    if not m or m.group(2).lower() not in UNITS:
        raise argparse.ArgumentTypeError(
            "'%s' is not a size (bytes, or a number with KB, MB, GB, TB, KiB, "
            "MiB, GiB or TiB)" % text)
    return int(float(m.group(1)) * UNITS[m.group(2).lower()])


def pipeline_of(flags, stage, remat, target):
    """zero-compile's offload flags as zero-pipeline options (its --target
    too: the cuda target pads a 16-bit step's vocabulary)."""
    opts = ["stage=%d" % stage, "world-size=1", "remat=" + remat,
            "target=" + target]
    for flag, value in zip(flags[::2], flags[1::2]):
        opts.append("%s=%s" % (flag.lstrip("-"), value))
    return " ".join(opts)


def gen_args(family, layers):
    return ["gpt2", "--layers", str(layers), "--hidden", str(family["hidden"]),
            "--heads", str(family["heads"]), "--vocab", str(family["vocab"]),
            "--seq", str(family["seq"]), "--batch", str(family["batch"]),
            "--dtype", family["dtype"]]


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode:
        sys.exit("offload_capacity: %s failed (exit %d):\n%s" % (
            " ".join(cmd), p.returncode, p.stderr[-2000:]))
    return p.stdout


def plan_of(args, family, flags, layers, work):
    """zero-opt's report of the mode's pipeline on the family's L layers."""
    model = os.path.join(work, "gpt2_%d.mlir" % layers)
    if not os.path.exists(model):
        run([os.path.join(args.bin, "zero-model-gen")] +
            gen_args(family, layers) + ["-o", model])
    out = run([os.path.join(args.bin, "zero-opt"), model,
               "--zero-pipeline=" + pipeline_of(flags, family["stage"],
                                                family["remat"],
                                                family.get("target", "cuda")),
               "--zero-report=format=json", "-o", os.devnull])
    r = json.loads(out[out.index("{"):])
    return {"layers": layers, "param_count": r["param_count"],
            "peak_bytes": r["peak_bytes"],
            "host_peak_bytes": r.get("host_peak_bytes", 0),
            "nvme_bytes": r.get("nvme_bytes", 0)}


def exceeds(p, budgets):
    """The budgets plan p exceeds."""
    return [k for k, key in (("device", "peak_bytes"),
                             ("host", "host_peak_bytes"),
                             ("nvme", "nvme_bytes"))
            if p[key] > budgets[k]]


def cmd_plan(args):
    family = {"model": "gpt2", "hidden": args.hidden, "heads": args.heads,
              "vocab": args.vocab, "seq": args.seq, "batch": args.batch,
              "dtype": args.dtype, "stage": 3, "remat": args.remat,
              "target": args.target}
    budgets = {"device": args.device_memory - args.device_reserve,
               "host": args.host_memory - args.host_reserve,
               "nvme": args.nvme_bytes - args.nvme_reserve}
    if min(budgets.values()) <= 0:
        sys.exit("offload_capacity: a reserve is not below its memory: %r"
                 % budgets)
    modes = []
    work = tempfile.mkdtemp()
    try:
        for mode, flags in MODES:
            if args.modes and mode not in args.modes:
                continue
            fits = lambda n: not exceeds(plan_of(args, family, flags, n, work),
                                         budgets)
            if not fits(1):
                p = plan_of(args, family, flags, 1, work)
                modes.append({"mode": mode, "flags": flags, "layers": 0,
                              "next": dict(p, exceeds=exceeds(p, budgets))})
                print("%-10s no size fits: 1 layer exceeds %s" % (
                    mode, ", ".join(exceeds(p, budgets))))
                continue
            lo, hi = 1, 2
            while fits(hi):
                lo, hi = hi, hi * 2
                if hi > args.max_layers:
                    sys.exit("offload_capacity: %s: %d layers still fit; "
                             "raise --max-layers" % (mode, lo))
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if fits(mid) else (lo, mid)
            best = plan_of(args, family, flags, lo, work)
            nxt = plan_of(args, family, flags, lo + 1, work)
            nxt["exceeds"] = exceeds(nxt, budgets)
            modes.append(dict(best, mode=mode, flags=flags, next=nxt))
            print("%-10s %4d layers, %d params: device %d, host %d, "
                  "nvme %d bytes; %d layers exceed %s" % (
                      mode, lo, best["param_count"], best["peak_bytes"],
                      best["host_peak_bytes"], best["nvme_bytes"], lo + 1,
                      ", ".join(nxt["exceeds"])))
    finally:
        shutil.rmtree(work)
    doc = {"family": family, "budgets": budgets,
           "memory": {"device": args.device_memory, "host": args.host_memory,
                      "nvme": args.nvme_bytes},
           "reserve": {"device": args.device_reserve,
                       "host": args.host_reserve, "nvme": args.nvme_reserve},
           "modes": modes}
    with open(args.output, "w") as f:
        json.dump(doc, f, indent=1)


def cmd_compile(args):
    doc = json.load(open(args.sizes))
    family = doc["family"]
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp()
    try:
        for m in doc["modes"]:
            if not m["layers"]:
                continue
            model = os.path.join(work, "model.mlir")
            run([os.path.join(args.bin, "zero-model-gen")] +
                gen_args(family, m["layers"]) + ["-o", model])
            prog = os.path.join(args.out, m["mode"])
            run([os.path.join(args.bin, "zero-compile"), "--target",
                 args.target,
                 model, "--stage", str(family["stage"]), "--world-size", "1",
                 "--remat", family["remat"], "-o", prog] + m["flags"])
            plan = json.loads(run([prog, "--print-manifest"]))["plan"]
            got = (plan["peak_bytes"], plan.get("host_bytes", 0),
                   plan.get("nvme_bytes", 0))
            want = (m["peak_bytes"], m["host_peak_bytes"], m["nvme_bytes"])
            if got != want:
                sys.exit("offload_capacity: %s: the program plans %r, the "
                         "report %r (planned for --target %s)" % (
                             m["mode"], got, want,
                             family.get("target", "cuda")))
            print("compiled %s: %d layers" % (prog, m["layers"]))
    finally:
        shutil.rmtree(work)


def cmd_run(args):
    doc = json.load(open(args.sizes))
    family = doc["family"]
    os.makedirs(args.results, exist_ok=True)
    out_path = os.path.join(args.results, "gpu_offload.json")
    results = json.load(open(out_path)) if os.path.exists(out_path) else {}
    results.update({"family": family, "budgets": doc["budgets"],
                    "memory": doc["memory"], "reserve": doc["reserve"],
                    "steps": args.steps, "warmup": args.warmup})
    by_mode = results.setdefault("modes", {})
    os.makedirs(args.work, exist_ok=True)
    failed = []
    for m in doc["modes"]:
        mode = m["mode"]
        if args.modes and mode not in args.modes:
            continue
        entry = {k: m[k] for k in ("layers", "peak_bytes", "host_peak_bytes",
                                   "nvme_bytes") if k in m}
        entry["param_count"] = m.get("param_count")
        entry["next"] = m.get("next")
        by_mode[mode] = entry
        # Absolute: each runs in a directory of its own.
        prog = os.path.abspath(os.path.join(args.programs, mode))
        if not m["layers"] or not os.path.exists(prog):
            entry["skipped"] = "no size fits" if not m["layers"] else \
                "no program " + prog
            continue
        work = os.path.abspath(os.path.join(args.work, "offload_" + mode))
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(os.path.join(work, "nvme"))
        # tmpfs would hold the swap files in host memory, not on a disk.
        entry["work_fs"] = subprocess.run(
            ["stat", "-f", "-c", "%T", work], stdout=subprocess.PIPE,
            universal_newlines=True).stdout.strip()
        st = os.statvfs(work)
        free = st.f_bavail * st.f_frsize
        if m["nvme_bytes"] > free:
            entry["skipped"] = ("swap files of %d bytes, %d free in %s" %
                                (m["nvme_bytes"], free, args.work))
            print("%s: skipped: %s" % (mode, entry["skipped"]))
            shutil.rmtree(work)
            continue
        log = os.path.join(work, "log.jsonl")
        start = time.time()
        try:
            p = subprocess.run(
                [prog, "--steps", str(args.warmup + args.steps), "--data",
                 os.path.abspath(args.data), "--log-json", log, "--quiet"],
                cwd=work,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                universal_newlines=True, timeout=args.timeout)
            rc, text = p.returncode, p.stdout
        except subprocess.TimeoutExpired as e:
            rc, text = "timeout", (e.stdout or "")
            if isinstance(text, bytes):
                text = text.decode(errors="replace")
        entry["wall_s"] = round(time.time() - start, 1)
        swap = {f: os.stat(os.path.join(work, "nvme", f)).st_size
                for f in os.listdir(os.path.join(work, "nvme"))}
        lines = [json.loads(l) for l in open(log)] \
            if os.path.exists(log) else []
        shutil.rmtree(work)
        if rc != 0:
            entry["failed"] = "exit %s after %d steps: %s" % (
                rc, len(lines), text.strip()[-500:])
            failed.append(mode)
            print("%s: FAILED: %s" % (mode, entry["failed"]))
            continue
        timed = lines[args.warmup:]
        ms = [l["step_ms"] for l in timed]
        median = statistics.median(ms)
        entry.update({
            "step_ms_median": median, "step_ms": ms,
            "tokens_per_s": family["batch"] * family["seq"] / (median / 1e3),
            "loss_first": lines[0]["loss"], "loss_last": lines[-1]["loss"],
            "measured_peak_bytes": max(l["peak_bytes"] for l in lines),
            "measured_host_peak_bytes": max(l.get("host_peak_bytes", 0)
                                            for l in lines),
            "swap_file_bytes": sum(swap.values())})
        same = (entry["measured_peak_bytes"] == m["peak_bytes"] and
                entry["measured_host_peak_bytes"] == m["host_peak_bytes"] and
                entry["swap_file_bytes"] == m["nvme_bytes"])
        entry["all_equal_planned"] = same
        if not same:
            failed.append(mode)
        print("%s: %d layers, median step %.1f ms, %.0f tokens/s; device "
              "peak %d, host peak %d, swap files %d bytes: %s the plan" % (
                  mode, m["layers"], median, entry["tokens_per_s"],
                  entry["measured_peak_bytes"],
                  entry["measured_host_peak_bytes"], entry["swap_file_bytes"],
                  "==" if same else "!="))
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)
    if failed:
        sys.exit("offload_capacity: failed: " + " ".join(failed))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_bin = os.path.join(os.path.dirname(os.path.dirname(here)),
                               "build", "bin")
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd")
    sub.required = True
    pl = sub.add_parser("plan")
    pl.add_argument("--bin", default=default_bin)
    # An H100 80GB as the h100-sxm preset reads it (80 x 10^9 bytes, below
    # the 79.6 GiB the driver exposes); the reserve is what the plan does
    # not count: the CUDA context, cuBLASLt's workspace, NCCL's buffers.
    pl.add_argument("--device-memory", type=size, default=size("80GB"))
    pl.add_argument("--device-reserve", type=size, default=size("2GiB"))
    # The lent machine's 128 GiB: the OS, the runtime's unpinned heap and
    # the page cache keep the rest.
    pl.add_argument("--host-memory", type=size, default=size("128GiB"))
    pl.add_argument("--host-reserve", type=size, default=size("16GiB"))
    # Its 64 GiB disk also holds the system and the unpacked bundle.
    pl.add_argument("--nvme-bytes", type=size, default=size("64GiB"))
    pl.add_argument("--nvme-reserve", type=size, default=size("24GiB"))
    pl.add_argument("--hidden", type=int, default=1600)
    pl.add_argument("--heads", type=int, default=25)
    pl.add_argument("--vocab", type=int, default=50257)
    pl.add_argument("--seq", type=int, default=1024)
    pl.add_argument("--batch", type=int, default=4)
    pl.add_argument("--dtype", default="bf16")
    pl.add_argument("--remat", default="layer")
    # The backend the sizes are planned for, as compile builds them.
    pl.add_argument("--target", default="cuda", choices=["cuda", "cpu"])
    pl.add_argument("--max-layers", type=int, default=4096)
    pl.add_argument("--modes", nargs="*", choices=[m for m, _ in MODES])
    pl.add_argument("-o", "--output", required=True)
    co = sub.add_parser("compile")
    co.add_argument("--bin", default=default_bin)
    co.add_argument("--sizes", required=True)
    co.add_argument("--out", required=True)
    # cpu: the same programs on the CPU backend, to test the run command
    # without a GPU.
    co.add_argument("--target", default="cuda", choices=["cuda", "cpu"])
    ru = sub.add_parser("run")
    ru.add_argument("--sizes", required=True)
    ru.add_argument("--programs", required=True)
    ru.add_argument("--data", required=True)
    ru.add_argument("--results", required=True)
    ru.add_argument("--work", default=tempfile.gettempdir(),
                    help="where each run's swap files go (default $TMPDIR)")
    ru.add_argument("--steps", type=int, default=3)
    ru.add_argument("--warmup", type=int, default=1)
    ru.add_argument("--timeout", type=float, default=540)
    ru.add_argument("--modes", nargs="*", choices=[m for m, _ in MODES])
    args = p.parse_args()
    {"plan": cmd_plan, "compile": cmd_compile, "run": cmd_run}[args.cmd](args)


if __name__ == "__main__":
    main()
