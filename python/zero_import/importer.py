"""From `model.py:make` to model.mlir and model.safetensors."""

import importlib.util
import os
import sys

import torch

from . import hf, lora, packed, safetensors
from .errors import ImportFailure
from .fuse import fuse_all, rotary_tables
from .lower import Lowering, is_sym
from .precision import keep_in_fp32
from .printer import fmt_float, optimizer_attr, print_module
from .trace import trace


def load_make(spec):
    """The make() function named by 'path/model.py:make'."""
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise ImportFailure("expected FILE.py:FUNCTION, got '%s'" % spec)
    if not os.path.isfile(path):
        raise ImportFailure("%s: no such file" % path)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    module_spec = importlib.util.spec_from_file_location(
        "zero_import_user_model", path)
    mod = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(mod)
    except Exception as e:
        raise ImportFailure("%s: importing it failed: %s: %s" % (
            path, type(e).__name__, e))
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise ImportFailure("%s has no function '%s'" % (path, name))
    return fn


def call_make(fn, spec):
    try:
        result = fn()
    except Exception as e:
        raise ImportFailure("%s() failed: %s: %s" % (spec, type(e).__name__,
                                                     e))
    if not (isinstance(result, (tuple, list)) and len(result) == 2 and
            isinstance(result[0], torch.nn.Module)):
        raise ImportFailure("%s() must return (module, example_args)" % spec)
    module, args = result
    if torch.is_tensor(args):
        args = (args,)
    if not isinstance(args, (tuple, list)):
        raise ImportFailure("%s(): example_args must be a tuple of tensors"
                            % spec)
    return module, tuple(args)


def init_text(t):
    """The zero.param initializer that describes a tensor: the weights
    themselves come from the safetensors file (--init-from)."""
    if bool((t == 0).all()):
        return "zeros"
    if bool((t == 1).all()):
        return "ones"
    std = float(t.double().pow(2).mean().sqrt())
    return "normal std " + fmt_float(std)


def import_model(spec, loss_output=-1, precision="fp32"):
    """(Graph, loss Sym, [(name, float32 array)]) of make()'s module,
    trained at `precision` (a transformers model keeps its float32 modules,
    precision.py)."""
    module, args = call_make(load_make(spec), spec)
    lora.check(module)
    # The weights as make() left them, whatever the trace runs.
    state = {name: p.detach().cpu().clone() for name, p in
             list(module.named_parameters()) + list(module.named_buffers())}
    # A PeftModel itself is a causal LM's adapters: traced as its loss with
    # labels=, as --hf traces a model, so that its names are PEFT's.
    peft_root = [m for p, m in lora.peft_roots(module) if p == ""]
    g_fx = trace(module, args, step=hf.step if peft_root else None)
    step = lower_step(module, g_fx, loss_output,
                      lambda name, p: state[name])
    if peft_root:
        hf.check_loss(step[0], module)
    keep_in_fp32(step[0], module, precision)
    params = {name for name, _, _ in step[0].params}
    step[0].peft = lora.peft_info(module, params)
    if peft_root and hf.is_pretrained(peft_root[0].get_base_model()):
        step[0].hf_model = hf.export_info(module, params)
        rename_params(step, hf.saved_names(module))
    return step


def import_hf(directory, batch, seq, no_weights=False, seed=0, attn=None,
              precision="fp32", lora_spec=None, packed_rows=False):
    """(Graph, loss Sym, [(name, float32 array)] or None) of the causal LM
    in a Hugging Face directory (hf.py), its step on [batch, seq] tokens
    trained at `precision` (its float32 modules kept, precision.py); with
    `lora_spec` (--lora), of its PeftModel with LoRA adapters (lora.py);
    with `packed_rows` (--packed), on rows of packed documents, their
    position_ids an input (packed.py)."""
    model, recorder, weights = hf.build(directory, no_weights, seed, attn)
    if packed_rows:
        packed.refuse(model)
    if lora_spec is not None:
        model, weights = hf.with_lora(model, recorder, weights, lora_spec,
                                      seed)
    g_fx = trace(model, hf.example_args(batch, seq, packed_rows),
                 step=hf.packed_step if packed_rows else hf.step,
                 packed_rows=packed_rows)
    if weights is None:
        step = lower_step(model, g_fx, -1, None, recorder.init_text,
                          packed_rows)
    else:
        step = lower_step(model, g_fx, -1, lambda name, p: weights[name],
                          packed_rows=packed_rows)
    hf.check_loss(step[0], model)
    if packed_rows:
        packed.check_step(step[0])
    keep_in_fp32(step[0], model, precision)
    params = {name for name, _, _ in step[0].params}
    step[0].hf_model = hf.export_info(model, params)
    step[0].peft = lora.peft_info(model, params, directory)
    rename_params(step, hf.saved_names(model))
    if step[2] is not None:
        # The weights file holds the checkpoint's other tensors too, so that
        # --init-from reads it as it reads the model's directory.
        _, _, buffers, unused = step[0].hf_model
        step[2].extend((name, weights[param]) for name, param in
                       unused.items())
        step[2].extend(buffers.items())
    return step


def rename_params(step, names):
    """The step's parameters `old` of `names` named names[old] (a Hugging
    Face model's, as save_pretrained writes them), their weights too."""
    g, _, weights = step
    g.rename_params(names)
    if weights is not None:
        weights[:] = [(names.get(n, n), t) for n, t in weights]


def lower_step(module, g_fx, loss_output, weight_of, init_of=None,
               packed_rows=False):
    """(Graph, loss Sym, weights) of a traced step: each parameter reaching
    the loss is a zero.param whose initializer is init_of(name, p), or
    describes its weights, weight_of(name, p) (None: no weights)."""
    low = Lowering(module, g_fx, packed_rows)
    g = low.run()
    out = low.output
    if isinstance(out, dict):
        raise ImportFailure("forward() returns a dict; return the loss, or a "
                            "tuple holding it (--loss-output)")
    if isinstance(out, (tuple, list)):
        if not -len(out) <= loss_output < len(out):
            raise ImportFailure("--loss-output %d: forward() returns %d "
                                "values" % (loss_output, len(out)))
        loss = out[loss_output]
    else:
        if loss_output not in (0, -1):
            raise ImportFailure("--loss-output %d: forward() returns one "
                                "value" % loss_output)
        loss = out
    if not is_sym(loss) or loss.shape != () or not loss.is_float:
        raise ImportFailure("the loss (forward()'s output %d) must be a "
                            "scalar float tensor computed from the inputs"
                            % loss_output)
    fuse_all(g, [loss], rotary_tables(module), packed_rows)
    used = set()
    for op in g.ops:
        for o in op.operands:
            if o is not None and o.param is not None:
                used.add(o.param)
    weights = [] if weight_of is not None else None
    # The buffers the step reads (Lowering.buffer), frozen parameters.
    read = [(name, b) for name, b in module.named_buffers() if name in used]
    for name, p in list(module.named_parameters()) + read:
        if name not in used:
            print("zero-import: warning: parameter '%s' does not reach the "
                  "loss; it is left out" % name, file=sys.stderr)
            continue
        if weight_of is None:
            g.params.append((name, tuple(p.shape), init_of(name, p)))
            continue
        t = weight_of(name, p)
        if hasattr(t, "tensor"):
            # Read from a file: described now, read again when written, so
            # that one tensor at a time is in memory.
            g.params.append((name, t.shape, init_text(t.tensor())))
            weights.append((name, t))
        else:
            g.params.append((name, tuple(t.shape), init_text(t)))
            weights.append((name, t.numpy()))
    if g.params and all(name in g.frozen for name, _, _ in g.params):
        raise ImportFailure("every parameter reaching the loss is frozen "
                            "(requires_grad=False): the step has nothing "
                            "to train")
    for a in g.args:
        if a.shape[0] <= 0:
            raise ImportFailure("input '%s' has an empty batch" % a.arg)
    return g, loss, weights


def label_convention(g):
    """The step's `labels`: `same_tokens` when its loss shifts its labels
    inside (nn.shift_labels of an input, a causal LM's `labels=`) and its
    inputs are token ids and labels of one shape [B, T] (with --packed,
    the position_ids between them), so that `--data` feeds each window of
    T tokens as both and nothing is shifted twice; None (the default,
    next_token) otherwise."""
    if len(g.args) not in (2, 3) or any(a.is_float or len(a.shape) != 2
                                        for a in g.args) or \
            any(a.shape != g.args[0].shape for a in g.args) or \
            len(g.args) == 3 and g.args[1].arg != "position_ids":
        return None
    for op in g.ops:
        labels = op.operands[1] if op.kind == "softmax_cross_entropy" \
            else None
        if labels is not None and labels.op is not None and \
                labels.op.kind == "shift_labels" and \
                any(labels.op.operands[0] is a for a in g.args):
            return "same_tokens"
    return None


def write_outputs(g, loss, weights, out_path, weights_path, opt, precision,
                  clip, spec):
    """model.mlir, and the weights unless there are none (`--no-weights`).
    `spec` names the source in the header line."""
    # A path's bytes that are not UTF-8 (os.fsdecode's surrogates) as \xNN:
    # the .mlir file is UTF-8.
    spec = spec.encode("utf-8", "surrogateescape").decode(
        "utf-8", "backslashreplace")
    header = "// Generated by zero-import from %s." % spec
    text = print_module(g, loss, optimizer_attr(opt),
                        "#zero.precision<kind = %s>" % precision, clip,
                        header, label_convention(g))
    with open(out_path, "w") as f:
        f.write(text)
    if weights is not None:
        safetensors.write(weights_path, weights)
