"""A Hugging Face causal language model from its directory (`--hf DIR`).

The directory holds `config.json` and, optionally, the weights as
`model.safetensors` or as shards listed by `model.safetensors.index.json`.
The model is transformers' own class for the config (its `architectures`,
else the causal-LM class of its `model_type`), built in float32 with the
attention implementation asked for (transformers' default, sdpa, unless
`--attn eager`); it is traced without a KV cache, as every model is
(trace.py). Its parameters come from:

- the directory's weights, read tensor by tensor, each checked against
  the shape of the model's parameter;
- without weights, the model's own initialisation: `torch.manual_seed(SEED)`
  then `AutoModelForCausalLM.from_config`, so the weights are those that
  code gives in Python (its `_init_weights`, seeded);
- with `--no-weights`, nothing: each `zero.param` initializer is the last
  one `_init_weights` (or the module's own reset) applied to it, recorded
  without running it. For planning: a Llama-3-70B config imports in seconds.

Either way the model traced has its parameters on PyTorch's meta device
(never allocated, or moved there once the weights are set aside), so the
trace computes shapes, not activations.

The step's parameters are named as save_pretrained writes them: where
transformers renames a checkpoint's key when it loads it (GPT-NeoX's
`embed_out.weight` is the model's `lm_head.weight`), the checkpoint's name
(saved_names), which --init-from finds in the directory and --export-hf
writes.

Encoder-decoder models, and mixture-of-experts models whose sparse block
moe.py does not know, are refused before tracing.
"""

import contextlib
import copy
import inspect
import json
import os
import re
import sys

import torch
import torch.nn as nn

from . import lora, moe
from .checks import too_big
from .errors import ImportFailure, source_of
from .printer import fmt_float

# transformers, peft and safetensors are imported in the functions that use
# them: importing a FILE.py:FUNCTION model loads this module without them.

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"


def _fail(message, path=None, source=None):
    raise ImportFailure(message, path=path, source=source)


def read_config(directory):
    """transformers' config of the model in `directory`."""
    if not os.path.isdir(directory):
        _fail("%s: no such directory" % directory)
    path = os.path.join(directory, CONFIG)
    if not os.path.isfile(path):
        _fail("%s: no %s (a Hugging Face model directory has one)" % (
            directory, CONFIG))
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        _fail("%s: not UTF-8 text (byte 0x%02x at offset %d)" % (
            path, data[e.start], e.start))
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        _fail("%s:%d:%d: is not valid JSON: %s" % (path, e.lineno, e.colno,
                                                    e.msg))
    except RecursionError:
        _fail("%s: is nested too deeply to read" % path)
    if not isinstance(raw, dict):
        _fail("%s: the top level must be a JSON object" % path)
    from transformers.models.auto.configuration_auto import \
        CONFIG_MAPPING_NAMES
    model_type = raw.get("model_type")
    if model_type is None:
        _fail("%s: no model_type" % path)
    if not isinstance(model_type, str):
        _fail("%s: \"model_type\": %s: expected a string" % (
            path, json.dumps(model_type)))
    if model_type not in CONFIG_MAPPING_NAMES:
        _fail("%s: model_type '%s' is not a model this transformers (%s) "
              "knows" % (path, model_type, _transformers_version()))
    check_sizes(raw, CONFIG_MAPPING_NAMES[model_type], path)
    from transformers import AutoConfig
    try:
        from huggingface_hub.errors import StrictDataclassError
    except ImportError:  # a huggingface_hub without typed configs
        StrictDataclassError = ()
    try:
        config = AutoConfig.from_pretrained(directory)
    except StrictDataclassError as e:
        # transformers' typed configs: "Validation error for field 'K':
        # TypeError: Field 'K' expected int, got str (value: '2')".
        m = re.match(r"Validation error for field '([^']+)':\s*\w+: "
                     r"(?:Field '[^']+' )?(.*?)(?: \(value: .*\))?$",
                     str(e).strip(), re.S)
        if m and m.group(1) in raw:
            _fail("%s: \"%s\": %s: %s" % (path, m.group(1), json.dumps(
                raw[m.group(1)]), m.group(2)))
        _fail("%s: transformers refuses it: %s" % (path, " ".join(
            str(e).split())))
    except (ValueError, TypeError, KeyError, AttributeError, IndexError,
            OverflowError, RecursionError) as e:
        # transformers' own code on a value of another type.
        _fail("%s: transformers cannot read it: %s: %s" % (
            path, type(e).__name__, e))
    check_relations(config, path)
    return config


# The config.json keys that size a model (by transformers' common names; a
# family's own name for one, such as GPT-2's n_embd, through its config
# class's attribute_map): each, where config.json sets it, a positive
# integer (or a list of them, per layer). A zero or negative size would
# build a model with empty or impossible tensors.
_SIZES = ("vocab_size", "hidden_size", "intermediate_size",
          "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
          "head_dim", "max_position_embeddings", "moe_intermediate_size",
          "num_local_experts", "num_experts", "n_routed_experts",
          "num_experts_per_tok")

# The names of the number of routed experts, in the order looked up.
_EXPERT_COUNTS = ("num_local_experts", "num_experts", "n_routed_experts")


def _json_key(config_class, name):
    """config.json's key of transformers' common attribute `name`."""
    return getattr(config_class, "attribute_map", {}).get(name, name)


# Counts the importer builds and traces one module at a time, so that its
# time grows with them: a bound far past every published decoder (under 200
# layers, under 400 routed experts) keeps a typo or a hostile 2^64 from
# running until killed.
_COUNT_LIMITS = {"num_hidden_layers": 4096, "num_local_experts": 65536,
                 "num_experts": 65536, "n_routed_experts": 65536}


def check_sizes(raw, class_name, path):
    """Each size config.json sets (_SIZES) is a positive integer, or null
    where transformers derives it; the counts of _COUNT_LIMITS are at most
    their bound."""
    import transformers
    cls = getattr(transformers, class_name, None)
    for name in _SIZES:
        key = _json_key(cls, name)
        if key not in raw or raw[key] is None:
            continue
        value = raw[key]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                   for v in (value if isinstance(value, list) else [value])):
            _fail("%s: \"%s\": %s: expected a positive integer" % (
                path, key, json.dumps(value)))
        limit = _COUNT_LIMITS.get(name)
        if limit and not isinstance(value, list) and value > limit:
            _fail("%s: \"%s\": %d: expected at most %d (zero-import builds "
                  "and traces each one)" % (path, key, value, limit))


def check_relations(config, path):
    """The sizes that bound one another: a token's top-k experts among the
    routed experts, query heads in whole groups per key/value head."""
    def get(name):
        try:
            value = getattr(config, name, None)
        except Exception:  # a per-layer attribute read as one value
            return None
        return value if isinstance(value, int) and \
            not isinstance(value, bool) else None

    def key(name):
        return _json_key(type(config), name)

    top_k = get("num_experts_per_tok")
    experts = next(((n, get(n)) for n in _EXPERT_COUNTS if get(n)),
                   (None, None))
    if top_k and experts[1] and top_k > experts[1]:
        _fail("%s: \"%s\": %d: expected at most \"%s\" (%d): a token is "
              "routed to its top %d among the experts" % (
                  path, key("num_experts_per_tok"), top_k, key(experts[0]),
                  experts[1], top_k))
    heads, kv = get("num_attention_heads"), get("num_key_value_heads")
    if heads and kv and heads % kv:
        _fail("%s: \"%s\": %d: expected a divisor of \"%s\" (%d): each "
              "key/value head serves a whole group of query heads" % (
                  path, key("num_key_value_heads"), kv,
                  key("num_attention_heads"), heads))


def _transformers_version():
    import transformers
    return transformers.__version__


def model_class(config, directory):
    """transformers' causal-LM class for `config`; an encoder-decoder or a
    model without one is refused."""
    import transformers
    from transformers.models.auto.modeling_auto import \
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    archs = getattr(config, "architectures", None) or []
    if not isinstance(archs, list) or not all(isinstance(a, str)
                                              for a in archs):
        _fail("%s: \"architectures\": %s: expected a list of class names" %
              (os.path.join(directory, CONFIG), json.dumps(archs)))
    arch = archs[0] if archs else None
    cls = getattr(transformers, arch, None) if arch else None
    path = os.path.join(directory, CONFIG)
    if getattr(config, "is_encoder_decoder", False):
        _fail("the encoder-decoder structure of %s (%s) is not supported: "
              "zero-import takes decoder-only causal language models" % (
                  arch or config.model_type, path), path="",
              source=source_of(cls) if cls else None)
    name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(config.model_type)
    if arch is not None and arch != name:
        _fail("%s: architectures names %s, which is not %s's causal "
              "language model (%s); zero-import takes causal language "
              "models" % (path, arch, config.model_type, name or "none"),
              path="", source=source_of(cls) if cls else None)
    if name is None:
        _fail("%s: model_type '%s' has no causal language model in "
              "transformers" % (path, config.model_type))
    return getattr(transformers, name)


@contextlib.contextmanager
def _parameters_on_meta():
    """Modules built inside keep their buffers (rotary tables, masks) but
    register every parameter on the meta device: shapes without memory."""
    register = nn.Module.register_parameter

    def on_meta(module, name, param):
        if param is not None and not param.is_meta:
            param = nn.Parameter(param.to("meta"),
                                 requires_grad=param.requires_grad)
        register(module, name, param)

    nn.Module.register_parameter = on_meta
    try:
        yield
    finally:
        nn.Module.register_parameter = register


_INIT_FUNCTIONS = ("uniform_", "normal_", "trunc_normal_", "constant_",
                   "ones_", "zeros_", "eye_", "dirac_", "xavier_uniform_",
                   "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
                   "orthogonal_", "sparse_")


class InitRecorder:
    """The last torch.nn.init function applied to each parameter while the
    model is built (its module's reset, then transformers' _init_weights),
    recorded around torch.nn.init and the table of them transformers keeps;
    the parameters are on the meta device, so nothing is computed."""

    def __init__(self):
        self.last = {}  # id(tensor) -> (tensor, function name, arguments)
        self.partial = {}  # id(base tensor) -> function name
        self.saved = []

    def record(self, name, fn):
        signature = inspect.signature(fn)

        def recorded(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            values = dict(bound.arguments)
            t = values.pop("tensor", None)
            if torch.is_tensor(t):
                if t._base is not None:
                    self.partial[id(t._base)] = name
                else:
                    self.last[id(t)] = (t, name, values)
            return fn(*args, **kwargs)
        return recorded

    def __enter__(self):
        tables = [torch.nn.init.__dict__]
        try:
            from transformers import initialization
            tables.append(initialization.TORCH_INIT_FUNCTIONS)
        except ImportError:
            pass
        for table in tables:
            for name in _INIT_FUNCTIONS:
                if name in table:
                    self.saved.append((table, name, table[name]))
                    table[name] = self.record(name, table[name])
        return self

    def __exit__(self, *exc):
        for table, name, fn in reversed(self.saved):
            table[name] = fn
        self.saved = []
        return False

    def init_text(self, name, p):
        """The zero.param initializer of parameter `name`."""
        if id(p) in self.partial:
            print("zero-import: warning: parameter '%s': %s of a part of it "
                  "is not a zero.param initializer; its initializer is the "
                  "whole tensor's" % (name, self.partial[id(p)]),
                  file=sys.stderr)
        entry = self.last.get(id(p))
        if entry is None:
            _fail("parameter '%s' is not initialised by the model's "
                  "_init_weights or its module; import its weights instead "
                  "of --no-weights" % name)
        _, fn, v = entry
        if fn == "normal_" and v.get("mean", 0.0) == 0.0:
            return "normal std " + fmt_float(float(v["std"]))
        if fn == "zeros_" or (fn == "constant_" and v.get("val") == 0):
            return "zeros"
        if fn == "ones_" or (fn == "constant_" and v.get("val") == 1):
            return "ones"
        _fail("parameter '%s': its initializer torch.nn.init.%s(%s) has no "
              "zero.param equivalent (normal with mean 0, zeros or ones); "
              "import its weights instead of --no-weights" % (
                  name, fn, ", ".join("%s=%r" % kv for kv in sorted(
                      v.items()) if kv[0] != "generator")))


# Class names of the routing modules of transformers' MoE blocks that
# keep their experts under another name than `experts` (Doge's CDMoE).
_MOE_CLASS = re.compile(r"(MoE|Moe|MoA|Experts|TopKRouter|TopKGating)$")


def _refuse_moe(model):
    """Mixture-of-experts routing (a router choosing experts per token) is
    imported for the sparse blocks moe.py knows (Mixtral's, Qwen3-MoE's,
    OLMoE's, Qwen2-MoE's, Granite-MoE's, DeepSeek-V3's...); any other is
    refused at the first block that has experts, naming the part we lack.
    The modules built say so, not the config: a dense variant may keep the
    MoE keys (Doge's num_experts_per_tok with is_moe false)."""
    known = set()  # the routers and experts of the blocks imported
    for path, m in model.named_modules():
        if id(m) in known:
            continue
        if isinstance(getattr(m, "experts", None), nn.Module) or \
                _MOE_CLASS.search(type(m).__name__):
            why = moe.unsupported_part(m)
            if why is None:
                known.update((id(moe.router_of(m)), id(m.experts)))
                continue
            _fail("the MoE routing of %s (experts chosen per token) is not "
                  "supported: %s" % (type(m).__name__, why), path=path,
                  source=source_of(type(m).forward))


# State-space layers: Mamba's selective scan (its A_log decay) and RWKV's
# recurrence, whole or in a hybrid (Jamba, Zamba, Bamba, Falcon-H1,
# Nemotron-H, Granite-4 hybrids).
_STATE_SPACE_CLASS = re.compile(r"(Mamba\d*Mixer|^Rwkv(SelfAttention|FeedForward)$)")


def _refuse_state_space(model):
    """A state-space layer is refused at the first one, by its class, before
    anything else in the model is looked at: the trace would otherwise stop
    at some torch operation of its scan (or, in a hybrid, at another part),
    which names no part a user could look for."""
    def scans(m):
        return isinstance(getattr(m, "A_log", None), nn.Parameter) or \
            _STATE_SPACE_CLASS.search(type(m).__name__)

    for path, m in model.named_modules():
        # The innermost such module names the layer (MambaMixer, not the
        # MambaForCausalLM or decoder layer around it).
        if scans(m) and not any(scans(c) for c in m.modules() if c is not m):
            _fail("the state-space layer %s (a recurrent scan over the "
                  "sequence, as Mamba's or RWKV's) is not supported" %
                  type(m).__name__, path=path,
                  source=source_of(inspect.unwrap(type(m).forward)))


def _has(m, name, kind=nn.Module):
    return isinstance(getattr(m, name, None), kind)


# Blocks of dense decoders that no nn op computes: (whether a module is one,
# by its structure, what the block is; %s its class).
_UNSUPPORTED_BLOCKS = (
    (lambda m: _has(m, "A", nn.Parameter) and _has(m, "dt_proj") and
     _has(m, "q_proj"),
     "the dynamic-mask attention %s (Doge's: a bias per key computed from "
     "the values, exp(A * softplus(dt_proj(v))), added to the attention "
     "scores)"),
    (lambda m: _has(m, "prediction_coefs") and _has(m, "correction_coefs"),
     "the AltUp block %s (Gemma 3n's alternating updates: several copies "
     "of the hidden state, predicted before each layer and corrected after "
     "it by coefficients a learned router picks, beside per-layer "
     "inputs)"),
    (lambda m: _has(m, "relative_attention_bias", (nn.Parameter, nn.Module)),
     "the relative position bias %s (a learned bias per bucket of relative "
     "positions, added to the attention scores, as T5's or CPM-Ant's)"),
    (lambda m: callable(getattr(type(m), "backward_pass", None)),
     "the reversible residual layer %s (Reformer's: run without gradients "
     "inside a custom autograd function whose backward recomputes its "
     "activations, around its LSH or chunked local attention)"),
    (lambda m: _has(m, "H_module") and _has(m, "L_module"),
     "the hierarchical recurrence of %s (HRM's: its H_module and L_module "
     "stacks of layers applied in nested cycles over the same hidden "
     "states, the earlier cycles without gradients)"),
)


def _refuse_blocks(model):
    """A block of _UNSUPPORTED_BLOCKS is refused at the first one, by name,
    before the model is traced: the trace would stop at some torch
    operation inside it (or at a weight it never reads), which names no
    part a user could look for."""
    for path, m in model.named_modules():
        for test, what in _UNSUPPORTED_BLOCKS:
            if test(m):
                _fail("%s is not supported" % (what % type(m).__name__),
                      path=path or None,
                      source=source_of(inspect.unwrap(type(m).forward)))


def build(directory, no_weights=False, seed=0, attn=None):
    """(model, InitRecorder or None, {parameter name: float32 tensor or
    FileTensor} or None) of the directory's model: its own weights, else seeded
    from_config, else (with no_weights) none. The model's parameters are on
    the meta device either way: the trace computes shapes, not activations
    (a billion-parameter model's would not fit), and the weights are kept
    once, beside it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import transformers  # noqa: F401
    except ImportError:
        _fail("--hf needs the transformers package in the Python that runs "
              "zero-import (%s)" % sys.executable)
    config = read_config(directory)
    cls = model_class(config, directory)
    files = weight_files(directory)
    if files and no_weights:
        print("zero-import: warning: --no-weights: the weights in %s are "
              "not read" % directory, file=sys.stderr)
    kwargs = {"dtype": torch.float32}
    if attn:
        kwargs["attn_implementation"] = attn
    recorder = None
    if files is None and not no_weights:
        torch.manual_seed(seed)
        model = _from_config(config, kwargs, directory)
    else:
        recorder = InitRecorder() if no_weights else None
        with _parameters_on_meta(), recorder or contextlib.nullcontext():
            model = _from_config(config, kwargs, directory)
    if type(model) is not cls:
        _fail("%s: transformers built %s, not %s" % (
            os.path.join(directory, CONFIG), type(model).__name__,
            cls.__name__))
    _refuse_state_space(model)
    _refuse_blocks(model)
    _refuse_moe(model)
    weights = None
    if files is not None and not no_weights:
        weights = read_weights(model, directory, files)
        load_buffers(model, files)
    elif not no_weights:
        weights = {name: p.detach() for name, p in model.named_parameters()}
        _parameters_to_meta(model)
    if weights is not None:
        # The buffers a step reads as frozen parameters (a DeepSeek-V3
        # router's nonzero correction bias, Lowering.buffer), as read.
        weights.update((name, buf.detach()) for name, buf in
                       persistent_buffers(model)
                       if buf.is_floating_point())
    model.train()
    return model, recorder, weights


def _from_config(config, kwargs, directory):
    """transformers' model of the config; an attention implementation it
    refuses for this model (--attn sdpa for Gemma 2) is the user's error,
    and so is a value of config.json that read_config let through and
    transformers' model code fails on (a rope_theta that is a string)."""
    from transformers import AutoModelForCausalLM
    path = os.path.join(directory, CONFIG)
    try:
        return AutoModelForCausalLM.from_config(config, **kwargs)
    except ValueError as e:
        if "attn_implementation" not in kwargs:
            _fail("%s: transformers cannot build the model: %s" % (path, e))
        _fail("%s: --attn %s: %s" % (path, kwargs["attn_implementation"], e))
    except (TypeError, RuntimeError, ArithmeticError, KeyError,
            AttributeError, IndexError, AssertionError) as e:
        _fail("%s: transformers cannot build the model: %s: %s" % (
            path, type(e).__name__, e))


def with_lora(model, recorder, weights, spec, seed):
    """(PeftModel, weights) of build()'s model with the LoRA adapters of a
    --lora spec (lora.apply): the base weights are build()'s, found by
    identity under PEFT's names, and the adapters are initialised as PEFT
    does after torch.manual_seed(seed), then set aside like the others;
    without weights (a recorder), their initializers are recorded."""
    if weights is None:
        with _parameters_on_meta(), recorder:
            return lora.apply(model, spec, True), None
    by_id = {id(p): weights[name] for name, p in model.named_parameters()}
    from peft.tuners.lora import LoraLayer
    move = LoraLayer._move_adapter_to_device_of_base_layer
    update = LoraLayer.update_layer
    adapters = {}  # id(adapter module) -> {its parameter: initial value}

    def update_layer(self, adapter_name, *args, **kwargs):
        # Each new adapter's initial values, read on the CPU before PEFT
        # moves it to its base layer's device, here the meta device.
        LoraLayer._move_adapter_to_device_of_base_layer = \
            lambda *a, **k: None
        try:
            result = update(self, adapter_name, *args, **kwargs)
        finally:
            LoraLayer._move_adapter_to_device_of_base_layer = move
        for table in (self.lora_A, self.lora_B):
            m = table[adapter_name]
            adapters[id(m)] = {k: p.detach().clone()
                               for k, p in m.named_parameters()}
        return result

    LoraLayer.update_layer = update_layer
    try:
        torch.manual_seed(seed)
        pm = lora.apply(model, spec, False)
    finally:
        LoraLayer.update_layer = update
    _parameters_to_meta(pm)
    out = {}
    for path, m in pm.named_modules():
        for k, p in m.named_parameters(recurse=False):
            name = path + "." + k if path else k
            if id(m) in adapters:
                out[name] = adapters[id(m)][k]
            elif id(p) in by_id:
                out[name] = by_id[id(p)]
            else:
                _fail("parameter '%s' of the PEFT model is neither the "
                      "base model's nor a LoRA adapter's" % name)
        for k, b in m.named_buffers(recurse=False):
            out[path + "." + k if path else k] = b.detach()
    return pm, out


def _parameters_to_meta(model):
    """Each parameter replaced by a meta one of its shape, wherever it is
    registered, so that tied parameters stay one."""
    new = {}
    for m in model.modules():
        for k, p in list(m._parameters.items()):
            if p is not None and not p.is_meta:
                if id(p) not in new:
                    new[id(p)] = nn.Parameter(p.to("meta"),
                                              requires_grad=p.requires_grad)
                m._parameters[k] = new[id(p)]


def weight_files(directory):
    """{tensor name: file} of the directory's safetensors, or None."""
    index = os.path.join(directory, INDEX)
    single = os.path.join(directory, WEIGHTS)
    if os.path.isfile(index):
        try:
            data = json.load(open(index))
        except json.JSONDecodeError as e:
            _fail("%s:%d:%d: is not valid JSON: %s" % (index, e.lineno,
                                                        e.colno, e.msg))
        wmap = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(wmap, dict):
            _fail("%s: no weight_map object" % index)
        files = {}
        for name, f in wmap.items():
            path = os.path.join(directory, f)
            if not os.path.isfile(path):
                _fail("%s: no such file (the weight_map of %s names it for "
                      "'%s')" % (path, index, name))
            files[name] = path
        return files
    if os.path.isfile(single):
        return {name: single for name in _keys(single)}
    if any(f.endswith((".bin", ".pt", ".pth")) for f in os.listdir(
            directory)):
        _fail("%s: weights not as safetensors (%s or %s); save them with "
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
        _fail("%s: not a readable safetensors file: %s" % (path, e))


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
                _fail("%s: no tensor '%s' (%s's parameter %sof shape %s, as "
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
                _fail("%s: tensor '%s' has shape %s; %s with this %s has %s"
                      % (path, key, shape, type(model).__name__, CONFIG,
                         list(p.shape)))
            dtype = part.get_dtype()
            if dtype not in _FLOAT_DTYPES:
                _fail("%s: tensor '%s' is %s, not floating point" % (
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
                _fail("%s: tensor '%s' is %s, not floating point" % (
                    path, key, part.get_dtype()))
            if len(shape) != 2 or shape[1] != p.shape[2]:
                _fail("%s: tensor '%s' has shape %s; an expert of %s has "
                      "[*, %d]" % (path, key, shape, list(p.shape),
                                   p.shape[2]))
            tensors.append(FileTensor(path, key, shape))
        parts.append(tensors)
    rows = sum(t[0].shape[0] for t in parts)
    if rows != p.shape[1]:
        _fail("%s: the experts' tensors (%s) make %d rows; the fused "
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
            _fail("%s: tensor '%s' has shape %s; %s's buffer of it has %s" % (
                files[key], key, list(value.shape), type(model).__name__,
                list(buf.shape)))
        if not value.is_floating_point():
            _fail("%s: tensor '%s' is %s, not floating point" % (
                files[key], key, value.dtype))
        with torch.no_grad():
            buf.copy_(value.to(buf.dtype))


def is_pretrained(model):
    from transformers import PreTrainedModel
    return isinstance(model, PreTrainedModel)


def export_info(model, params):
    """(config.json's text, {tied name: parameter}, {buffer: float32
    tensor}, {unused name: parameter}) that an export of the trained model to
    Hugging Face writes: the config as save_pretrained writes it for the
    model in float32 (the exported weights are the fp32 masters), each
    other name of a parameter among `params` (transformers' tied weights,
    such as lm_head.weight) mapped to its first, and the checkpoint's
    tensors that are no parameter of the step (untrained_tensors). Of a
    PeftModel, the config is its base model's and the names are its own."""
    base = model.get_base_model() if hasattr(model, "get_base_model") \
        else model
    config = copy.deepcopy(base.config)
    config.architectures = [type(base).__name__]
    config.dtype = torch.float32
    tied = {}
    names = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    for aliases in names.values():
        if aliases[0] in params:
            tied.update({a: aliases[0] for a in aliases[1:]})
    buffers, unused = untrained_tensors(model, params)
    return config.to_json_string(use_diff=True), tied, buffers, unused


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
            _fail("%s's buffer '%s' holds a value that is not finite; the "
                  "step would hold it as a constant" % (
                      type(model).__name__, name))
    return buffers, unused


def step(model, input_ids, labels):
    """The traced training step: the model's own loss,
    `model(input_ids=input_ids, labels=labels).loss`.

    The labels are the tokens themselves, [B, T] as the input ids: the
    model shifts them inside its loss (transformers' ForCausalLMLoss pads
    them with -100 and drops the first, so position t is scored against
    token t + 1 and the last position against nothing), ignores the
    positions labelled -100 and takes the mean over the others. The
    runtime feeds each window of T tokens as both (`labels same_tokens`,
    which the importer prints for a loss that shifts its labels).
    This is the one place that says which tokens are the labels.
    """
    return model(input_ids=input_ids, labels=labels).loss


def check_loss(g, model):
    """The step's loss scores every position's logits against the step's
    `labels` shifted inside the model: one cross entropy whose labels are
    `nn.shift_labels` of the step's labels and which ignores the shift's
    fill. A loss that scores other tokens (labels shifted twice, or not at
    all) would train a different model than `labels=` does, so anything
    else is refused."""
    ce = [op for op in g.ops if op.kind == "softmax_cross_entropy"]
    labels = [a for a in g.args if a.arg == "labels"]
    shift = ce[0].operands[1].op if len(ce) == 1 else None
    if len(ce) != 1 or len(labels) != 1 or shift is None or \
            shift.kind != "shift_labels" or \
            shift.operands[0] is not labels[0] or \
            ce[0].attrs.get("ignore_index") != shift.attrs["fill"] or \
            ce[0].operands[0].shape[:-1] != labels[0].shape:
        where = ce[0].where if len(ce) == 1 else None
        raise ImportFailure(
            "the loss of %s is not one cross entropy of every position "
            "against the labels shifted inside the model (transformers' "
            "labels=): zero-import cannot tell which tokens it scores" % type(
                model).__name__, op=where.op if where else None,
            path=where.path if where else "",
            source=where.source if where else source_of(type(model)))


def example_args(batch, seq):
    if batch <= 0 or seq <= 0:
        _fail("--batch and --seq must be positive (got %d and %d)" % (batch,
                                                                     seq))
    # The trace runs on real token tensors (the parameters are on the meta
    # device).
    what = "--batch %d --seq %d: the step's token ids and labels [%d, %d] " \
        "(int64)" % (batch, seq, batch, seq)
    problem = too_big(what, 2 * 8 * batch * seq)
    if problem:
        _fail(problem)
    try:
        ids = torch.zeros(batch, seq, dtype=torch.long)
        return ids, ids.clone()
    except RuntimeError as e:  # the allocator's "can't allocate memory"
        _fail("%s cannot be allocated: %s" % (what, str(e).splitlines()[0]))
