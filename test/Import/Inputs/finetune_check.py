"""Checks of a fine-tuning step's zero-import output and training.

  finetune_check.py unchanged MODEL.mlir BEFORE AFTER [--round bf16]
      each parameter MODEL.mlir declares frozen has the same bytes in the
      safetensors files BEFORE (rounded to bf16 and widened first, with
      --round) and AFTER, and each trainable one changed;
  finetune_check.py peaks REPORT REPORT
      the first text report's planned peak is below the second's;
  finetune_check.py adapters BASE_DIR OURS THEIRS [REL]
      PeftModel.from_pretrained(base, OURS) loads (BASE_DIR's model) the
      adapter tensors of OURS, each within 1e-5 RMS (or REL times its RMS)
      of THEIRS (PEFT's own save_pretrained of the reference's adapters),
      and the same adapter_config.json;
  finetune_check.py merged BASE_DIR OURS THEIRS
      the Hugging Face model in OURS (the merged export) loads, each tensor
      within 1e-5 RMS of merge_and_unload() of THEIRS on BASE_DIR's model;
  finetune_check.py config MODEL.mlir MAKE_SPEC
      the #zero.peft config equals the adapter_config.json that PEFT's
      save_pretrained writes for make()'s PeftModel (base_model_name_or_path
      aside when make() has none; target_modules as sets);
  finetune_check.py keys MODEL.mlir MAKE_SPEC
      each layer's a_key and b_key are the keys of PEFT's
      adapter_model.safetensors, and its scaling PEFT's own.
"""

import importlib.util
import json
import re
import sys
import tempfile

from safetensors import safe_open


def peft_attr(path):
    text = open(path).read()
    config = re.search(r'zero\.peft = #zero\.peft<config = "((?:[^"\\]|\\.)*)"',
                       text).group(1)
    config = re.sub(r"\\([0-9A-F]{2})", lambda m: chr(int(m.group(1), 16)),
                    config)
    layers = re.findall(r"#zero\.lora<([^>]*)>", text)
    return json.loads(config), [dict(
        (k, v.strip('"')) for k, v in (kv.split(" = ") for kv in
                                       layer.split(", ")))
        for layer in layers]


def make(spec):
    path, _, name = spec.rpartition(":")
    s = importlib.util.spec_from_file_location("m", path)
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    return getattr(mod, name)()[0]


def normal(config):
    return {k: sorted(v) if k == "target_modules" else v
            for k, v in config.items()}


def frozen_params(mlir):
    names = {}
    for m in re.finditer(r"^  zero\.param @(\S+|\"[^\"]*\") : .*$",
                         open(mlir).read(), re.M):
        names[m.group(1).strip('"')] = m.group(0).endswith(" frozen")
    return names


def unchanged(mlir, before, after, round_to=None):
    import torch
    from safetensors.torch import load_file
    a, b = load_file(before), load_file(after)
    frozen = trained = 0
    for name, is_frozen in frozen_params(mlir).items():
        x, y = a[name], b[name]
        if is_frozen:
            if round_to:
                x = x.to(torch.bfloat16).to(torch.float32)
            if x.numpy().tobytes() != y.numpy().tobytes():
                sys.exit("FAIL: frozen '%s' changed" % name)
            frozen += 1
        else:
            if torch.equal(x, y):
                sys.exit("FAIL: trainable '%s' did not change" % name)
            trained += 1
    print("%d frozen tensors bitwise unchanged, %d trainable changed" % (
        frozen, trained))


def peaks(first, second):
    def peak(path):
        return int(re.search(r"peak \(persistent \+ arena \+ scratch\) +"
                             r"(\d+)", open(path).read()).group(1))
    p, q = peak(first), peak(second)
    if not p < q:
        sys.exit("FAIL: planned peak %d, not below %d" % (p, q))
    print("planned peak %d bytes, below %d" % (p, q))


def _close(what, a, b, rel=None):
    """a within 1e-5 RMS of b, or with rel, within rel times b's RMS."""
    if a.shape != b.shape:
        sys.exit("FAIL: %s: shape %s, expected %s" % (what, list(a.shape),
                                                      list(b.shape)))
    rms = float((a.double() - b.double()).pow(2).mean().sqrt())
    tol = 1e-5 if rel is None else rel * float(b.double().pow(2).mean()
                                               .sqrt())
    if not rms <= tol:
        sys.exit("FAIL: %s: RMS difference %.3g > %.3g" % (what, rms, tol))
    ref = float(b.double().pow(2).mean().sqrt())
    # A zero tensor (GPT-NeoX's frozen biases) has no relative difference.
    return rms / ref if ref else (0.0 if rms == 0 else float("inf"))


def _base(directory):
    import torch
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(directory,
                                                dtype=torch.float32)


def adapters(base_dir, ours, theirs, rel=None):
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file
    model = PeftModel.from_pretrained(_base(base_dir), ours)
    ref = load_file(theirs + "/adapter_model.safetensors")
    got = load_file(ours + "/adapter_model.safetensors")
    if set(got) != set(ref):
        sys.exit("FAIL: adapter keys %s, PEFT's %s" % (sorted(got),
                                                       sorted(ref)))
    loaded = {n.replace(".default", ""): p for n, p in
              model.named_parameters() if "lora_" in n}
    config = json.load(open(ours + "/adapter_config.json"))
    if normal(config) != normal(json.load(open(theirs +
                                               "/adapter_config.json"))):
        sys.exit("FAIL: %s/adapter_config.json is not PEFT's" % ours)
    rel = float(rel) if rel is not None else None
    worst = 0.0
    for k in sorted(ref):
        worst = max(worst, _close(k, got[k], ref[k], rel))
        if not torch.equal(loaded[k].detach(), got[k]):
            sys.exit("FAIL: %s: PEFT loaded other values" % k)
    print("from_pretrained: %d adapter tensors, each within %s of PEFT's" % (
        len(ref), "1e-05 RMS" if rel is None else "%g of its RMS" % rel))
    print("worst RMS difference %.2g of the tensor's RMS" % worst)


def merged(base_dir, ours, theirs):
    from peft import PeftModel
    ref = PeftModel.from_pretrained(_base(base_dir), theirs)
    ref = ref.merge_and_unload().state_dict()
    got = _base(ours).state_dict()
    if set(got) != set(ref):
        sys.exit("FAIL: merged keys %s, PEFT's %s" % (sorted(got),
                                                      sorted(ref)))
    for k in sorted(ref):
        _close(k, got[k], ref[k])
    print("merged: %d tensors, each within 1e-05 RMS of PEFT's "
          "merge_and_unload()" % len(ref))


def main():
    if sys.argv[1] in ("adapters", "merged"):
        return globals()[sys.argv[1]](*sys.argv[2:])
    if sys.argv[1] == "unchanged":
        args = sys.argv[2:]
        round_to = None
        if args[-2:] == ["--round", "bf16"]:
            round_to, args = "bf16", args[:-2]
        return unchanged(*args, round_to=round_to)
    if sys.argv[1] == "peaks":
        return peaks(*sys.argv[2:])
    what, mlir, spec = sys.argv[1:]
    config, layers = peft_attr(mlir)
    pm = make(spec)
    with tempfile.TemporaryDirectory() as d:
        pm.save_pretrained(d)
        saved = json.load(open(d + "/adapter_config.json"))
        with safe_open(d + "/adapter_model.safetensors", "pt") as f:
            keys = set(f.keys())
    if what == "config":
        if normal(config) != normal(saved):
            sys.exit("FAIL: %s != %s" % (normal(config), normal(saved)))
        print("config: PEFT's adapter_config.json, %d keys" % len(config))
    elif what == "keys":
        ours = {layer[k] for layer in layers for k in ("a_key", "b_key")}
        if ours != keys:
            sys.exit("FAIL: %s != %s" % (sorted(ours), sorted(keys)))
        scalings = {m.scaling["default"] for m in pm.modules()
                    if isinstance(getattr(m, "scaling", None), dict)}
        for layer in layers:
            if float(layer["scaling"]) not in scalings:
                sys.exit("FAIL: scaling %s, PEFT's %s" % (layer["scaling"],
                                                          scalings))
        print("keys: %d layers, the %d tensors PEFT saves" % (len(layers),
                                                             len(keys)))


if __name__ == "__main__":
    main()
