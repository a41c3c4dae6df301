"""LoRA adapters of PEFT: `peft.get_peft_model(model, LoraConfig(...))`.

A PeftModel is traced through PEFT's own LoraLayer forward: each target
layer is its base layer (`base_layer`, a frozen nn.Linear: PEFT sets
requires_grad=False on every base weight) plus `lora_B(lora_A(x))` times
the scaling PEFT computed (alpha / r, or alpha / sqrt(r) with use_rslora),
its dropout an nn.Identity and its dtype casts no-ops in float32. The
parameters keep PEFT's names (`base_model.model.<base model's name>`, the
adapters `...lora_A.default.weight`); the adapters are ordinary trainable
parameters.

What the step cannot train exactly is refused before tracing: another
PEFT method than LoRA, more than one adapter, lora_dropout > 0, use_dora
(or any other LoRA variant), bias other than "none", modules_to_save and
LoRA on a layer other than nn.Linear.

The module's `#zero.peft` attribute tells the runtime how to write PEFT's
adapter directory and the merged model: the adapter_config.json text
PEFT's save_pretrained writes, the prefix of the base model's names, and
per target layer its base weight, adapters, scaling and the keys of the
merged model and of PEFT's saved adapters.
"""

import copy
import os
import sys
import tempfile

import torch.nn as nn

from .errors import ImportFailure

# peft is imported in the functions that use it: only a model with adapters
# needs it installed.

ADAPTER = "default"

# LoraConfig fields that change what a step computes or trains beyond base
# + B A x * scaling, refused when set: (field, what its value must be).
_REFUSED = (("use_dora", False), ("bias", "none"), ("modules_to_save", None),
            ("lora_bias", False), ("layer_replication", None),
            ("trainable_token_indices", None), ("target_parameters", None))


def peft_roots(module):
    """(prefix, PeftModel) of the outermost PeftModels in `module`: the
    module itself, or those a make() wrapper holds. A module holding one
    was built with peft imported; peft is not imported for any other."""
    if "peft" not in sys.modules:
        return []
    from peft import PeftModel
    roots = []
    for path, m in module.named_modules():
        if isinstance(m, PeftModel) and not any(
                path.startswith(p + ".") or p == "" for p, _ in roots):
            roots.append((path, m))
    return roots


def _join(prefix, name):
    return prefix + "." + name if prefix else name


def lora_layers(peft_model):
    """(module path, layer) of each LoRA layer of a PeftModel."""
    from peft.tuners.lora import LoraLayer
    return [(path, m) for path, m in peft_model.named_modules()
            if isinstance(m, LoraLayer)]


def check(module):
    """Refuses what the step cannot train exactly (see the module's doc),
    naming the module path and the LoraConfig key."""
    for prefix, pm in peft_roots(module):
        configs = pm.peft_config
        if len(configs) != 1:
            raise ImportFailure(
                "a PeftModel with %d adapters (%s): the step trains one" % (
                    len(configs), ", ".join(sorted(configs))), path=prefix)
        name, cfg = next(iter(configs.items()))
        method = getattr(cfg.peft_type, "value", cfg.peft_type)
        if method != "LORA":
            raise ImportFailure("the PEFT method %s is not supported (LoRA "
                                "only)" % method, path=prefix)
        layers = lora_layers(pm)
        where = _join(prefix, layers[0][0]) if layers else prefix
        for key, allowed in _REFUSED:
            value = getattr(cfg, key, allowed)
            if value != allowed and not (allowed is None and not value):
                raise ImportFailure(
                    "LoraConfig %s = %r is not supported (the step trains "
                    "LoRA adapters with %s = %r)" % (key, value, key,
                                                     allowed),
                    path=where)
        if float(cfg.lora_dropout or 0.0) != 0.0:
            raise ImportFailure(
                "LoraConfig lora_dropout = %g: the importer has no dropout "
                "op (use lora_dropout = 0)" % cfg.lora_dropout, path=where)
        for path, layer in layers:
            where = _join(prefix, path)
            from peft.tuners.lora.layer import Linear
            base = layer.get_base_layer()
            if type(layer) is not Linear or type(base) is not nn.Linear:
                raise ImportFailure(
                    "LoRA on %s is not supported: its targets must be "
                    "nn.Linear layers" % type(base).__name__, path=where)
            if layer.merged_adapters:
                raise ImportFailure("a LoRA layer whose adapter is merged "
                                    "into its base weight (train it "
                                    "unmerged)", path=where)
            if layer.lora_variant.get(name) is not None:
                raise ImportFailure(
                    "the LoRA variant %s is not supported (plain LoRA "
                    "only)" % type(layer.lora_variant[name]).__name__,
                    path=where)
            if name not in layer.lora_A:
                raise ImportFailure("a LoRA layer without the adapter '%s'"
                                    % name, path=where)


def adapter_config(pm, base_name_or_path):
    """adapter_config.json's text as PEFT's save_pretrained writes it for
    `pm`: its own config serializer, inference_mode true, and
    base_model_name_or_path the base model's (`base_name_or_path` where
    PEFT has none)."""
    name, cfg = next(iter(pm.peft_config.items()))
    cfg = copy.deepcopy(cfg)
    if cfg.base_model_name_or_path is None:
        cfg.base_model_name_or_path = pm.base_model.model.__dict__.get(
            "name_or_path", None) or base_name_or_path
    cfg.inference_mode = True
    # PEFT writes a set (target_modules) in its hash order; sorted, the
    # text is the same on every run, and loads the same.
    for key, value in vars(cfg).items():
        if isinstance(value, set):
            setattr(cfg, key, sorted(value))
    auto_mapping = None
    if cfg.task_type is None:
        cls = pm._get_base_model_class(is_prompt_tuning=False)
        auto_mapping = {"base_model_class": cls.__name__,
                        "parent_library": cls.__module__}
    with tempfile.TemporaryDirectory() as d:
        cfg.save_pretrained(d, auto_mapping_dict=auto_mapping)
        return open(os.path.join(d, "adapter_config.json")).read()


def peft_info(module, params, base_name_or_path=None):
    """(config text, prefix, [layer dict]) of the PeftModel in `module`
    (#zero.peft), or None without one: each layer's base weight, adapters
    A and B and scaling, its key in the merged model (the base model's
    name) and its adapters' keys in PEFT's saved state dict."""
    roots = peft_roots(module)
    if not roots:
        return None
    if len(roots) > 1:
        raise ImportFailure("%d PeftModels in the module (%s): the step "
                            "trains one" % (len(roots), ", ".join(
                                p or "<root>" for p, _ in roots)))
    from peft.utils import get_peft_model_state_dict
    root, pm = roots[0]
    saved = set(get_peft_model_state_dict(pm, adapter_name=ADAPTER))
    # PeftModel.base_model (the LoraModel) holds the base model as .model.
    prefix = _join(root, "base_model.model.")
    layers = []
    for path, layer in lora_layers(pm):
        base = _join(root, path + ".base_layer.weight")
        a = _join(root, path + ".lora_A.%s.weight" % ADAPTER)
        b = _join(root, path + ".lora_B.%s.weight" % ADAPTER)
        if not {base, a, b} <= params:
            continue  # a layer that does not reach the loss
        keys = [n[len(root) + 1 if root else 0:].replace(
            "." + ADAPTER + ".", ".") for n in (a, b)]
        for k in keys:
            if k not in saved:
                raise ImportFailure(
                    "PEFT saves no tensor '%s' for the adapter of %s" % (
                        k, path), path=_join(root, path))
        merged = base[len(prefix):].replace(".base_layer.", ".")
        layers.append({"base": base, "a": a, "b": b,
                       "scaling": float(layer.scaling[ADAPTER]),
                       "merged_key": merged, "a_key": keys[0],
                       "b_key": keys[1]})
    return adapter_config(pm, base_name_or_path), prefix, layers


def parse_spec(spec):
    """{key: value} of a --lora spec, `r=8,alpha=16,target=q_proj,v_proj`:
    `target=` takes the rest of the comma list up to the next key=."""
    keys = {"r": int, "alpha": float, "target": None, "dropout": float}
    out = {}
    key = None
    for item in spec.split(","):
        item = item.strip()
        k, eq, v = item.partition("=")
        if eq:
            k = k.strip()
            if k not in keys:
                raise ImportFailure(
                    "--lora %s: unknown key '%s' (expected r, alpha, "
                    "target, dropout)" % (spec, k))
            if k in out:
                raise ImportFailure("--lora %s: '%s' given twice" % (spec,
                                                                     k))
            key = k
            out[k] = [] if k == "target" else None
            item = v.strip()
        elif key != "target":
            raise ImportFailure(
                "--lora %s: '%s' is not key=value (expected, e.g., "
                "r=8,alpha=16,target=q_proj,v_proj)" % (spec, item))
        if not item:
            raise ImportFailure("--lora %s: an empty value of '%s'" % (
                spec, key))
        if key == "target":
            out[key].append(item)
            continue
        try:
            value = keys[key](item)
        except ValueError:
            raise ImportFailure("--lora %s: %s=%s is not %s" % (
                spec, key, item, "an integer" if key == "r" else
                "a number"))
        out[key] = value
    if "r" in out and out["r"] <= 0:
        raise ImportFailure("--lora %s: r=%d; the rank must be positive" % (
            spec, out["r"]))
    if "alpha" in out and out["alpha"] <= 0:
        raise ImportFailure("--lora %s: alpha=%g must be positive" % (
            spec, out["alpha"]))
    if "target" not in out:
        raise ImportFailure("--lora %s: no target= (the names of the "
                            "layers that get adapters, e.g. "
                            "target=q_proj,v_proj)" % spec)
    return out


def apply(model, spec, no_weights):
    """model as `peft.get_peft_model(model, LoraConfig(...))` of a --lora
    spec (parse_spec), its adapters initialised as PEFT does (after the
    caller's torch.manual_seed); with no_weights, as init_lora_weights =
    "gaussian" (lora_A normal with std 1/r, lora_B zeros), which a zero.param
    initializer states and the adapter config records."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise ImportFailure("--lora needs the peft package in the Python "
                            "that runs zero-import (%s)" % sys.executable)
    opts = parse_spec(spec)
    names = [n for n, _ in model.named_modules()]
    for t in opts["target"]:
        if not any(n == t or n.endswith("." + t) for n in names):
            raise ImportFailure("--lora target=%s matches no module of %s" % (
                t, type(model).__name__))
    kwargs = {"target_modules": opts["target"], "task_type": "CAUSAL_LM"}
    if "r" in opts:
        kwargs["r"] = opts["r"]
    if "alpha" in opts:
        alpha = opts["alpha"]
        kwargs["lora_alpha"] = int(alpha) if alpha == int(alpha) else alpha
    if "dropout" in opts:
        kwargs["lora_dropout"] = opts["dropout"]
    if no_weights:
        kwargs["init_lora_weights"] = "gaussian"
    try:
        pm = get_peft_model(model, LoraConfig(**kwargs))
    except (ValueError, TypeError) as e:
        raise ImportFailure("--lora %s: PEFT refuses it: %s" % (spec, e))
    check(pm)
    return pm
