#!/usr/bin/env python3
"""Against DeepSpeed and PyTorch: the same GPT-2, the same initial weights,
the same token batches, trained by DeepSpeed ZeRO-1/2/3 (2 CPU ranks, gloo,
1 thread each), torch eager and torch.compile (one process, 2 threads) and
ours at the same stages (zero-compile, mpirun -np 2, --threads 1). Not a
test; bench/run.sh runs it with ONLY=peers.

Per size: zero-model-gen writes the model (fp32, AdamW with the generator's
lr, betas, eps and weight decay, bias correction), our stage-3 program
exports its initial weights (Hugging Face names), and every system starts
from that file. Each round runs every system once, in an order reversed
every other round. Per run: the median step time of the steps after the
warm-up (for several ranks, each step's slowest rank), the peak RSS of each
rank (GNU time for ours, getrusage for the peers), the wall time from launch
to the end of the first step (ours: zero-compile's time plus the run's wall
time less the later steps' times, so teardown counts against us), and the
largest relative difference of a step's loss from ours at the same stage
(the peers in one process: from ours at stage 3). A system whose losses
differ by more than --rtol is reported as disagreeing, without a speed.

Ours at stage 3 runs with --overlap-comm, as DeepSpeed's ZeRO-3 does when
its config leaves overlap_comm out (its default is true at stage 3 only).

Then the roofline of our stage-3 step (bench/peers/roofline.py): one more
run with --trace, and the cost model's per-op FLOPs and bytes. Its rates
are measured in the same run, before the size's rounds (--calibration
model): zrt-bench-calibrate at 2 ranks with the model's own matmuls
(--gemm-shapes, every product of our step as often as the step runs it),
which also measures the core's FMA ceiling.

Writes bench/results/peers.json (or --out).

  bench/peers/peers.py --build build [--sizes tiny,small,large] [--dry]
"""

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, HERE)
sys.path.insert(1, BENCH)
import roofline  # noqa: E402
from e2e import finish  # noqa: E402
from gather_once import add_output_options  # noqa: E402

# GPT-2 sizes: zero-model-gen arguments (global batch 8 everywhere). tiny is
# examples/gpt2-tiny.mlir; large is the 6-layer, 384-wide model of 10.9M
# parameters (vocabulary 512, sequence 128).
SIZES = {
    "tiny": {"layers": 5, "hidden": 128, "heads": 4, "vocab": 256, "seq": 64,
             "batch": 8},
    "small": {"layers": 4, "hidden": 256, "heads": 4, "vocab": 512,
              "seq": 128, "batch": 8},
    "large": {"layers": 6, "hidden": 384, "heads": 6, "vocab": 512,
              "seq": 128, "batch": 8},
}
# The dry mode: a two-layer model, a few steps, one round, stage 3 only.
DRY = {"layers": 2, "hidden": 32, "heads": 2, "vocab": 256, "seq": 16,
       "batch": 8}


def log(msg):
    print(msg, flush=True)


def run(cmd, env=None, cwd=None):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=env,
                          cwd=cwd)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:])
        raise SystemExit("failed (%d): %s" % (proc.returncode,
                                               " ".join(cmd)))
    return proc.stdout


def read_json_lines(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def optimizer_of(text):
    """AdamW hyper-parameters of a generated model."""
    attr = re.search(r"#zero\.optimizer<([^>]*)>", text).group(1)
    values = dict(kv.split(" = ") for kv in attr.split(", "))
    if values["kind"] != "adamw":
        raise SystemExit("the model's optimizer is %s, not adamw" %
                         values["kind"])
    if values.get("bias_correction") == "false":
        raise SystemExit("torch's AdamW always corrects the bias")
    return {"lr": float(values["lr"]), "beta1": float(values["beta1"]),
            "beta2": float(values["beta2"]), "eps": float(values["eps"]),
            "weight_decay": float(values.get("weight_decay", 0.0))}


def param_count(size):
    L, C, V, T = size["layers"], size["hidden"], size["vocab"], size["seq"]
    return L * (12 * C * C + 13 * C) + V * C + T * C + 2 * C


def make_tokens(path, vocab):
    """Byte tokens of the repository's docs (uint16, each byte % vocab)."""
    docs = os.path.join(ROOT, "docs")
    data = b"".join(open(os.path.join(docs, f), "rb").read()
                    for f in sorted(os.listdir(docs)) if f.endswith(".md"))
    import array
    a = array.array("H", (b % vocab for b in data))
    if sys.byteorder != "little":
        a.byteswap()
    with open(path, "wb") as f:
        a.tofile(f)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measured(step_ms, warmup):
    return statistics.median(step_ms[warmup:])


# --- the systems ------------------------------------------------------------


def run_ours(c, base, args, env):
    """mpirun -np 2 of our program; each rank under GNU time for its RSS."""
    logf = base + ".log.json"
    wrapper = ('exec /usr/bin/time -f %%M -o %s.rss.$OMPI_COMM_WORLD_RANK '
               '"$@"' % base)
    cmd = args.mpirun.split() + ["-np", str(args.world), "sh", "-c", wrapper,
                                 "sh", c["exe"], "--quiet", "--steps",
                                 str(args.steps), "--threads", "1", "--data",
                                 c["tokens"], "--init-from", c["init"],
                                 "--log-json", logf]
    t0 = time.time()
    run(cmd, env=env)
    wall = time.time() - t0
    lines = read_json_lines(logf)
    step_ms = [l["step_ms"] for l in lines]
    rss = []
    for r in range(args.world):
        with open("%s.rss.%d" % (base, r)) as f:
            rss.append(int(f.read().split()[-1]) * 1024)
    return {"losses": [l["loss"] for l in lines], "step_ms": step_ms,
            "rss_bytes": rss,
            "first_step_s": c["compile_s"] + wall - sum(step_ms[1:]) / 1e3}


def worker_args(c, args):
    s = c["size"]
    o = c["opt"]
    return ["--init", c["init"], "--tokens", c["tokens"],
            "--layers", str(s["layers"]), "--hidden", str(s["hidden"]),
            "--heads", str(s["heads"]), "--vocab", str(s["vocab"]),
            "--seq", str(s["seq"]), "--batch", str(s["batch"]),
            "--lr", repr(o["lr"]), "--beta1", repr(o["beta1"]),
            "--beta2", repr(o["beta2"]), "--eps", repr(o["eps"]),
            "--weight-decay", repr(o["weight_decay"]),
            "--steps", str(args.steps)]


def run_torch(c, base, args, env):
    out = base + ".json"
    cmd = [args.python, os.path.join(HERE, "worker.py"), "torch",
           "--compile", "1" if c["system"] == "torch.compile" else "0",
           "--threads", str(args.world), "--out", out] + worker_args(c, args)
    env = dict(env, OMP_NUM_THREADS=str(args.world))
    if args.omp_wait_policy:
        env["OMP_WAIT_POLICY"] = args.omp_wait_policy
    t0 = time.time()
    run(cmd, env=env)
    doc = json.load(open(out))
    return {"losses": doc["losses"], "step_ms": doc["step_ms"],
            "rss_bytes": [doc["peak_rss_bytes"]],
            "first_step_s": doc["first_step_end"] - t0}


def run_deepspeed(c, base, args, env, attempts=3):
    """DeepSpeed's ranks; a run in which a rank dies is run again (its shm
    communicator now and then aborts a rank with "terminate called without
    an active exception"), at most `attempts` times, each failure logged."""
    for attempt in range(1, attempts + 1):
        port = free_port()
        procs = []
        t0 = time.time()
        for r in range(args.world):
            e = dict(env, RANK=str(r), LOCAL_RANK=str(r),
                     WORLD_SIZE=str(args.world), LOCAL_SIZE=str(args.world),
                     MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                     DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1")
            cmd = [args.python, os.path.join(HERE, "worker.py"), "deepspeed",
                   "--stage", str(c["stage"]), "--threads", "1",
                   "--out", "%s.%d.json" % (base, r)] + worker_args(c, args)
            logf = open("%s.%d.log" % (base, r), "w")
            procs.append((subprocess.Popen(cmd, stdout=logf,
                                           stderr=subprocess.STDOUT, env=e),
                          logf))
        failed = []
        for r, (p, logf) in enumerate(procs):
            if p.wait() != 0:
                failed.append(r)
            logf.close()
        if not failed:
            break
        tail = open("%s.%d.log" % (base, failed[0])).read()[-4000:]
        if attempt == attempts:
            sys.stderr.write(tail)
            raise SystemExit("DeepSpeed rank %d failed %d times"
                             % (failed[0], attempts))
        sys.stderr.write("DeepSpeed rank %d failed (attempt %d of %d; "
                         "running it again): %s\n"
                         % (failed[0], attempt, attempts,
                            tail.strip().splitlines()[-1] if tail.strip()
                            else "no output"))
    docs = [json.load(open("%s.%d.json" % (base, r)))
            for r in range(args.world)]
    step_ms = [max(d["step_ms"][k] for d in docs)
               for k in range(args.steps)]
    return {"losses": docs[0]["losses"], "step_ms": step_ms,
            "rss_bytes": [d["peak_rss_bytes"] for d in docs],
            "first_step_s": max(d["first_step_end"] for d in docs) - t0}


RUNNERS = {"ours": run_ours, "deepspeed": run_deepspeed,
           "torch": run_torch, "torch.compile": run_torch}


# --- one size ---------------------------------------------------------------


def prepare(name, size, args, work):
    """Model, tokens, our programs and the initial weights of one size."""
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    bindir = os.path.join(args.build, "bin")
    model = os.path.join(d, "model.mlir")
    gen = ["gpt2"] + sum([["--" + k, str(size[k])] for k in
                          ("layers", "hidden", "heads", "vocab", "seq",
                           "batch")], []) + ["--dtype", "f32"]
    run([os.path.join(bindir, "zero-model-gen")] + gen + ["-o", model])
    opt = optimizer_of(open(model).read())
    tokens = os.path.join(d, "tokens.bin")
    make_tokens(tokens, size["vocab"])
    configs = []
    exes = {}
    for stage in args.stages:
        exe = os.path.join(d, "ours-s%d" % stage)
        t0 = time.time()
        run([os.path.join(bindir, "zero-compile"), model, "--stage",
             str(stage), "--world-size", str(args.world), "-o", exe] +
            compile_flags(stage))
        exes[stage] = (exe, time.time() - t0)
    init = os.path.join(d, "init.safetensors")
    first = exes[args.stages[-1]][0]
    run(args.mpirun.split() + ["-np", str(args.world), first, "--quiet",
                               "--steps", "0", "--export", init])
    common = {"size": size, "opt": opt, "tokens": tokens, "init": init,
              "dir": d}
    for stage in args.stages:
        exe, secs = exes[stage]
        configs.append(dict(common, system="ours", stage=stage, exe=exe,
                            compile_s=secs))
        if "deepspeed" in args.systems:
            configs.append(dict(common, system="deepspeed", stage=stage))
    for system in ("torch", "torch.compile"):
        if system in args.systems:
            configs.append(dict(common, system=system, stage=None))
    gen_text = "zero-model-gen " + " ".join(gen)
    return configs, model, gen_text


def stage_options(stage):
    """DeepSpeed's defaults that depend on the stage: overlap_comm is true
    at stage 3 when the config does not say (DeepSpeedZeroConfig's
    overlap_comm_valid); ours is given the same."""
    return {"overlap-comm": "true"} if stage == 3 else {}


def compile_flags(stage):
    return ["--%s=%s" % kv for kv in sorted(stage_options(stage).items())]


def pipeline(stage, world):
    return "--zero-pipeline=stage=%d world-size=%d%s" % (stage, world, "".join(
        " %s=%s" % kv for kv in sorted(stage_options(stage).items())))


MATMUL = re.compile(r"nn\.matmul %[\w#]+, %[\w#]+((?: transpose_\w+)*)"
                    r"(?: \{[^}]*\})? : tensor<([\dx]+)x\w+>, "
                    r"tensor<([\dx]+)x\w+> -> tensor<([\dx]+)x\w+>")


def gemm_shapes(scheduled):
    """The products of a scheduled module as zrt-bench-calibrate's
    --gemm-shapes (M,N,K,TA,TB,COUNT): a shared rhs folds the lhs batch into
    M, as zrt_matmul does; a batched rhs repeats the product."""
    counts = {}
    for m in MATMUL.finditer(scheduled):
        flags = m.group(1)
        ta, tb = int("transpose_lhs" in flags), int("transpose_rhs" in flags)
        lhs, rhs, res = ([int(x) for x in g.split("x")] for g in m.groups()[1:])
        rows, k = (lhs[-1], lhs[-2]) if ta else (lhs[-2], lhs[-1])
        n = res[-1]
        batch = 1
        for x in res[:-2]:
            batch *= x
        repeat = 1
        if len(rhs) > 2 or ta:
            repeat = batch
        else:
            rows *= batch
        key = (rows, n, k, ta, tb)
        counts[key] = counts.get(key, 0) + repeat
    if not counts:
        raise SystemExit("no nn.matmul in the scheduled module")
    return ";".join("%d,%d,%d,%d,%d,%d" % (key + (c,))
                    for key, c in sorted(counts.items()))


def calibrate(model, stage, args, d, env):
    """zrt-bench-calibrate at the model's own matmuls, on `args.world`
    ranks with one thread each, as our runs use the machine."""
    scheduled = os.path.join(d, "scheduled.mlir")
    run([os.path.join(args.build, "bin", "zero-opt"), model,
         pipeline(stage, args.world), "-o", scheduled])
    out = os.path.join(d, "calibration.json")
    exe = os.path.join(args.build, "runtime", "bench", "zrt-bench-calibrate")
    if not os.path.exists(exe):
        raise SystemExit("%s is missing: configure the build with "
                         "-DZRT_BUILD_BENCHMARKS=ON (or give --calibration "
                         "preset or a file)" % exe)
    run(args.mpirun.split() + [
        "-np", str(args.world), exe,
        "--rounds", "5", "--gemm-shapes", gemm_shapes(open(scheduled).read()),
        "--json", out], env=env)
    return out


def label(c):
    return c["system"] + ("" if c["stage"] is None else
                          " ZeRO-%d" % c["stage"])


def summarize(configs, args):
    ours = {c["stage"]: c for c in configs if c["system"] == "ours"}
    ref_stage = args.stages[-1]
    out = []
    for c in configs:
        ref = ours[c["stage"] if c["stage"] is not None else ref_stage]
        diffs = []
        for run_, ref_run in zip(c["runs"], ref["runs"]):
            diffs += [abs(a - b) / abs(b) for a, b in
                      zip(run_["losses"], ref_run["losses"])]
        worst = max(diffs) if diffs else 0.0
        e = {"system": c["system"], "stage": c["stage"],
             "loss_max_rel_diff": worst,
             "loss_reference": "ours ZeRO-%d" % (c["stage"] if c["stage"]
                                                 is not None else ref_stage),
             "agrees": worst <= args.rtol,
             "step_ms": statistics.median(
                 measured(r["step_ms"], args.warmup) for r in c["runs"]),
             "step_ms_per_round": [measured(r["step_ms"], args.warmup)
                                   for r in c["runs"]],
             "peak_rss_bytes_per_rank": max(max(r["rss_bytes"])
                                            for r in c["runs"]),
             "ranks": len(c["runs"][0]["rss_bytes"]),
             "first_step_s": statistics.median(r["first_step_s"]
                                               for r in c["runs"]),
             "losses": c["runs"][0]["losses"]}
        if c["system"] == "ours":
            e["compile_s"] = c["compile_s"]
        out.append(e)
    # Ratios of per-round step times, runs of the same round.
    def rounds(system, stage):
        for c in configs:
            if c["system"] == system and c["stage"] == stage:
                return [measured(r["step_ms"], args.warmup)
                        for r in c["runs"]]
        return None
    ratios = {}
    for c in configs:
        if c["system"] == "ours":
            continue
        stage = c["stage"] if c["stage"] is not None else ref_stage
        mine, theirs = rounds("ours", stage), rounds(c["system"], c["stage"])
        ratios["ours ZeRO-%d / %s" % (stage, label(c))] = statistics.median(
            a / b for a, b in zip(mine, theirs))
    return out, ratios


def bench_size(name, size, args, work):
    configs, model, gen_text = prepare(name, size, args, work)
    for c in configs:
        c["runs"] = []
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    cal = args.calibration
    if cal == "model" and args.stages:
        cal = calibrate(model, args.stages[-1], args, configs[0]["dir"], env)
        log("%s: calibrated at the model's matmuls: %s" % (name, json.dumps(
            roofline.calibration(cal))))
    for r in range(args.rounds):
        order = configs if r % 2 == 0 else list(reversed(configs))
        for c in order:
            base = os.path.join(c["dir"], "%s-s%s-r%d" % (
                c["system"], c["stage"], r))
            res = RUNNERS[c["system"]](c, base, args, env)
            c["runs"].append(res)
            log("%s round %d %-22s %9.2f ms/step, first step after %6.2f s, "
                "RSS %6.1f MiB/rank" % (
                    name, r, label(c), measured(res["step_ms"], args.warmup),
                    res["first_step_s"], max(res["rss_bytes"]) / 2**20))
    systems, ratios = summarize(configs, args)
    for s in systems:
        if not s["agrees"]:
            log("%s: %s: losses differ from %s by %.3g > %g" % (
                name, label(s), s["loss_reference"], s["loss_max_rel_diff"],
                args.rtol))
    doc = {"name": name, "size": size, "params": param_count(size),
           "model_gen": gen_text, "optimizer": configs[0]["opt"],
           "systems": systems, "ratios": ratios}
    # The roofline of our last stage's step from one traced run.
    if args.stages:
        stage = args.stages[-1]
        ours = [c for c in configs if c["system"] == "ours" and
                c["stage"] == stage][0]
        trace = os.path.join(ours["dir"], "roofline")
        run(args.mpirun.split() + [
            "-np", str(args.world), ours["exe"], "--quiet", "--steps",
            str(args.steps), "--threads", "1", "--data", ours["tokens"],
            "--init-from", ours["init"], "--log-json", trace + ".log.json",
            "--trace", trace + ".trace.json"], env=env)
        predicted = trace + ".predicted.json"
        run([os.path.join(args.build, "bin", "zero-opt"), model,
             pipeline(stage, args.world),
             "--zero-report=format=json hardware=cpu out=%s.report.json "
             "trace=%s" % (trace, predicted), "-o", os.devnull])
        step = [s for s in systems if s["system"] == "ours" and
                s["stage"] == stage][0]["step_ms"]
        traces = [trace + ".trace.rank%d.json" % r for r in range(args.world)]
        doc["roofline"] = roofline.analyze(traces, predicted,
                                           None if cal == "preset" else cal,
                                           args.warmup, step)
        peak = doc["roofline"]["calibration"].get("fma_peak_flops")
        if peak:
            # The same bound with every FLOP at the core's FMA ceiling.
            at_peak = dict(doc["roofline"]["calibration"], gemm_flops=peak)
            r = roofline.analyze(traces, predicted, at_peak, args.warmup, step)
            doc["roofline"]["at_fma_peak"] = {
                "bound_ms": r["bound_ms"],
                "measured_over_bound": r["measured_over_bound"]}
    return doc


def machine():
    cpu = ""
    try:
        out = subprocess.run(["lscpu"], stdout=subprocess.PIPE,
                             text=True).stdout
        m = re.search(r"^Model name:\s*(.*)$", out, re.M)
        cpu = m.group(1).strip() if m else ""
    except OSError:
        pass
    mpi = subprocess.run(["mpirun", "--version"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT,
                         text=True).stdout.splitlines()
    return {"nproc": os.cpu_count(), "cpu": cpu,
            "mpi": mpi[0] if mpi else "",
            "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            "loadavg": open("/proc/loadavg").read().split()[:3]}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    add_output_options(p, "peers.json")
    p.add_argument("--python", help="the peers' python (default: "
                   "bench/peers/venv.sh's)")
    p.add_argument("--sizes", default="tiny,small,large")
    p.add_argument("--stages", default="1,2,3")
    p.add_argument("--systems", default="ours,deepspeed,torch,torch.compile")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--world", type=int, default=2,
                   help="ranks (DeepSpeed, ours) = threads (torch)")
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--omp-wait-policy", default="PASSIVE",
                   help="OMP_WAIT_POLICY of the one-process torch runs "
                   "(default PASSIVE: spinning threads wait for each other "
                   "for whole time slices on shared cores; '' keeps "
                   "torch's default)")
    p.add_argument("--calibration", default="model",
                   help="the roofline's rates: 'model' (default: measured "
                   "in this run, per size, at the model's own matmuls), "
                   "'preset' (the cpu preset's row) or a zrt-bench-calibrate "
                   "JSON file")
    p.add_argument("--mpirun",
                   default="mpirun --allow-run-as-root --oversubscribe")
    p.add_argument("--dry", action="store_true",
                   help="a two-layer model, 4 steps, one round, stage 3: "
                   "checks that everything runs")
    p.add_argument("--keep", help="keep the work directory here")
    args = p.parse_args()
    args.build = os.path.abspath(args.build)
    args.stages = [int(s) for s in args.stages.split(",") if s]
    args.systems = args.systems.split(",")
    sizes = {n: SIZES[n] for n in args.sizes.split(",")}
    if args.dry:
        sizes = {"dry": DRY}
        args.steps, args.warmup, args.rounds, args.stages = 4, 1, 1, [3]
    if args.python is None:
        args.python = run([os.path.join(HERE, "venv.sh")]).strip(
            ).splitlines()[-1]
    versions_file = tempfile.mktemp(suffix=".json")
    run([args.python, os.path.join(HERE, "worker.py"), "versions", "--out",
         versions_file])
    versions = json.load(open(versions_file))
    os.unlink(versions_file)
    versions["ours"] = run(["git", "-C", ROOT, "rev-parse", "--short",
                            "HEAD"]).strip()
    work = args.keep or tempfile.mkdtemp(prefix="zero-peers-")
    os.makedirs(work, exist_ok=True)
    doc = {"machine": machine(), "versions": versions, "world": args.world,
           "threads": "ranks: 1 thread each; one process: %d threads" %
           args.world, "steps": args.steps, "warmup": args.warmup,
           "rounds": args.rounds, "rtol": args.rtol, "dry": args.dry,
           "torch_omp_wait_policy": args.omp_wait_policy or "default",
           "ours_flags": {str(st): compile_flags(st) for st in args.stages},
           "calibration": args.calibration if args.calibration in (
               "model", "preset") else roofline.calibration(args.calibration),
           "sizes": []}
    for name, size in sizes.items():
        doc["sizes"].append(bench_size(name, size, args, work))
    doc["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    finish(args, doc, work, log)


if __name__ == "__main__":
    main()
