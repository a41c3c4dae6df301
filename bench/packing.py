#!/usr/bin/env python3
"""Packed rows against one document a padded row on 2 CPU ranks (not a
test; bench/run.sh runs it with ONLY=packing).

The documents are this repository's source files (`lib`, `include`,
`runtime`, `python`, `tools`: C++, headers and Python, one document a file,
a long-tailed distribution of lengths), tokenized by a byte-level BPE
tokenizer of 4,096 tokens trained on them with `tokenizers` (deterministic).
`zero-data tokens --pack --seq 4096` packs them into rows of 4,096 tokens;
`--pack-window 1` lays out the same documents (and the same pieces of the
ones longer than a row) one a row, padded. Both train the same executable:
a Llama of 2 layers, hidden 256, imported from transformers' own class with
`zero-import --hf --packed` at a global batch of 2 rows (one a rank),
compiled at stage 0 for 2 ranks. Each round trains both (the order rotating)
with mpirun, `--threads 1`; a run's time a row is its `step_ms` (slowest
rank) over the steps after the warm-up, per row, and its rate the same
documents' tokens over the time its rows take at that pace (zero-data's
tokens over rows times the time a row): the median over rounds, and the
ratio the median of the rounds' ratios. The fill of each is zero-data's
(real tokens over slots).

Writes bench/results/packing.json (or --out).
"""

import json
import os
import re
import shlex
import shutil
import statistics
import sys
import tempfile
import time

from gather_once import (ROOT, add_output_options, add_round_options,
                         cpu_model, loadavg, run, run_fields, save_json)

SOURCES = ("lib", "include", "runtime", "python", "tools")
SUFFIXES = (".cpp", ".h", ".cu", ".cuh", ".py", ".td", ".def")
SEQ = 4096


def setup(work):
    """The documents, the tokenizer and the model in `work` (run on the
    project's Python: tokenizers, transformers)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, \
        trainers
    from transformers import LlamaConfig, LlamaForCausalLM, \
        PreTrainedTokenizerFast
    import torch
    files = sorted(os.path.join(d, f) for top in SOURCES
                   for d, _, fs in os.walk(os.path.join(ROOT, top))
                   for f in fs if f.endswith(SUFFIXES))
    texts = [open(f, encoding="utf-8", errors="replace").read()
             for f in files]
    with open(os.path.join(work, "docs.jsonl"), "w") as out:
        for t in texts:
            out.write(json.dumps({"text": t}) + "\n")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=4096, special_tokens=["<s>", "</s>", "<pad>"],
        show_progress=False))
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>",
                            eos_token="</s>", pad_token="<pad>") \
        .save_pretrained(os.path.join(work, "tok"))
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(
        vocab_size=4096, hidden_size=256, intermediate_size=688,
        num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=4,
        max_position_embeddings=SEQ)).save_pretrained(
            os.path.join(work, "llama"))
    print(len(files))


def layout_of(report):
    """The rows, tokens and fill of a zero-data report line."""
    m = re.search(r"in (\d+) rows .*, (\d+) tokens .* fill ([0-9.]+)%",
                  report)
    return int(m.group(1)), int(m.group(2)), float(m.group(3)) / 100


def main():
    if sys.argv[1:2] == ["--setup"]:
        return setup(sys.argv[2])
    import argparse
    p = argparse.ArgumentParser(description=__doc__)
    add_output_options(p, "packing.json")
    add_round_options(p, 3, 12, 2)
    p.add_argument("--python", default=os.path.join(ROOT, ".venv", "bin",
                                                    "python"))
    args = p.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    work = tempfile.mkdtemp(prefix="zero-packing-")
    documents = int(run([args.python, os.path.abspath(__file__), "--setup",
                         work]).split()[-1])
    env = dict(os.environ, ZERO_IMPORT_PYTHON=args.python)
    layouts = {}
    for name, extra in (("packed", []), ("padded", ["--pack-window", "1"])):
        d = os.path.join(work, name)
        os.makedirs(d)
        out = run([os.path.join(bin_dir, "zero-data"), "tokens", "--tokenizer",
                   os.path.join(work, "tok"), os.path.join(work, "docs.jsonl"),
                   "--pack", "--seq", str(SEQ), "--ids", d + "/ids.npy",
                   "--labels", d + "/labels.npy", "--positions",
                   d + "/positions.npy"] + extra, env=env)
        rows, count, f = layout_of(out.strip().splitlines()[-1])
        layouts[name] = {"dir": d, "rows": rows, "tokens": count, "fill": f,
                         "report": out.strip().splitlines()[-1]}
    exe = os.path.join(work, "step")
    run([os.path.join(bin_dir, "zero-import"), "--hf",
         os.path.join(work, "llama"), "--batch", "2", "--seq", str(SEQ),
         "--packed", "-o", exe + ".mlir"], env=env)
    run([os.path.join(bin_dir, "zero-compile"), exe + ".mlir", "--stage", "0",
         "--world-size", "2", "-o", exe])
    cpu = cpu_model()
    start, date = loadavg(), time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    rates = {n: [] for n in layouts}
    ratios = []
    names = list(layouts)
    for r in range(args.rounds):
        got = {}
        for name in names[r % 2:] + names[:r % 2]:
            d = layouts[name]["dir"]
            log = os.path.join(work, "%s.%d.jsonl" % (name, r))
            run(shlex.split(args.mpirun) +
                ["-np", "2", exe, "--quiet", "--threads", "1", "--steps",
                 str(args.steps), "--inputs", d + "/ids.npy", "--labels",
                 d + "/labels.npy", "--positions", d + "/positions.npy",
                 "--init-from", exe + ".safetensors", "--log-json", log])
            lines = [json.loads(l) for l in open(log) if l.strip()]
            timed = lines[args.warmup:]
            # Seconds a row (2 a step), and the whole layout at that pace.
            row_s = sum(l["step_ms"] for l in timed) / 1e3 / (2 * len(timed))
            l = layouts[name]
            got[name] = l["tokens"] / (l["rows"] * row_s)
            rates[name].append(got[name])
        ratios.append(got["packed"] / got["padded"])
        print("round %d: packed %.0f tokens/s, padded %.0f tokens/s" % (
            r + 1, got["packed"], got["padded"]), flush=True)
    result = {
        "documents": documents,
        "seq": SEQ,
        "model": "LlamaForCausalLM: 2 layers, hidden 256, 8 heads (4 "
                 "key/value), vocabulary 4096",
        **run_fields(args, cpu, start, date),
        "layouts": {n: {"rows": l["rows"], "tokens": l["tokens"],
                        "fill": l["fill"],
                        "tokens_per_s": statistics.median(rates[n]),
                        "report": l["report"]}
                    for n, l in layouts.items()},
        "ratio": statistics.median(ratios),
    }
    shutil.rmtree(work)
    save_json(args.out, result)
    print("packed / padded tokens/s: %.2f; written to %s" % (result["ratio"],
                                                              args.out))


if __name__ == "__main__":
    main()
