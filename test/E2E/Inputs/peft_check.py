#!/usr/bin/env python3
"""Checks a PEFT LoRA program's exports against its #zero.peft attribute:
the adapter directory (adapter_config.json is the attribute's config,
adapter_model.safetensors holds each layer's A and B under PEFT's keys, in
fp32, bitwise the trained values of --export), and the merged model (each
base weight under its merged key equal to W + scaling * B @ A computed in
numpy, every other parameter bitwise under its name without the prefix and
".base_layer", no adapter). With --init, also that the frozen base weights
did not move and the adapters did. Prints one line per check."""

import argparse
import json
import re
import sys

import numpy as np
from safetensors.numpy import load_file


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def mlir_string(text):
    """An MLIR string literal's value (its \\XX escapes decoded)."""
    return re.sub(r"\\([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)),
                  text)


def peft_of(path):
    text = open(path).read()
    peft = re.search(r'#zero\.peft<config = "((?:[^"\\]|\\.)*)", '
                     r'prefix = "([^"]*)", layers = \[(.*?)\]>', text)
    if not peft:
        fail(path + ": no #zero.peft")
    layers = []
    for lora in re.finditer(r"#zero\.lora<([^>]*)>", peft.group(3)):
        fields = dict(re.findall(r'(\w+) = ("[^"]*"|[-+.0-9e]+)',
                                 lora.group(1)))
        layers.append({k: (v.strip('"') if v.startswith('"') else float(v))
                       for k, v in fields.items()})
    return mlir_string(peft.group(1)), peft.group(2), layers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--export", required=True)
    ap.add_argument("--adapters", required=True)
    ap.add_argument("--merged", required=True)
    ap.add_argument("--init")
    args = ap.parse_args()
    config, prefix, layers = peft_of(args.model)
    trained = load_file(args.export)

    if open(args.adapters + "/adapter_config.json").read() != config:
        fail("adapter_config.json is not the attribute's config")
    adapters = load_file(args.adapters + "/adapter_model.safetensors")
    want = {}
    for l in layers:
        want[l["a_key"]] = trained[l["a"]]
        want[l["b_key"]] = trained[l["b"]]
    if sorted(adapters) != sorted(want):
        fail("adapter keys %s, want %s" % (sorted(adapters), sorted(want)))
    for key, value in want.items():
        if adapters[key].dtype != np.float32 or \
                adapters[key].tobytes() != value.tobytes():
            fail("adapter %s differs from the trained parameter" % key)
    print("adapters: %d tensors under PEFT's keys, bitwise the trained ones"
          % len(adapters))

    merged = load_file(args.merged + "/model.safetensors")
    adapted = {l[k] for l in layers for k in ("a", "b", "base")}
    expect = {}
    worst = 0.0
    for l in layers:
        w, a, b = trained[l["base"]], trained[l["a"]], trained[l["b"]]
        ref = w + np.float32(l["scaling"]) * (b @ a)
        got = merged.get(l["merged_key"])
        if got is None:
            fail("merged model lacks " + l["merged_key"])
        worst = max(worst, float(np.max(np.abs(got - ref))))
        if not np.allclose(got, ref, rtol=0, atol=1e-6):
            fail("%s is not W + scaling * B @ A" % l["merged_key"])
        if np.array_equal(got, w):
            fail("%s is W unmerged" % l["merged_key"])
        expect[l["merged_key"]] = None
    for name, value in trained.items():
        if name in adapted:
            continue
        key = name[len(prefix):].replace(".base_layer.", ".")
        if key not in merged or merged[key].tobytes() != value.tobytes():
            fail("merged model lacks %s bitwise as %s" % (key, name))
        expect[key] = None
    if sorted(merged) != sorted(expect):
        fail("merged keys %s, want %s" % (sorted(merged), sorted(expect)))
    print("merged: %d tensors, %d of them W + scaling * B @ A (max abs "
          "difference from numpy %s)" % (len(merged), len(layers),
                                         "< 1e-6" if worst < 1e-6 else worst))

    if args.init:
        init = load_file(args.init)
        for l in layers:
            if init[l["base"]].tobytes() != trained[l["base"]].tobytes():
                fail("base %s moved" % l["base"])
            for k in ("a", "b"):
                if init[l[k]].tobytes() == trained[l[k]].tobytes():
                    fail("adapter %s did not train" % l[k])
        print("training: %d base weights bitwise unchanged, %d adapters moved"
              % (len(layers), 2 * len(layers)))
    print("OK")


if __name__ == "__main__":
    main()
