"""Checks of a LoRA model's zero-import output against PEFT itself.

  peft_check.py config MODEL.mlir MAKE_SPEC
      the #zero.peft config equals the adapter_config.json that PEFT's
      save_pretrained writes for make()'s PeftModel (base_model_name_or_path
      aside when make() has none; target_modules as sets);
  peft_check.py keys MODEL.mlir MAKE_SPEC
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


def main():
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
