#!/usr/bin/env python3
"""A tiny mixture-of-experts model against DeepSpeed ZeRO-3 on 2 CPU ranks
(docs/benchmarks.md, "Mixture of experts against DeepSpeed"). Not a test.

One Mixtral from transformers' own class (MixtralForCausalLM: 4 experts,
top 2, the experts fused as transformers 5 stores them), saved by
save_pretrained. The same initial weights and the same token rows go to:

  ours       zero-import --hf DIR, zero-compile --stage 3 --world-size 2
             (--overlap-comm, as DeepSpeed's ZeRO-3 overlaps by default),
             mpirun -np 2 with one thread a rank
  ours_ep    the same with --ep-size 2: each rank keeps 2 of a layer's 4
             experts and the tokens go to them by all-to-all; the dense
             parameters stay ZeRO-3 over both ranks
  deepspeed  the model loaded by from_pretrained, DeepSpeed ZeRO-3 with
             torch.optim.AdamW (the import's lr, betas, eps and weight
             decay), 2 ranks over gloo with one thread each (bench/peers'
             venv: bench/peers/venv.sh)

Every label is a token (no -100), so the mean of the ranks' token means
that DeepSpeed logs is the global token mean ours logs. Each round runs
both, in an order reversed every other round; per run the median step time
after --warmup steps (each step's slowest rank for DeepSpeed; ours logs
the step's time after its collectives), and the largest relative
difference of a step's loss from ours.

  bench/moe_peers.py --build build [--rounds 3] [--steps 10]
                     [--systems ours,ours_ep,deepspeed]

ours_ep against ours is the issue's "our ep 2 against our ZeRO-3": both in
the same run, their losses compared too.

Writes bench/results/moe_peers.json (or --out).
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# The model: large enough that the experts' products, not the launch of
# each op, take most of a step.
CONFIG = dict(vocab_size=512, hidden_size=128, intermediate_size=256,
              num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256,
              num_local_experts=4, num_experts_per_tok=2,
              tie_word_embeddings=False)
SEQ, BATCH, WORLD = 128, 8, 2

MAKE_MODEL = r"""
import sys, numpy as np, torch, transformers as tf
out, cfg, rows, seq, vocab = sys.argv[1], eval(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
torch.manual_seed(0)
model = tf.MixtralForCausalLM(tf.MixtralConfig(**cfg))
model.save_pretrained(out)
rng = np.random.default_rng(0)
ids = rng.integers(0, vocab, size=(rows, seq)).astype(np.int64)
np.save(out + "/ids.npy", ids)
np.save(out + "/labels.npy", ids.copy())
"""


def worker(args):
    """One DeepSpeed rank (runs in bench/peers' venv)."""
    import numpy as np
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(0)
    import deepspeed
    import deepspeed.comm as dist
    from transformers import AutoModelForCausalLM
    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = args.batch // world
    model = AutoModelForCausalLM.from_pretrained(args.model,
                                                 dtype=torch.float32)
    model.config.use_cache = False
    model.train()
    h = json.loads(args.hyper)
    opt = torch.optim.AdamW(model.parameters(), lr=h["lr"],
                            betas=(h["beta1"], h["beta2"]), eps=h["eps"],
                            weight_decay=h["weight_decay"])
    config = {"train_batch_size": args.batch,
              "train_micro_batch_size_per_gpu": local,
              "gradient_accumulation_steps": 1, "gradient_clipping": 0.0,
              "steps_per_print": 1 << 30, "wall_clock_breakdown": False,
              "zero_optimization": {"stage": 3}}
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt,
                                           config=config)
    xs = np.load(os.path.join(args.model, "ids.npy"))
    ys = np.load(os.path.join(args.model, "labels.npy"))
    losses, times = [], []
    for step in range(1, args.steps + 1):
        rows = [((step - 1) * args.batch + rank * local + i) % len(xs)
                for i in range(local)]
        x, y = torch.from_numpy(xs[rows]), torch.from_numpy(ys[rows])
        t = time.perf_counter()
        loss = engine(input_ids=x, labels=y).loss
        engine.backward(loss)
        engine.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        times.append((time.perf_counter() - t) * 1e3)
        losses.append(mean.item() / world)
    with open(args.out, "w") as f:
        json.dump({"losses": losses, "step_ms": times}, f)
    dist.barrier()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, **kw):
    subprocess.run(cmd, check=True, **kw)


def hyper(mlir):
    import re
    text = open(mlir).read()
    attr = re.search(r"#zero\.optimizer<([^>]*)>", text).group(1)
    values = dict(kv.split(" = ") for kv in attr.split(", "))
    return {k: float(values[k]) for k in ("lr", "beta1", "beta2", "eps",
                                          "weight_decay")}


def run_ours(work, args, env, program="m3"):
    out = os.path.join(work, "ours.json")
    if os.path.exists(out):
        os.remove(out)
    run(args.mpirun.split() + ["-np", str(WORLD), os.path.join(work, program),
        "--inputs", os.path.join(work, "hf", "ids.npy"),
        "--labels", os.path.join(work, "hf", "labels.npy"),
        "--init-from", os.path.join(work, "m.safetensors"),
        "--steps", str(args.steps), "--threads", "1", "--quiet",
        "--log-json", out], env=env, stdout=subprocess.DEVNULL)
    log = [json.loads(l) for l in open(out) if l.strip()]
    return [l["loss"] for l in log], [l["step_ms"] for l in log]


def run_deepspeed(work, args, env, h):
    port, procs = free_port(), []
    for r in range(WORLD):
        e = dict(env, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(WORLD),
                 LOCAL_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1",
                 MASTER_PORT=str(port), DS_ACCELERATOR="cpu",
                 OMP_NUM_THREADS="1")
        log = open(os.path.join(work, "ds.%d.log" % r), "w")
        procs.append((subprocess.Popen(
            [args.peers_python, os.path.abspath(__file__), "worker",
             "--model", os.path.join(work, "hf"), "--batch", str(BATCH),
             "--steps", str(args.steps), "--hyper", json.dumps(h),
             "--out", os.path.join(work, "ds.%d.json" % r)],
            stdout=log, stderr=subprocess.STDOUT, env=e), log))
    for r, (p, log) in enumerate(procs):
        if p.wait() != 0:
            log.close()
            sys.stderr.write(open(os.path.join(work, "ds.%d.log" % r))
                             .read()[-3000:])
            raise SystemExit("DeepSpeed rank %d failed" % r)
        log.close()
    docs = [json.load(open(os.path.join(work, "ds.%d.json" % r)))
            for r in range(WORLD)]
    return docs[0]["losses"], [max(d["step_ms"][k] for d in docs)
                               for k in range(args.steps)]


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        p = argparse.ArgumentParser()
        p.add_argument("worker")
        for a in ("--model", "--hyper", "--out"):
            p.add_argument(a, required=True)
        p.add_argument("--batch", type=int, required=True)
        p.add_argument("--steps", type=int, required=True)
        return worker(p.parse_args())
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--python", default=os.environ.get(
        "ZERO_PYTHON", os.path.join(ROOT, ".venv", "bin", "python")),
        help="the project's Python (torch, transformers)")
    p.add_argument("--peers-python", default=os.path.join(
        HERE, "peers", ".venv", "bin", "python"))
    p.add_argument("--mpirun",
                   default="mpirun --allow-run-as-root --oversubscribe")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--out", default=os.path.join(HERE, "results",
                                                 "moe_peers.json"))
    p.add_argument("--systems", default="ours,ours_ep,deepspeed",
                   help="which of ours, ours_ep and deepspeed to run "
                        "(ours always runs: the others are compared to it)")
    args = p.parse_args()
    systems = ["ours"] + [s for s in args.systems.split(",")
                          if s in ("ours_ep", "deepspeed")]
    bin_dir = os.path.join(os.path.abspath(args.build), "bin")
    work = tempfile.mkdtemp(prefix="moe-peers-")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    try:
        hf = os.path.join(work, "hf")
        run([args.python, "-c", MAKE_MODEL, hf, repr(CONFIG),
             str(BATCH * args.steps), str(SEQ), str(CONFIG["vocab_size"])],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        run([os.path.join(bin_dir, "zero-import"), "--hf", hf, "--batch",
             str(BATCH), "--seq", str(SEQ), "-o", "m.mlir"], cwd=work,
            stdout=subprocess.DEVNULL)
        run([os.path.join(bin_dir, "zero-compile"), "m.mlir", "--stage", "3",
             "--world-size", str(WORLD), "--overlap-comm=true", "-o", "m3"],
            cwd=work)
        if "ours_ep" in systems:
            run([os.path.join(bin_dir, "zero-compile"), "m.mlir", "--stage",
                 "3", "--world-size", str(WORLD), "--ep-size", str(WORLD),
                 "--overlap-comm=true", "-o", "m3ep"], cwd=work)
        h = hyper(os.path.join(work, "m.mlir"))
        runs = {s: [] for s in systems}
        losses = {}
        for rnd in range(args.rounds):
            # Each system in turn, the order rotated every round.
            order = systems[rnd % len(systems):] + systems[:rnd % len(systems)]
            for system in order:
                l, ms = (run_ours(work, args, env) if system == "ours" else
                         run_ours(work, args, env, "m3ep")
                         if system == "ours_ep" else
                         run_deepspeed(work, args, env, h))
                losses[system] = l
                runs[system].append(statistics.median(ms[args.warmup:]))
        ours = statistics.median(runs["ours"])
        doc = {"model": dict(CONFIG, seq=SEQ, batch=BATCH, world=WORLD,
                             stage=3),
               "steps": args.steps, "warmup": args.warmup,
               "rounds": args.rounds, "hyper": h,
               "ours_ms": runs["ours"], "ours_median_ms": ours,
               "losses_ours": losses["ours"],
               "machine": {"nproc": os.cpu_count()}}
        agree = True
        for system, name in (("deepspeed", "DeepSpeed ZeRO-3"),
                             ("ours_ep", "our ep 2 x ZeRO-3")):
            if system not in systems:
                continue
            diff = max(abs(a - b) / abs(b) for a, b in
                       zip(losses[system], losses["ours"]))
            median = statistics.median(runs[system])
            # ratio: ours / DeepSpeed's; ep_ratio: ep's / our ZeRO-3's.
            ratio = (ours / median if system == "deepspeed" else
                     median / ours)
            key = "" if system == "deepspeed" else "ep_"
            doc.update({system + "_ms": runs[system],
                        system + "_median_ms": median,
                        key + "ratio": ratio,
                        "losses_" + system: losses[system],
                        key + "max_loss_rel_diff": diff})
            agree &= diff <= args.rtol
            print("ours ZeRO-3 %.2f ms, %s %.2f ms a step (%s %.3f); losses "
                  "within %.2g (%s)" % (
                      ours, name, median,
                      "ours / it" if system == "deepspeed" else
                      "it / ours", ratio, diff,
                      "agree" if diff <= args.rtol else "DISAGREE"))
        doc["agree"] = agree
        os.makedirs(os.path.dirname(os.path.abspath(args.out)),
                    exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
