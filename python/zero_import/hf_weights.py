"""The weights of a Hugging Face directory (hf.py): its safetensors files,
read tensor by tensor into the model (experts fused as transformers fuses
them), the names save_pretrained writes each tensor under, and the
buffers and parameters that the step does not train."""

import json
import os
import re

import torch

from .hf_config import CONFIG, INDEX, WEIGHTS, fail

# transformers and safetensors are imported in the functions that use them:
# importing a FILE.py:FUNCTION model loads this module without them.


def weight_files(directory):
    """{tensor name: file} of the directory's safetensors, or None."""
    index = os.path.join(directory, INDEX)
    single = os.path.join(directory, WEIGHTS)
    if os.path.isfile(index):
        try:
            data = json.load(open(index))
        except json.JSONDecodeError as e:
            fail("%s:%d:%d: is not valid JSON: %s" % (index, e.lineno,
                                                       e.colno, e.msg))
        wmap = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(wmap, dict):
            fail("%s: no weight_map object" % index)
        files = {}
        for name, f in wmap.items():
            path = os.path.join(directory, f)
            if not os.path.isfile(path):
                fail("%s: no such file (the weight_map of %s names it for "
                     "'%s')" % (path, index, name))
            files[name] = path
        return files
    if os.path.isfile(single):
        return {name: single for name in _keys(single)}
    if any(f.endswith((".bin", ".pt", ".pth")) for f in os.listdir(
            directory)):
        fail("%s: weights not as safetensors (%s or %s); save them with "
             "save_pretrained(safe_serialization=True)" % (
                 directory, WEIGHTS, INDEX))
    return None


def input_files(directory):
    """The files of `directory` that an import may read, those there:
    config.json, the weights and their index, and the shards the index
    names (read leniently: weight_files reports a broken index)."""
    files = [os.path.join(directory, n) for n in (CONFIG, WEIGHTS, INDEX)]
    try:
        with open(files[-1]) as f:
            shards = json.load(f)["weight_map"].values()
        files += sorted({os.path.join(directory, n) for n in shards
                         if isinstance(n, str)})
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        pass
    return [f for f in files if os.path.isfile(f)]


def _open(path):
    from safetensors import safe_open
    try:
        return safe_open(path, framework="pt")
    except Exception as e:  # the package's own error types vary
        fail("%s: not a readable safetensors file: %s" % (path, e))


def _keys(path):
    with _open(path) as f:
        return list(f.keys())


_FLOAT_DTYPES = ("F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2")


class FileTensor:
    """A tensor of a safetensors file, read when asked for: the weights of a
    large model are never all in memory at once (each is read, described
    and written out on its own, its file mapped only meanwhile)."""

    def __init__(self, path, key, shape):
        self.path, self.key, self.shape = path, key, tuple(shape)

    def tensor(self):
        """The tensor as float32."""
        with _open(self.path) as f:
            return f.get_tensor(self.key).to(torch.float32)

    def numpy(self):
        return self.tensor().numpy()


class FusedFileTensor:
    """A fused experts tensor (`experts.gate_up_proj` [E, 2I, H],
    `experts.down_proj` [E, H, I]) of a checkpoint that keeps one tensor
    per expert and projection, as save_pretrained writes Mixtral's
    (`experts.E.w1.weight`...) and Qwen-MoE's: each projection's experts
    stacked, the projections (gate, up) concatenated on dimension 1, as
    transformers' loader merges them (MergeModulelist, Concatenate)."""

    def __init__(self, parts, shape):
        self.parts, self.shape = parts, tuple(shape)  # [[FileTensor]]

    def tensor(self):
        return torch.cat([torch.stack([t.tensor() for t in experts])
                          for experts in self.parts], dim=1)

    def numpy(self):
        return self.tensor().numpy()


# The per-expert checkpoint names of a fused experts tensor: for each
# family's naming, the projections concatenated in order.
_EXPERT_PARTS = {"gate_up_proj": (("w1", "w3"), ("gate_proj", "up_proj")),
                 "down_proj": (("w2",), ("down_proj",))}


def _fused_experts(name, shape, candidates, files):
    """The FusedFileTensor of parameter `name` (an experts tensor) from the
    per-expert tensors of `files` under any of the candidate names, or
    None."""
    m = re.match(r"(.*)\.experts\.(gate_up_proj|down_proj)$", name)
    if m is None or len(shape) != 3:
        return None
    for cand in candidates:
        cm = re.match(r"(.*)\.experts\.(gate_up_proj|down_proj)$", cand)
        if cm is None:
            continue
        for projs in _EXPERT_PARTS[cm.group(2)]:
            keys = [["%s.experts.%d.%s.weight" % (cm.group(1), e, p)
                     for e in range(shape[0])] for p in projs]
            if all(k in files for ks in keys for k in ks):
                return keys
    return None


def _renamer(model, saving):
    """transformers' renaming of state-dict keys for `model` (a
    PreTrainedModel): from a checkpoint's key to the model's, as
    from_pretrained renames what it loads, or with `saving` back, as
    save_pretrained names what it writes (GPT-NeoX's head is the model's
    `lm_head` and the checkpoint's `embed_out`). Only renamings: a key that
    transformers converts (experts merged into one tensor) keeps its name.
    The identity with a transformers that renames nothing."""
    try:
        from transformers.conversion_mapping import \
            get_model_conversion_mapping
        from transformers.core_model_loading import (PrefixChange,
                                                     WeightRenaming,
                                                     apply_renamings)
    except ImportError:
        return lambda key: key
    # As transformers' revert_weight_conversion for a model that was not
    # loaded by from_pretrained: no legacy names, no prefix changes (the
    # base model's prefix is looked up separately), in reverse order.
    conversions = get_model_conversion_mapping(model, add_legacy=not saving)
    renamings = [c for c in conversions if isinstance(c, WeightRenaming) and
                 not isinstance(c, PrefixChange)]
    if saving:
        renamings = [c.reverse_transform() for c in reversed(renamings)]
    return lambda key: apply_renamings(key, renamings)


def saved_names(model):
    """{parameter name: the name save_pretrained writes it under} of the
    parameters of `model` (a PreTrainedModel, or a PeftModel of one) whose
    names differ. The step names them so: the weights that --init-from
    reads from the model's directory and that --export-hf writes are then
    the checkpoint's, which from_pretrained loads."""
    base, prefix = model, ""
    if hasattr(model, "get_base_model"):
        base, prefix = model.get_base_model(), "base_model.model."
    if not is_pretrained(base):
        return {}
    saved = _renamer(base, saving=True)
    out = {}
    for name, _ in model.named_parameters(remove_duplicate=False):
        if name.startswith(prefix):
            new = prefix + saved(name[len(prefix):])
            if new != name:
                out[name] = new
    # The buffers a step reads as frozen parameters too.
    for name, _ in persistent_buffers(base):
        new = prefix + saved(name)
        if new != prefix + name:
            out[prefix + name] = new
    return out


def read_weights(model, directory, files):
    """{parameter name: FileTensor} of the files, each checked against the
    shape the config gives and to be floating point; nothing is read but
    the files' headers. A tied parameter is looked up under each of its
    names, and every name also without the base model's prefix (as older
    checkpoints write them); a file's key also as transformers renames it
    when it loads it."""
    names = {}  # id(param) -> every name of it
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    loaded = _renamer(model, saving=False)
    renamed = {}  # the model's name of a file's key -> the key
    for key in files:
        renamed.setdefault(loaded(key), key)
    prefix = getattr(model, "base_model_prefix", "") + "."
    source = os.path.join(directory, INDEX) if os.path.isfile(
        os.path.join(directory, INDEX)) else os.path.join(directory,
                                                          WEIGHTS)
    handles = {}
    weights = {}
    try:
        for name, p in model.named_parameters():
            candidates = names[id(p)] + [n[len(prefix):] for n in names[id(p)]
                                         if n.startswith(prefix)]
            key = next((n for n in candidates if n in files), None) or \
                next((renamed[n] for n in candidates if n in renamed), None)
            saved = _renamer(model, saving=True)(name)
            fused = None if key is not None else _fused_experts(
                name, list(p.shape), candidates + [saved] + [
                    saved[len(prefix):]] if saved.startswith(prefix) else
                candidates + [saved], files)
            if fused is not None:
                weights[name] = _read_fused(fused, files, handles, p)
                continue
            if key is None:
                fail("%s: no tensor '%s' (%s's parameter %sof shape %s, as "
                     "%s describes the model)" % (
                         source, saved, type(model).__name__,
                         "" if saved == name else "'%s' " % name,
                         list(p.shape), CONFIG))
            path = files[key]
            if path not in handles:
                handles[path] = _open(path).__enter__()
            part = handles[path].get_slice(key)
            shape = list(part.get_shape())
            if shape != list(p.shape):
                fail("%s: tensor '%s' has shape %s; %s with this %s has %s"
                     % (path, key, shape, type(model).__name__, CONFIG,
                        list(p.shape)))
            dtype = part.get_dtype()
            if dtype not in _FLOAT_DTYPES:
                fail("%s: tensor '%s' is %s, not floating point" % (
                    path, key, dtype))
            weights[name] = FileTensor(path, key, shape)
    finally:
        for f in handles.values():
            f.__exit__(None, None, None)
    return weights


def _read_fused(keys, files, handles, p):
    """The FusedFileTensor of parameter p from its per-expert keys, each
    checked as read_weights checks a tensor."""
    parts = []
    for proj in keys:
        tensors = []
        for key in proj:
            path = files[key]
            if path not in handles:
                handles[path] = _open(path).__enter__()
            part = handles[path].get_slice(key)
            shape = list(part.get_shape())
            if part.get_dtype() not in _FLOAT_DTYPES:
                fail("%s: tensor '%s' is %s, not floating point" % (
                    path, key, part.get_dtype()))
            if len(shape) != 2 or shape[1] != p.shape[2]:
                fail("%s: tensor '%s' has shape %s; an expert of %s has "
                     "[*, %d]" % (path, key, shape, list(p.shape),
                                  p.shape[2]))
            tensors.append(FileTensor(path, key, shape))
        parts.append(tensors)
    rows = sum(t[0].shape[0] for t in parts)
    if rows != p.shape[1]:
        fail("%s: the experts' tensors (%s) make %d rows; the fused "
             "parameter %s has %d" % (files[keys[0][0]], ", ".join(
                 ks[0] for ks in keys), rows, list(p.shape), p.shape[1]))
    return FusedFileTensor(parts, p.shape)


def persistent_buffers(model):
    """[(name, buffer)] of the model's buffers that its state dict holds
    (save_pretrained writes them beside the parameters), in its order."""
    buffers = dict(model.named_buffers())
    return [(name, buffers[name]) for name in model.state_dict()
            if name in buffers]


def load_buffers(model, files):
    """The model's persistent buffers (Gemma 4's layer_scalar) set to the
    values the directory's files hold, which the step is traced with: they
    become constants of the step. A buffer the files lack keeps the value
    the config gives it (#zero.hf_model records it either way)."""
    loaded = _renamer(model, saving=False)
    renamed = {}
    for key in files:
        renamed.setdefault(loaded(key), key)
    prefix = getattr(model, "base_model_prefix", "") + "."
    for name, buf in persistent_buffers(model):
        candidates = [name] + ([name[len(prefix):]] if name.startswith(
            prefix) else [])
        key = next((n for n in candidates if n in files), None) or \
            next((renamed[n] for n in candidates if n in renamed), None)
        if key is None or not buf.is_floating_point():
            continue
        with _open(files[key]) as f:
            value = f.get_tensor(key)
        if list(value.shape) != list(buf.shape):
            fail("%s: tensor '%s' has shape %s; %s's buffer of it has %s" % (
                files[key], key, list(value.shape), type(model).__name__,
                list(buf.shape)))
        if not value.is_floating_point():
            fail("%s: tensor '%s' is %s, not floating point" % (
                files[key], key, value.dtype))
        with torch.no_grad():
            buf.copy_(value.to(buf.dtype))


def is_pretrained(model):
    from transformers import PreTrainedModel
    return isinstance(model, PreTrainedModel)


def untrained_tensors(model, params):
    """({name: float32 tensor}, {name: parameter}) of the tensors
    save_pretrained
    writes for `model` that are no parameter among `params`, by the names
    it writes them under: its persistent buffers (Gemma 4's layer_scalar),
    whose values the step was traced with and holds as constants, and its
    parameters that the loss never reaches (BigBird's pooler), which the
    runtime carries from --init-from's files to --export-hf's. A PeftModel
    has none here: its export merges the adapters into the base names."""
    if hasattr(model, "get_base_model") or not is_pretrained(model):
        return {}, {}
    saved = _renamer(model, saving=True)
    buffers = {saved(name): buf.detach().to(torch.float32).cpu().clone()
               for name, buf in persistent_buffers(model)
               if buf.is_floating_point() and name not in params}
    names = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    unused = {saved(aliases[0]): aliases[0] for aliases in names.values()
              if not any(a in params for a in aliases)}
    for name, value in buffers.items():
        if not bool(torch.isfinite(value).all()):
            fail("%s's buffer '%s' holds a value that is not finite; the "
                 "step would hold it as a constant" % (
                     type(model).__name__, name))
    return buffers, unused
