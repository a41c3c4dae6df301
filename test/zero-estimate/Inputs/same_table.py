#!/usr/bin/env python3
"""same_table.py ZERO_ESTIMATE MODEL S L ARGS...

Runs `ZERO_ESTIMATE MODEL ARGS` and `ZERO_ESTIMATE --params S
--largest-layer-params L ARGS` and asserts that both print the same numbers:
in text, the same header, tables and verdict (every line before the
differences); in JSON, the same inputs (but the model file and group)
and the same lines. Prints how many lines (or JSON entries) agreed.
The differences may differ: with a model file they also give the plan's
buckets.
"""
import json
import subprocess
import sys


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), r.stderr))
    return r.stdout


def table(text):
    lines = [l for l in text.splitlines()
             if not l.startswith("read from ")]
    # The header, padding, table, DeepSpeed's host memory and its all_cold
    # table, and the verdict: everything before the differences.
    return lines[:lines.index("differences:")]


def main():
    tool, model, s, l, args = (sys.argv[1], sys.argv[2], sys.argv[3],
                               sys.argv[4], sys.argv[5:])
    a = run([tool, model] + args)
    b = run([tool, "--params", s, "--largest-layer-params", l] + args)
    if "json" in args:
        ja, jb = json.loads(a), json.loads(b)
        for j in (ja, jb):
            del j["inputs"]["model_file"], j["inputs"]["largest_layer_group"]
            del j["differences"]
        assert ja == jb, (ja, jb)
        print("same JSON (%d inputs, %d of ours)" %
              (len(ja["inputs"]), len(ja["ours"])), end=" ")
    else:
        ta, tb = table(a), table(b)
        assert ta == tb, "\n".join(ta + ["---"] + tb)
        print("same table (%d lines)" % len(ta), end=" ")
    print("as --params %s --largest-layer-params %s" % (s, l))


if __name__ == "__main__":
    main()
