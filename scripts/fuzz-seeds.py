#!/usr/bin/env python3
"""Writes the fuzzer's seed inputs into OUT, one file per input named by its
SHA-1, from the source tree ROOT:

  * every .mlir file under test/ and examples/, split at `// -----` lines
    (-split-input-file chunks are separate inputs);
  * every ds_config of the tests: the .json files under test/ and examples/
    that hold a DeepSpeed key, and those the tests write with
    `printf '{...}' > NAME.json`; zero-fuzz applies each to its built-in
    model;
  * every `--zero-pipeline=OPTIONS` string of the tests (those that name no
    file), as a line `//! zero-pipeline: OPTIONS` followed by the test's own
    model where the test is a .mlir file that holds one, else alone (the
    built-in model).

    scripts/fuzz-seeds.py ROOT OUT

Used by scripts/fuzz.sh (the seeds of a fuzzing run) and by
test/Fuzz/replay-seeds.test (every seed through zero-fuzz's checks on every
test run)."""
import hashlib
import os
import re
import sys

MAX_SEED = 65536

# Keys of which one makes a .json file a ds_config.
DS_KEYS = re.compile(rb'"(zero_optimization|optimizer|train_batch_size|'
                     rb'train_micro_batch_size_per_gpu|'
                     rb'gradient_accumulation_steps|bf16|fp16|elasticity|'
                     rb'activation_checkpointing|scheduler|gradient_clipping)"')
# printf '{...}' > NAME.json in a RUN line.
PRINTF_JSON = re.compile(r"printf '(\{[^']*)' > *[^ ]*\.json")
PIPELINE = re.compile(r"""--zero-pipeline=("[^"]*"|'[^']*'|[^ "'|]+)""")


def files(root, suffixes):
    for top in ("test", "examples"):
        for d, dirs, names in os.walk(os.path.join(root, top)):
            dirs.sort()
            for f in sorted(names):
                if f.endswith(suffixes):
                    yield os.path.join(d, f)


def chunks(text):
    return [c for c in re.split(rb"(?m)^// -----.*\n", text)
            if c.strip() and len(c) <= MAX_SEED]


class Seeds:
    def __init__(self, out):
        self.out, self.count = out, {}

    def add(self, kind, data):
        name = hashlib.sha1(data).hexdigest()
        with open(os.path.join(self.out, name), "wb") as fh:
            fh.write(data)
        self.count[kind] = self.count.get(kind, 0) + 1


def printf_text(fmt):
    """The bytes printf writes for a format without conversions."""
    return fmt.encode().decode("unicode_escape").encode("latin-1")


def main():
    root, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    seeds = Seeds(out)
    for path in files(root, (".mlir",)):
        with open(path, "rb") as fh:
            for chunk in chunks(fh.read()):
                seeds.add("mlir", chunk)
    for path in files(root, (".json",)):
        with open(path, "rb") as fh:
            text = fh.read()
        if len(text) <= MAX_SEED and text.lstrip().startswith(b"{") \
                and DS_KEYS.search(text):
            seeds.add("ds_config", text)
    options = set()
    for path in files(root, (".mlir", ".test")):
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        run_lines = "\n".join(line for line in text.splitlines()
                              if "RUN:" in line)
        for fmt in PRINTF_JSON.findall(run_lines):
            if "%" not in fmt:
                seeds.add("ds_config", printf_text(fmt))
        model = b""
        if path.endswith(".mlir"):
            with open(path, "rb") as fh:
                model = next((c for c in chunks(fh.read())
                              if b"zero.train_step" in c), b"")
        for spelled in PIPELINE.findall(run_lines):
            value = spelled.strip("\"'")
            # Terms that name a file (%t, %S) stay out: a seed is portable.
            terms = [t for t in value.split() if "%" not in t]
            line = "//! zero-pipeline: " + " ".join(terms) + "\n"
            key = (line, model if "%s" in run_lines else b"")
            if key in options:
                continue
            options.add(key)
            seeds.add("options", line.encode() + key[1])
    print("fuzz: %d seeds from test/ and examples/ (%s)" % (
        sum(seeds.count.values()),
        ", ".join("%d %s" % (n, k) for k, n in sorted(seeds.count.items()))))


if __name__ == "__main__":
    main()
