#!/usr/bin/env python3
"""Checks of zero-ckpt on expert-parallel checkpoints (hostile-ckpt-ep.test).

  ckpt_experts.py hf CONSOLIDATED EXPORTED
      loads both Hugging Face directories with transformers'
      AutoModelForCausalLM.from_pretrained (no missing, unexpected or
      mismatched key) and compares their state dicts bit for bit.
  ckpt_experts.py states FILE
      in a `consolidate --optimizer-states` file, each parameter's states
      (NAME.exp_avg, NAME.exp_avg_sq) have its shape, and each expert
      tensor's states differ between the halves of its experts (two expert
      set members, not one member's twice).
  ckpt_experts.py close A B [--rtol R]
      two safetensors files hold the same tensors (names and shapes), each
      element within R relative (of the larger magnitude, at least 1e-6):
      the same step trained in two layouts.
  ckpt_experts.py unrecord STEP_DIR
      removes what a checkpoint records of expert parallelism from its
      manifest.json and re-seals it: a checkpoint as the runtime saved it
      before it recorded expert parallelism.
"""

import argparse
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zrt_e2e import read_safetensors, seal_manifest  # noqa: E402


def cmd_hf(args):
    import torch
    from transformers import AutoModelForCausalLM
    models = []
    for path in (args.consolidated, args.exported):
        model, info = AutoModelForCausalLM.from_pretrained(
            path, output_loading_info=True)
        for kind in ("missing_keys", "unexpected_keys", "mismatched_keys"):
            if info.get(kind):
                sys.exit("from_pretrained(%s): %s %s" % (path, kind,
                                                          sorted(info[kind])))
        models.append(model.state_dict())
    got, want = models
    if sorted(got) != sorted(want):
        sys.exit("state dict keys differ: %s" % sorted(set(got) ^ set(want)))
    for k in want:
        if got[k].shape != want[k].shape or not torch.equal(got[k], want[k]):
            sys.exit("%s: %s %s, the export's %s" % (
                k, "differs:" if got[k].shape == want[k].shape else "shape",
                list(got[k].shape), list(want[k].shape)))
    experts = [k for k in want if ".experts." in k]
    print("from_pretrained: %d tensors, each equal to the export's bit for "
          "bit; %s %s" % (len(want), experts[0], list(want[experts[0]].shape)))


def tensor(header, data, name):
    begin, end = header[name]["data_offsets"]
    return struct.unpack("<%df" % ((end - begin) // 4), data[begin:end])


def cmd_states(args):
    _, header, data = read_safetensors(args.file)
    checked, experts = 0, []
    for name, entry in header.items():
        for state in ("exp_avg", "exp_avg_sq"):
            s = header.get(name + "." + state)
            if s is None:
                continue
            if s["shape"] != entry["shape"]:
                sys.exit("%s.%s has shape %s, the parameter %s" % (
                    name, state, s["shape"], entry["shape"]))
            checked += 1
            if ".experts." in name:
                values = tensor(header, data, name + "." + state)
                half = len(values) // 2
                if values[:half] == values[half:]:
                    sys.exit("%s.%s: both halves of its experts are equal"
                             % (name, state))
                experts.append((name + "." + state, entry["shape"]))
    if not experts:
        sys.exit(args.file + ": no expert tensor has states")
    print("%d states of their parameters' shapes; %d of expert tensors, e.g. "
          "%s %s, each with two different halves" % (
              checked, len(experts), experts[0][0], experts[0][1]))


def cmd_close(args):
    _, ha, da = read_safetensors(args.a)
    _, hb, db = read_safetensors(args.b)
    shapes = {k: v["shape"] for k, v in ha.items()}
    if shapes != {k: v["shape"] for k, v in hb.items()}:
        sys.exit("the tensors differ: %s, %s" % (
            sorted(shapes.items()),
            sorted((k, v["shape"]) for k, v in hb.items())))
    worst, name = 0.0, None
    for k in sorted(ha):
        for x, y in zip(tensor(ha, da, k), tensor(hb, db, k)):
            d = abs(x - y) / max(abs(x), abs(y), 1e-6)
            if d > worst:
                worst, name = d, k
    if worst > args.rtol:
        sys.exit("%s: %.3g relative > %g" % (name, worst, args.rtol))
    print("%d tensors of the same shapes, each element within %g relative"
          % (len(ha), args.rtol))


def cmd_unrecord(args):
    path = os.path.join(args.dir, "manifest.json")
    m = json.load(open(path))
    m.pop("expert_parallel", None)
    m.pop("expert_placement", None)
    for part in m["partitions"]:
        part.pop("expert", None)
    for param in m["params"]:
        param.pop("expert_parallel", None)
    with open(path, "w") as f:
        f.write(seal_manifest(m))
    print("%s: expert parallelism unrecorded" % path)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("hf")
    h.add_argument("consolidated")
    h.add_argument("exported")
    s = sub.add_parser("states")
    s.add_argument("file")
    c = sub.add_parser("close")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--rtol", type=float, default=1e-4)
    u = sub.add_parser("unrecord")
    u.add_argument("dir")
    args = p.parse_args()
    {"hf": cmd_hf, "states": cmd_states, "close": cmd_close,
     "unrecord": cmd_unrecord}[args.cmd](args)


if __name__ == "__main__":
    main()
