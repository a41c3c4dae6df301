#!/usr/bin/env python3
"""Writes the fuzzer's seed inputs: every .mlir file under test/ and examples/
of the source tree ROOT, split at `// -----` lines (-split-input-file chunks
are separate inputs), one file per chunk named by its SHA-1, into OUT.

    scripts/fuzz-seeds.py ROOT OUT

Used by scripts/fuzz.sh (the seeds of a fuzzing run) and by
test/Fuzz/replay-seeds.test (every seed through zero-fuzz's checks on every
test run)."""
import hashlib
import os
import re
import sys


def main():
    root, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    n = 0
    for top in ("test", "examples"):
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for f in sorted(files):
                if not f.endswith(".mlir"):
                    continue
                with open(os.path.join(d, f), "rb") as fh:
                    text = fh.read()
                for chunk in re.split(rb"(?m)^// -----.*\n", text):
                    if not chunk.strip() or len(chunk) > 65536:
                        continue
                    name = hashlib.sha1(chunk).hexdigest()
                    with open(os.path.join(out, name), "wb") as fh:
                        fh.write(chunk)
                    n += 1
    print(f"fuzz: {n} seeds from test/ and examples/")


if __name__ == "__main__":
    main()
