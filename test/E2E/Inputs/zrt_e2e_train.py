"""The compile-and-train subcommands of zrt_e2e.py: the stage and world
matrices, their variants (remat, activation offload, padded vocabularies,
offload, memory budgets) and the checks of the runs against each
other."""

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys

from zrt_e2e_checks import (check_peak, fail, read_log, read_safetensors,
                            rel_diff)


def run(cmd, log=None):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    if log:
        with open(log, "w") as f:
            f.write(proc.stdout)
    if proc.returncode != 0:
        print(proc.stdout[-3000:])
        fail("exit code %d: %s" % (proc.returncode, " ".join(cmd)))
    return proc.stdout


def stage_world(args):
    """(stage, world, "stage S, world W") for each world size of --worlds
    and, within it, each stage of --stages."""
    for world in [int(w) for w in args.worlds.split(",")]:
        for stage in [int(s) for s in args.stages.split(",")]:
            yield stage, world, "stage %d, world %d" % (stage, world)


def cmd_matrix(args):
    """Compiles the model for every stage and world size, trains each, and
    checks the measured peak against the plan and the losses against the
    first configuration (or --ref)."""
    os.makedirs(args.work, exist_ok=True)
    ref = read_log(args.ref) if args.ref else None
    for stage, world, what in stage_world(args):
        name = os.path.join(args.work, "s%d_w%d" % (stage, world))
        run([args.compiler, args.model, "--stage", str(stage),
             "--world-size", str(world), "-o", name] +
            shlex.split(args.compile_args))
        run(shlex.split(args.mpirun) + ["-np", str(world), name, "--quiet",
            "--steps", str(args.steps), "--log-json", name + ".json"] +
            shlex.split(args.train_args), log=name + ".out")
        log = read_log(name + ".json")
        if len(log) != args.steps:
            fail("%s: %d log lines for %d steps" % (name, len(log),
                                                    args.steps))
        peak = check_peak(log, what)
        line = "%s: peak %d == planned" % (what, peak)
        if args.no_ref:
            print(line)
            continue
        if ref is None:
            ref = log
        diff = max(rel_diff(r["loss"], l["loss"]) for r, l in zip(ref, log))
        if diff > args.rtol:
            fail("%s: losses differ from the reference by %.3g > %g" %
                 (what, diff, args.rtol))
        if any(l["skipped"] for l in log):
            fail("%s: a step was skipped" % what)
        print("%s: losses within %g of the reference; %s" %
              (what, args.rtol, line.split(": ", 1)[1]))
    print("OK")


def train_once(args, name, world, compile_args, reuse=None):
    """Compiles and trains `name`. With `reuse` (a directory), a program
    whose bytes, ranks, steps and training arguments equal a run's already
    kept there is not run again: that run's log is its log (the runtime is
    deterministic, and the offload tests compare such runs bitwise)."""
    run([args.compiler, args.model, "-o", name, "--world-size", str(world)] +
        compile_args)
    kept = None
    if reuse:
        h = hashlib.sha256()
        with open(name, "rb") as f:
            h.update(f.read())
        h.update(repr((world, args.steps, args.train_args,
                       args.mpirun)).encode())
        kept = os.path.join(reuse, h.hexdigest() + ".json")
        if os.path.exists(kept):
            shutil.copyfile(kept, name + ".json")
            print("%s: the log of the same program's run %s" % (
                name, kept), file=sys.stderr)
            return read_log(name + ".json")
    run(shlex.split(args.mpirun) + ["-np", str(world), name, "--quiet",
        "--steps", str(args.steps), "--log-json", name + ".json"] +
        shlex.split(args.train_args), log=name + ".out")
    if kept:
        os.makedirs(reuse, exist_ok=True)
        shutil.copyfile(name + ".json", kept)
    log = read_log(name + ".json")
    if len(log) != args.steps:
        fail("%s: %d log lines for %d steps" % (name, len(log), args.steps))
    return log


def check_bitwise(base, log, what, against):
    """Every step's loss, gradient norm, loss scale and skip of `log` is
    bitwise that of `base`."""
    for b, l in zip(base, log):
        for key in ["loss", "grad_norm", "loss_scale", "skipped"]:
            if b[key] != l[key]:
                fail("%s: step %d: %s %r != %r %s" %
                     (what, l["step"], key, l[key], b[key], against))


def cmd_variant(args):
    """Trains the model with and without --variant-args (compile options
    that must not change a number, such as a fusion), for every stage and
    world size: every step's loss, gradient norm and loss scale must be
    bitwise those without, and both measured peaks must equal their
    plans."""
    os.makedirs(args.work, exist_ok=True)
    extra = shlex.split(args.compile_args)
    variant = shlex.split(args.variant_args)
    for stage, world, what in stage_world(args):
        base = train_once(args, os.path.join(
            args.work, "s%d_w%d_base" % (stage, world)), world,
            ["--stage", str(stage)] + extra)
        base_peak = check_peak(base, what)
        log = train_once(args, os.path.join(
            args.work, "s%d_w%d_variant" % (stage, world)), world,
            ["--stage", str(stage)] + extra + variant)
        peak = check_peak(log, what + ", " + args.variant_args)
        check_bitwise(base, log, what, "without " + args.variant_args)
        print("%s: %d steps bitwise equal without %s; peaks %d and %d "
              "without, both == planned" % (what, len(log),
                                            args.variant_args, peak,
                                            base_peak))
    print("OK")


def cmd_remat(args):
    """Trains the model without recomputation and with each policy, for
    every stage and world size: the losses, gradient norms and loss scales
    of every step must be bitwise those without remat, every measured peak
    must equal its plan, and each policy's peak must be below the one
    without remat."""
    os.makedirs(args.work, exist_ok=True)
    extra = shlex.split(args.compile_args)
    for stage, world, what in stage_world(args):
        base_name = os.path.join(args.work, "s%d_w%d_none" % (stage, world))
        base = train_once(args, base_name, world,
                          ["--stage", str(stage)] + extra)
        base_peak = check_peak(base, what)
        for policy in args.policies.split(","):
            name = os.path.join(args.work,
                                "s%d_w%d_%s" % (stage, world, policy))
            log = train_once(args, name, world,
                             ["--stage", str(stage), "--remat", policy] +
                             extra)
            peak = check_peak(log, what + ", " + policy)
            check_bitwise(base, log, what + ", " + policy, "without remat")
            if peak >= base_peak:
                fail("%s, %s: peak %d is not below %d without remat" %
                     (what, policy, peak, base_peak))
            print("%s, %s: %d steps bitwise equal to no remat; peak %d < "
                  "%d, both == planned" % (what, policy, len(log), peak,
                                            base_peak))
    print("OK")


def cmd_activation_offload(args):
    """Trains the model with each recomputation policy (none too), without
    and with --offload-activations cpu, for each "stage:world": every step's
    loss, gradient norm and loss scale must be bitwise those without
    offload, every measured device and host peak must equal its plan, and
    the device peak with offload must be below the one without."""
    os.makedirs(args.work, exist_ok=True)
    extra = shlex.split(args.compile_args)
    for config in args.configs.split(","):
        stage, world = (int(x) for x in config.split(":"))
        for policy in args.policies.split(","):
            what = "stage %d, world %d, remat %s" % (stage, world, policy)
            compile_args = ["--stage", str(stage), "--remat", policy] + extra
            prefix = os.path.join(args.work,
                                  "s%d_w%d_%s" % (stage, world, policy))
            base = train_once(args, prefix + "_device", world, compile_args)
            base_peak = check_peak(base, what)
            log = train_once(args, prefix + "_offload", world,
                             compile_args + ["--offload-activations", "cpu"])
            peak = check_peak(log, what + ", offloaded")
            host = check_peak(log, what + ", offloaded", "host_")
            check_bitwise(base, log, what, "without offload")
            if peak >= base_peak:
                fail("%s: peak %d with offload is not below %d without" %
                     (what, peak, base_peak))
            print("%s: %d steps bitwise equal to no offload; peak %d < %d, "
                  "both == planned; host peak %d == planned" %
                  (what, len(log), peak, base_peak, host))
    print("OK")


def cmd_pad_vocab(args):
    """Trains the model as it is and with --pad-vocab, for every stage and
    world size: every step's loss, loss scale and skip flag must be bitwise
    the unpadded run's (the gradient norm, which only gradient clipping
    would use, within 1e-6), every measured peak its plan, and
    the exported weights (unpadded shapes) byte for byte the same file. The
    padded program then resumes its own checkpoint and starts from the
    unpadded run's export (--init-from), both bitwise again."""
    os.makedirs(args.work, exist_ok=True)
    extra = shlex.split(args.compile_args)
    for stage, world, what in stage_world(args):
        runs = {}
        for pad in ["0", args.multiple]:
            name = os.path.join(args.work, "s%d_w%d_pad%s" %
                                (stage, world, pad))
            compile_args = ["--stage", str(stage), "--pad-vocab", pad]
            train_args = args.train_args + " --export " + name + \
                ".safetensors --save " + name + ".ckpt --save-every " + \
                str(args.steps // 2)
            log = train_once(argparse.Namespace(**dict(
                vars(args), train_args=train_args)), name, world,
                compile_args + extra)
            check_peak(log, "%s, pad %s" % (what, pad))
            runs[pad] = (name, log)
        base_name, base = runs["0"]
        name, log = runs[args.multiple]
        compare_steps(base, log, what + ", padded", 1e-6)
        same = files_equal_or_close(
            [base_name + ".safetensors", name + ".safetensors"],
            args.padded_atol, what + ": the padded run's exported weights")
        print("%s: %d steps bitwise equal padded to %s; exports %s" %
              (what, len(log), args.multiple, same))
        # Resume the padded run's checkpoint halfway; start the padded
        # program from the unpadded export.
        half = args.steps // 2
        resumed = name + "_resumed"
        run(shlex.split(args.mpirun) + ["-np", str(world), name, "--quiet",
            "--steps", str(args.steps), "--log-json", resumed + ".json",
            "--resume", "%s.ckpt/step_%d" % (name, half),
            "--export", resumed + ".safetensors"] +
            shlex.split(args.train_args), log=resumed + ".out")
        compare_steps(log[half:], read_log(resumed + ".json"),
                      what + ", resumed")
        if open(name + ".safetensors", "rb").read() != \
                open(resumed + ".safetensors", "rb").read():
            fail("%s: the resumed run's exported weights differ" % what)
        init = []
        for prog, tag in [(base_name, "unpadded"), (name, "padded")]:
            out = "%s_init_%s" % (name, tag)
            run(shlex.split(args.mpirun) + ["-np", str(world), prog,
                "--quiet", "--steps", "2", "--log-json", out + ".json",
                "--init-from", base_name + ".safetensors"] +
                shlex.split(args.train_args), log=out + ".out")
            init.append(read_log(out + ".json"))
        compare_steps(init[0], init[1], what + ", --init-from", 1e-6)
        print("%s: resumed and --init-from runs bitwise equal" % what)
        # zero-ckpt consolidates the padded checkpoint, as it is and
        # resharded to one rank at stage 0, into the unpadded weights.
        step_dir = ".ckpt/step_%d" % half
        files = []
        for src, tag in [(base_name + step_dir, "unpadded"),
                         (name + step_dir, "padded")]:
            out = "%s_consolidated_%s.safetensors" % (name, tag)
            run([args.ckpt_tool, "consolidate", src, "-o", out,
                 "--optimizer-states"])
            files.append(out)
        run([args.ckpt_tool, "reshard", name + step_dir, "--world-size",
             "1", "--stage", "0", "-o", name + "_resharded"])
        run([args.ckpt_tool, "consolidate", name + "_resharded", "-o",
             name + "_resharded.safetensors", "--optimizer-states"])
        files.append(name + "_resharded.safetensors")
        same = files_equal_or_close(
            files, args.padded_atol, what + ": the padded checkpoint "
            "consolidated (and resharded)")
        if open(files[1], "rb").read() != open(files[2], "rb").read():
            fail("%s: the padded checkpoint reshards to other weights "
                 "than it consolidates to" % what)
        print("%s: consolidated checkpoints %s, resharded too" %
              (what, same))
    print("OK")


def files_equal_or_close(files, atol, what):
    """'equal' when the safetensors files are the same bytes; else every
    tensor of each within atol of the first file's, same names and shapes
    ('within ATOL'), or fails. The padded programs' GEMMs have other
    extents than the unpadded ones (a table of 256 rows, not 200), and
    whether sgemm rounds a row or column the same at both extents depends on
    the BLAS kernel the CPU gets: OpenBLAS's Cooper Lake kernels do, its
    Haswell kernels (AMD Zen's) do not; Adam's normalised steps then carry
    those last-bit gradient differences into the weights."""
    data = [open(f, "rb").read() for f in files]
    if all(d == data[0] for d in data):
        return "equal"
    _, ref, ref_data = read_safetensors(files[0])
    for f in files[1:]:
        _, header, blob = read_safetensors(f)
        if sorted(header) != sorted(ref):
            fail("%s: %s holds other tensors than %s" % (what, f, files[0]))
        for key, info in ref.items():
            got = header[key]
            if got["shape"] != info["shape"] or got["dtype"] != info["dtype"]:
                fail("%s: %s: %r, %r in %s" % (what, key, got, info, files[0]))
            fmt = {"F32": "f", "F64": "d"}.get(info["dtype"])
            if fmt is None:
                fail("%s: %s: dtype %s not compared" % (what, key,
                                                        info["dtype"]))
            a = ref_data[info["data_offsets"][0]:info["data_offsets"][1]]
            b = blob[got["data_offsets"][0]:got["data_offsets"][1]]
            n = len(a) // struct.calcsize(fmt)
            worst = max((abs(x - y) for x, y in zip(
                struct.unpack("<%d%s" % (n, fmt), a),
                struct.unpack("<%d%s" % (n, fmt), b))), default=0.0)
            if not worst <= atol:
                fail("%s: %s differs by %g, more than %g" % (what, key, worst,
                                                             atol))
    return "within %g (not bitwise: this BLAS kernel)" % atol


def compare_steps(ref, log, what, norm_rtol=0.0):
    """Bitwise losses, loss scales and skips; gradient norms within
    norm_rtol (the padding moves the bounds of the norm's partial sums)."""
    if len(ref) != len(log):
        fail("%s: %d steps, %d in the reference" % (what, len(log), len(ref)))
    for r, l in zip(ref, log):
        for key in ["step", "loss", "loss_scale", "skipped"]:
            if r[key] != l[key]:
                fail("%s: step %d: %s %r != %r" % (what, l["step"], key,
                                                   l[key], r[key]))
        if rel_diff(r["grad_norm"], l["grad_norm"]) > norm_rtol:
            fail("%s: step %d: grad_norm %r != %r" % (
                what, l["step"], l["grad_norm"], r["grad_norm"]))


def cmd_offload(args):
    """Trains the model with what --offload-args offloads (the optimizer to
    --device by default, or the stage-3 parameters to host memory) and
    without, for every stage and world size: the losses, gradient norms,
    loss scales and skips of every step must be bitwise equal, every
    measured device peak must equal its plan (and be below the one without
    offload, whose masters and moments it moved out), and the measured host
    peak must equal the plan's host_peak_bytes, which --report checks
    against zero-opt's report of the same schedule. With --device nvme the
    masters and moments (or, with --offload-param nvme in --offload-args,
    the parameter shards, or both, in files of their own) live in swap
    files under a directory of the work folder: each rank's files, measured
    with os.stat, must add up to the plan's nvme_bytes (the report's
    too)."""
    os.makedirs(args.work, exist_ok=True)
    extra = shlex.split(args.compile_args)
    for stage, world, what in stage_world(args):
        base_name = os.path.join(args.work, "s%d_w%d" % (stage, world))
        base = train_once(args, base_name, world,
                          ["--stage", str(stage)] + extra,
                          reuse=args.reuse_baselines)
        base_peak = check_peak(base, what)
        name = base_name + "_offload"
        offload = shlex.split(args.offload_args) \
            if args.offload_args is not None \
            else ["--offload-optimizer", args.device]
        pipeline = args.pipeline_offload \
            if args.pipeline_offload is not None \
            else "offload-optimizer=" + args.device
        swap_dir = name + "_nvme"
        if args.device == "nvme":
            os.makedirs(swap_dir, exist_ok=True)
            offload += ["--nvme-path", swap_dir] + \
                shlex.split(args.nvme_args)
            pipeline += " nvme-path=%s %s" % (
                swap_dir, " ".join(a.lstrip("-") + "=" + b for a, b in
                                   zip(shlex.split(args.nvme_args)[::2],
                                       shlex.split(args.nvme_args)[1::2])))
        log = train_once(args, name, world,
                         ["--stage", str(stage)] + offload + extra)
        peak = check_peak(log, what + ", offload")
        nvme = 0
        if args.device == "nvme":
            planned = log[-1]["planned_nvme_bytes"]
            # Which offloads are on NVMe: the optimizer's states and
            # the parameter shards each have a file per rank.
            devices = {"--offload-optimizer": "none",
                       "--offload-param": "none"}
            for flag, value in zip(offload, offload[1:]):
                if flag in devices:
                    devices[flag] = value
            kinds = [k for k, flag in [("optimizer", "--offload-optimizer"),
                                       ("params", "--offload-param")]
                     if devices[flag] == "nvme"]
            files = sorted(os.listdir(swap_dir))
            want = sorted("zero-%s.rank%d.swp" % (k, r)
                          for k in kinds for r in range(world))
            if files != want:
                fail("%s, nvme: swap files %r, expected %r" %
                     (what, files, want))
            sizes = [sum(os.stat(os.path.join(
                swap_dir, "zero-%s.rank%d.swp" % (k, r))).st_size
                for k in kinds) for r in range(world)]
            if any(size != planned for size in sizes) or planned <= 0:
                fail("%s, nvme: swap files of %r bytes per rank, planned "
                     "%d" % (what, sizes, planned))
            nvme = planned
        for b, l in zip(base, log):
            for key in ["loss", "grad_norm", "loss_scale", "skipped"]:
                if b[key] != l[key]:
                    fail("%s, offload: step %d: %s %r != %r without "
                         "offload" % (what, l["step"], key, l[key],
                                      b[key]))
            if l["host_peak_bytes"] != l["planned_host_peak_bytes"]:
                fail("%s, offload: step %d: measured host peak %d != "
                     "planned %d" % (what, l["step"], l["host_peak_bytes"],
                                     l["planned_host_peak_bytes"]))
            if "host_peak_bytes" in b:
                fail("%s: a host peak without offload" % what)
        if peak >= base_peak and not args.peak_may_grow:
            fail("%s, offload: device peak %d is not below %d without "
                 "offload" % (what, peak, base_peak))
        host = log[-1]["host_peak_bytes"]
        if args.report:
            out = run([args.zero_opt, args.model, "--zero-pipeline=stage=%d "
                       "world-size=%d %s %s" %
                       (stage, world, pipeline, args.pipeline_args),
                       "--zero-report", "-o", os.devnull])
            report = json.loads(out[out.index("{"):])
            if report["host_peak_bytes"] != host or \
                    report["peak_bytes"] != peak or \
                    report["nvme_bytes"] != nvme:
                fail("%s, offload: report peak %d, host %d, nvme %d; "
                     "measured %d, %d" % (what, report["peak_bytes"],
                                          report["host_peak_bytes"],
                                          report["nvme_bytes"], peak,
                                          host))
        print("%s: %d steps bitwise equal to no offload; device peak %d "
              "%s %d, host peak %d%s, all == planned" %
              (what, len(log), peak, "<" if peak < base_peak else ">=",
               base_peak, host,
               ", swap files %d x %d bytes" % (world, nvme)
               if args.device == "nvme" else ""))
    print("OK")


def cmd_budget(args):
    """Compiles with a memory budget the model states fit but the step does
    not, reads the best plan's peak P from the error, then checks that
    budget P fits (the program trains with a measured peak == planned <= P,
    its losses bitwise those without a budget) and P - 1 does not."""
    os.makedirs(args.work, exist_ok=True)
    base = [args.compiler, args.model, "--world-size", str(args.world)] + \
        shlex.split(args.compile_args)
    probe = subprocess.run(base + ["--memory-budget", str(args.probe), "-o",
                                   os.path.join(args.work, "probe")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    m = re.search(r"needs (\d+) bytes per rank", probe.stdout)
    if probe.returncode == 0 or not m:
        print(probe.stdout[-2000:])
        fail("budget %d: expected a plan that misses it" % args.probe)
    best = int(m.group(1))
    print("budget %d: the best plan needs %d bytes" % (args.probe, best))
    below = subprocess.run(base + ["--memory-budget", str(best - 1), "-o",
                                   os.path.join(args.work, "below")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    if below.returncode == 0:
        fail("budget %d (best plan - 1) compiled" % (best - 1))
    print("budget best-1: " + below.stdout.splitlines()[0].split("error: ")[-1])
    name = os.path.join(args.work, "fit")
    log = train_once(args, name, args.world,
                     shlex.split(args.compile_args) +
                     ["--memory-budget", str(best)])
    peak = check_peak(log, "budget %d" % best)
    ref = train_once(args, os.path.join(args.work, "ref"), args.world,
                     shlex.split(args.compile_args))
    for r, l in zip(ref, log):
        if r["loss"] != l["loss"] or r["grad_norm"] != l["grad_norm"]:
            fail("step %d: loss %r, grad norm %r != %r, %r without a budget" %
                 (l["step"], l["loss"], l["grad_norm"], r["loss"],
                  r["grad_norm"]))
    if peak > best:
        fail("measured peak %d exceeds the budget %d" % (peak, best))
    print("budget best: %d steps bitwise equal to no budget, peak %d == "
          "planned, %s the budget" %
          (len(log), peak, "equal to" if peak == best else "within"))
