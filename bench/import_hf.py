"""zero-import's wall time and peak memory on Hugging Face directories (not a
test): Llama-3-70B's config without weights (--no-weights), and a
TinyLlama-1.1B-shaped Llama with its weights.

  bench/import_hf.py WORK [--build build] [--python .venv/bin/python]
                          [--runs 3] [--only 70b|1b]

WORK holds the model directories (the 1B one, about 2.2 GB of bf16
safetensors as that model ships, is written once and reused) and the
imported outputs (4.4 GB of float32 weights for the 1B model). Each run is
one `zero-import` process: its wall time, user CPU time and peak resident
set size (the kernel's maximum RSS of that child), with the 1-minute load
average before it starts. The sizes and the load are printed as the table
of docs/benchmarks.md.
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# TinyLlama-1.1B's published shape.
TINYLLAMA = dict(hidden_size=2048, intermediate_size=5632,
                 num_hidden_layers=22, num_attention_heads=32,
                 num_key_value_heads=4, vocab_size=32000,
                 max_position_embeddings=2048, rms_norm_eps=1e-5,
                 tie_word_embeddings=False)


def save_1b(python, directory):
    """The 1B model, randomly initialised, saved in bf16 as it ships."""
    if os.path.isfile(os.path.join(directory, "model.safetensors")):
        return
    code = (
        "import sys, torch, transformers as tf\n"
        "cfg = tf.LlamaConfig(**%r)\n"
        "torch.manual_seed(0)\n"
        "m = tf.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)\n"
        "m.save_pretrained(sys.argv[1])\n" % TINYLLAMA)
    subprocess.run([python, "-c", code, directory], check=True)


def measure(cmd):
    """(wall s, user s, peak RSS bytes, stdout) of one process."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit("failed (%d): %s" % (proc.returncode, " ".join(cmd)))
    # ru_maxrss is in KiB on Linux.
    return wall, usage.ru_utime, usage.ru_maxrss * 1024, out.strip()


def series(name, cmd, runs):
    rows = []
    for i in range(runs):
        load = os.getloadavg()[0]
        wall, user, rss, out = measure(cmd)
        rows.append({"model": name, "run": i + 1, "load": round(load, 2),
                     "wall_s": round(wall, 2), "user_s": round(user, 2),
                     "peak_rss_mib": round(rss / 2**20), "output": out})
        print("| %s | %d | %.2f | %.2f s | %.2f s | %d MiB |" % (
            name, i + 1, load, wall, user, rss / 2**20), flush=True)
    print(out)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("work")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--python", default=os.path.join(ROOT, ".venv", "bin",
                                                    "python"))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--only", choices=("70b", "1b"))
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    imp = os.path.join(args.build, "bin", "zero-import")
    os.environ["ZERO_IMPORT_PYTHON"] = args.python
    print("| model | run | load | wall | user CPU | peak RSS |")
    print("|---|---|---|---|---|---|")
    rows = []
    if args.only in (None, "70b"):
        l70 = os.path.join(args.work, "l70")
        subprocess.run([args.python, os.path.join(
            ROOT, "test", "Import", "Inputs", "hf_models.py"), "big-config",
            l70], check=True)
        rows += series("Llama-3-70B, --no-weights", [
            imp, "--hf", l70, "--batch", "1", "--seq", "2048",
            "--no-weights", "-o", os.path.join(args.work, "l70.mlir")],
            args.runs)
    if args.only in (None, "1b"):
        tl = os.path.join(args.work, "tinyllama")
        save_1b(args.python, tl)
        rows += series("TinyLlama-1.1B-shaped, weights", [
            imp, "--hf", tl, "--batch", "1", "--seq", "2048", "-o",
            os.path.join(args.work, "tl.mlir")], args.runs)
    with open(os.path.join(args.work, "import_hf.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
