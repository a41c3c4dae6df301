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

With --packed the step also takes the position_ids of rows of packed
documents (packed_step; packed.py).
"""

import contextlib
import copy
import inspect
import os
import re
import sys

import torch
import torch.nn as nn

from . import lora, moe, packed
from .checks import too_big
from .errors import ImportFailure, source_of
from .hf_config import CONFIG, fail, model_class, read_config
from .hf_weights import (load_buffers, persistent_buffers, read_weights,
                         untrained_tensors, weight_files)
# input_files, is_pretrained and saved_names: the importer's, from here.
from .hf_weights import input_files, is_pretrained, saved_names  # noqa: F401
from .printer import fmt_float

# transformers, peft and safetensors are imported in the functions that use
# them: importing a FILE.py:FUNCTION model loads this module without them.


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
            fail("parameter '%s' is not initialised by the model's "
                 "_init_weights or its module; import its weights instead "
                 "of --no-weights" % name)
        _, fn, v = entry
        if fn == "normal_" and v.get("mean", 0.0) == 0.0:
            return "normal std " + fmt_float(float(v["std"]))
        if fn == "zeros_" or (fn == "constant_" and v.get("val") == 0):
            return "zeros"
        if fn == "ones_" or (fn == "constant_" and v.get("val") == 1):
            return "ones"
        fail("parameter '%s': its initializer torch.nn.init.%s(%s) has no "
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
            fail("the MoE routing of %s (experts chosen per token) is not "
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
            fail("the state-space layer %s (a recurrent scan over the "
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
                fail("%s is not supported" % (what % type(m).__name__),
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
        fail("--hf needs the transformers package in the Python that runs "
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
        fail("%s: transformers built %s, not %s" % (
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
            fail("%s: transformers cannot build the model: %s" % (path, e))
        fail("%s: --attn %s: %s" % (path, kwargs["attn_implementation"], e))
    except (TypeError, RuntimeError, ArithmeticError, KeyError,
            AttributeError, IndexError, AssertionError) as e:
        fail("%s: transformers cannot build the model: %s: %s" % (
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
                fail("parameter '%s' of the PEFT model is neither the "
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


def packed_step(model, input_ids, position_ids, labels):
    """The traced step of --packed: rows of several documents, each
    document's positions from 0 in `position_ids` [B, T], which transformers
    reads (without an attention mask and a cache) as the documents to mask
    apart and the positions to rotate by (packed.py). The labels are as
    step's: the tokens, shifted inside the model."""
    return model(input_ids=input_ids, position_ids=position_ids,
                 labels=labels, use_cache=False).loss


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


def example_args(batch, seq, packed_rows=False):
    """The step's example inputs: token ids and labels [batch, seq], with
    `packed_rows` the position_ids of packed documents between them."""
    if batch <= 0 or seq <= 0:
        fail("--batch and --seq must be positive (got %d and %d)" % (batch,
                                                                    seq))
    # The trace runs on real token tensors (the parameters are on the meta
    # device).
    n = 3 if packed_rows else 2
    what = "--batch %d --seq %d: the step's %s [%d, %d] (int64)" % (
        batch, seq, "token ids, position_ids and labels" if packed_rows
        else "token ids and labels", batch, seq)
    problem = too_big(what, n * 8 * batch * seq)
    if problem:
        fail(problem)
    try:
        ids = torch.zeros(batch, seq, dtype=torch.long)
        if packed_rows:
            return ids, packed.example_positions(batch, seq), ids.clone()
        return ids, ids.clone()
    except RuntimeError as e:  # the allocator's "can't allocate memory"
        fail("%s cannot be allocated: %s" % (what, str(e).splitlines()[0]))
