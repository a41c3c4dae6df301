"""zero-import: a PyTorch module's training step as zero-mlir input."""

import argparse
import json
import math
import os
import sys
import traceback

from .checks import output_conflict
from .environment import check_torch
from .errors import ImportFailure

USAGE_EXAMPLE = """example:
  zero-import model.py:make -o model.mlir --optimizer adamw --lr 6e-4 \\
      --beta2 0.95 --weight-decay 0.1 --clip 1.0
  zero-compile model.mlir --stage 3 --world-size 2 -o train
  mpirun -np 2 ./train --init-from model.safetensors --data tokens.bin

make() returns (module, example_args); module(*example_args) returns the
loss, or a tuple holding it (--loss-output, default the last element).
The example arguments' shapes and dtypes are the step's inputs, dimension 0
the global batch.

A Hugging Face causal LM from its directory (config.json, and the weights
as model.safetensors or sharded with model.safetensors.index.json):
  zero-import --hf DIR --batch 8 --seq 512 -o model.mlir
Without weights in DIR it is initialised as from_config does after
torch.manual_seed(--seed); --no-weights imports it for planning only.
With LoRA adapters (PEFT), the model's own weights frozen:
  zero-import --hf DIR --lora r=8,alpha=16,target=q_proj,v_proj ...
"""


def parser():
    p = argparse.ArgumentParser(
        prog="zero-import", epilog=USAGE_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Import a PyTorch nn.Module, or a Hugging Face causal "
                    "language model (--hf), as a zero-mlir training step "
                    "(model.mlir) and its weights (model.safetensors).")
    p.add_argument("model", metavar="FILE.py:FUNCTION", nargs="?",
                   help="the file and the function returning (module, "
                        "example_args)")
    p.add_argument("-o", dest="output", required=True,
                   help="the .mlir file to write")
    p.add_argument("--weights", help="the safetensors file to write "
                   "(default: the output with .safetensors)")
    p.add_argument("--loss-output", type=int, default=-1,
                   help="which element of forward()'s tuple is the loss "
                        "(default: the last)")
    p.add_argument("--optimizer",
                   choices=("adam", "adamw", "lion", "sgd", "muon",
                            "adafactor"),
                   help="default adamw (muon: torch.optim.Muon on the hidden "
                        "matrices, AdamW on the rest, both at --lr; "
                        "adafactor: torch.optim.Adafactor with its defaults)")
    p.add_argument("--lr", type=float,
                   help="default 1e-3 (1e-2 for adafactor, torch's)")
    p.add_argument("--beta1", type=float, help="default 0.9")
    p.add_argument("--beta2", type=float, help="default 0.999")
    p.add_argument("--eps", type=float, help="default 1e-8")
    p.add_argument("--weight-decay", type=float,
                   help="default 0.01 (0 for lion, sgd and muon)")
    p.add_argument("--momentum", type=float, help="sgd: default 0")
    p.add_argument("--dampening", type=float, help="sgd: default 0")
    p.add_argument("--nesterov", action="store_true", default=None,
                   help="sgd: Nesterov momentum")
    p.add_argument("--optimizer-states", choices=("f32", "bf16", "int8"),
                   help="precision of the optimizer's states (default f32; "
                        "bf16 or int8: Adam/AdamW's moments in bf16 or "
                        "8 bits)")
    p.add_argument("--clip", type=float,
                   help="global gradient-norm clipping (default 0: off)")
    p.add_argument("--config", metavar="DS_CONFIG.json",
                   help="take the optimizer, gradient_clipping and bf16/fp16 "
                        "from a DeepSpeed config instead")
    p.add_argument("--dtype", choices=("f32", "bf16", "f16"),
                   help="training precision (default f32; with --config, "
                        "its bf16/fp16 section)")
    hf = p.add_argument_group("Hugging Face models")
    hf.add_argument("--hf", metavar="DIR",
                    help="import the causal language model in this "
                         "directory instead of FILE.py:FUNCTION")
    hf.add_argument("--batch", type=int,
                    help="the global batch of a step (with --hf)")
    hf.add_argument("--seq", type=int,
                    help="the tokens of each sequence (with --hf)")
    hf.add_argument("--no-weights", action="store_true",
                    help="never materialise the weights: the plan only, "
                         "initializers as the model's _init_weights")
    hf.add_argument("--seed", type=int, default=0,
                    help="torch.manual_seed before from_config, when DIR "
                         "has no weights (default 0)")
    hf.add_argument("--lora", metavar="SPEC",
                    help="train LoRA adapters (PEFT's get_peft_model with a "
                         "LoraConfig) on the frozen model: "
                         "r=8,alpha=16,target=q_proj,v_proj[,dropout=0]")
    hf.add_argument("--attn", choices=("sdpa", "eager"),
                    help="the attention implementation (default: "
                         "transformers' own, sdpa)")
    return p


def read_ds_config(path):
    """Optimizer, clipping and precision of a DeepSpeed ds_config.json."""
    try:
        text = open(path).read()
    except OSError as e:
        raise ImportFailure("%s: %s" % (path, e.strerror))
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as e:
        raise ImportFailure("%s:%d:%d: is not valid JSON: %s" % (
            path, e.lineno, e.colno, e.msg))
    if not isinstance(cfg, dict):
        raise ImportFailure("%s: the top level must be a JSON object" % path)
    opt = {"kind": "adamw", "lr": 1e-3, "beta1": 0.9, "beta2": 0.999,
           "eps": 1e-8, "weight_decay": 0.01}
    o = cfg.get("optimizer", {})
    kind = str(o.get("type", "AdamW")).lower()
    # torch.optim's classes, which DeepSpeed falls back to, by their exact
    # names.
    if o.get("type") in ("SGD", "Adafactor"):
        kind = o["type"].lower()
    elif kind not in ("adam", "adamw", "lion", "muon"):
        raise ImportFailure("%s: optimizer.type '%s' is not supported "
                            "(expected Adam, AdamW, Lion, SGD, Muon or "
                            "Adafactor)" % (path, o.get("type")))
    opt["kind"] = kind
    p = o.get("params", {})
    if kind == "adafactor":
        return read_ds_adafactor(path, p, opt), *read_ds_rest(cfg)
    if kind == "muon":
        return read_ds_muon(path, p, opt), *read_ds_rest(cfg)
    if kind == "sgd":
        # torch.optim.SGD's keywords and defaults.
        opt["weight_decay"] = 0.0
        for key in ("eps", "betas", "bias_correction", "adam_w_mode"):
            if key in p:
                raise ImportFailure("%s: optimizer.params.%s is not a "
                                    "parameter of SGD" % (path, key))
        if p.get("maximize"):
            raise ImportFailure("%s: optimizer.params.maximize is not "
                                "supported" % path)
        for key in ("momentum", "dampening"):
            opt[key] = float(p.get(key, 0.0))
        opt["nesterov"] = bool(p.get("nesterov", False))
    if kind == "lion":
        # DeepSpeed's Lion: no eps, no bias correction, weight decay 0.
        opt["weight_decay"] = 0.0
        for key in ("eps", "bias_correction", "adam_w_mode"):
            if key in p:
                raise ImportFailure("%s: optimizer.params.%s is not a "
                                    "parameter of Lion" % (path, key))
    for key in ("lr", "eps", "weight_decay"):
        if key in p:
            opt[key] = float(p[key])
    read_betas(path, p, opt)
    return (opt, *read_ds_rest(cfg))


def read_ds_adafactor(path, p, opt):
    """torch.optim.Adafactor's keywords and defaults: `eps` is its pair
    (eps1 None, written -1, and eps2)."""
    for key in p:
        if key not in ("lr", "beta2_decay", "eps", "d", "weight_decay",
                       "foreach", "maximize"):
            raise ImportFailure("%s: optimizer.params.%s is not a "
                                "parameter of Adafactor" % (path, key))
    opt.update(adafactor_defaults())
    opt["lr"] = float(p.get("lr", 1e-2))
    opt["weight_decay"] = float(p.get("weight_decay", 1e-2))
    opt["beta2_decay"] = float(p.get("beta2_decay", -0.8))
    opt["d"] = float(p.get("d", 1.0))
    opt["maximize"] = bool(p.get("maximize", False))
    if "eps" in p:
        e = p["eps"]
        if not (isinstance(e, list) and len(e) == 2 and e[1] is not None):
            raise ImportFailure("%s: optimizer.params.eps: expected "
                                "[eps1 or null, eps2]" % path)
        opt["eps1"] = -1.0 if e[0] is None else float(e[0])
        opt["eps2"] = float(e[1])
    return opt


def adafactor_defaults():
    """torch.optim.Adafactor's own hyper-parameters at its defaults."""
    return {"beta2_decay": -0.8, "eps1": -1.0, "eps2": 1e-3, "d": 1.0,
            "maximize": False}


def read_betas(path, p, opt):
    if "betas" in p:
        b = p["betas"]
        if not (isinstance(b, list) and len(b) == 2):
            raise ImportFailure("%s: optimizer.params.betas: expected "
                                "[beta1, beta2]" % path)
        opt["beta1"], opt["beta2"] = float(b[0]), float(b[1])


def read_ds_muon(path, p, opt):
    """DeepSpeed's Muon: `lr` shared, `muon_lr` and `adam_lr` each the lr
    of its half, `momentum` Muon's, the betas and eps AdamW's, one
    weight_decay; DeepSpeed's defaults for absent keys."""
    for key in p:
        if key not in ("lr", "muon_lr", "adam_lr", "momentum",
                       "weight_decay", "betas", "eps", "ns_method"):
            raise ImportFailure("%s: optimizer.params.%s is not a "
                                "parameter of Muon" % (path, key))
    # DeepSpeed 0.19 defaults to its "gram" Newton-Schulz; only torch's
    # ("standard") is implemented.
    method = p.get("ns_method", "gram")
    if method != "standard":
        raise ImportFailure("%s: optimizer.params.ns_method '%s' is not "
                            "supported (only \"standard\", torch.optim.Muon's "
                            "Newton-Schulz; DeepSpeed's default is \"gram\")" %
                            (path, method))
    shared = p.get("lr")
    opt["muon_lr"] = float(p.get("muon_lr", 0.02 if shared is None
                                 else shared))
    opt["lr"] = float(p.get("adam_lr", 3e-4 if shared is None else shared))
    opt["muon_momentum"] = float(p.get("momentum", 0.95))
    opt["beta1"], opt["beta2"] = 0.9, 0.95
    read_betas(path, p, opt)
    opt["eps"] = float(p.get("eps", 1e-10))
    opt["weight_decay"] = float(p.get("weight_decay", 0.0))
    return opt


def read_ds_rest(cfg):
    """gradient_clipping and the precision of a ds_config."""
    clip = float(cfg.get("gradient_clipping", 0.0))
    dtype = None
    if cfg.get("bf16", {}).get("enabled"):
        dtype = "bf16"
    if cfg.get("fp16", {}).get("enabled"):
        dtype = "f16"
    return clip, dtype


def options(args):
    """(optimizer dict, clip, precision kind) from the command line."""
    flags = ("optimizer", "lr", "beta1", "beta2", "eps", "weight_decay",
             "clip", "momentum", "dampening", "nesterov")
    given = [f for f in flags if getattr(args, f) is not None]
    if args.config:
        if given:
            raise ImportFailure("--config and --%s both set the optimizer" %
                                given[0].replace("_", "-"))
        try:
            opt, clip, dtype = read_ds_config(args.config)
        except (TypeError, ValueError, AttributeError, KeyError, IndexError,
                OverflowError, RecursionError) as e:
            # A value of another type than the key's (a section that is
            # not an object, an "auto" where a number goes, bytes that are
            # not UTF-8): the user's file, not a bug here.
            raise ImportFailure("%s: cannot read it: %s: %s" % (
                args.config, type(e).__name__, e))
        dtype = args.dtype or dtype or "f32"
    else:
        opt = {"kind": args.optimizer or "adamw",
               "lr": (1e-2 if args.optimizer == "adafactor" else 1e-3)
               if args.lr is None else args.lr,
               "beta1": 0.9 if args.beta1 is None else args.beta1,
               "beta2": 0.999 if args.beta2 is None else args.beta2,
               "eps": 1e-8 if args.eps is None else args.eps,
               # DeepSpeed's Lion and torch's SGD decay nothing by
               # default.
               "weight_decay":
               (0.0 if args.optimizer in ("lion", "sgd", "muon") else 0.01)
               if args.weight_decay is None else args.weight_decay}
        sgd_flags = [f for f in ("momentum", "dampening", "nesterov")
                     if getattr(args, f) is not None]
        if opt["kind"] == "sgd":
            opt["momentum"] = args.momentum or 0.0
            opt["dampening"] = args.dampening or 0.0
            opt["nesterov"] = bool(args.nesterov)
        elif sgd_flags:
            raise ImportFailure("--%s is a parameter of --optimizer sgd" %
                                sgd_flags[0])
        if opt["kind"] == "muon":
            # DeepSpeed's shared lr: both halves at --lr.
            opt["muon_lr"] = opt["lr"]
            opt["muon_momentum"] = 0.95
        if opt["kind"] == "adafactor":
            opt.update(adafactor_defaults())
        clip = args.clip or 0.0
        dtype = args.dtype or "f32"
    if args.optimizer_states and args.optimizer_states != "f32":
        # optimizers.def's ZRT_OPTIMIZER_PRECISION rows.
        if opt["kind"] not in ("adam", "adamw"):
            raise ImportFailure("--optimizer-states %s needs --optimizer adam "
                                "or adamw, got %s" %
                                (args.optimizer_states, opt["kind"]))
        opt["states"] = args.optimizer_states
    checks = (("lr", opt["lr"] > 0), ("beta1", 0 <= opt["beta1"] < 1),
              ("beta2", 0 <= opt["beta2"] < 1), ("eps", opt["eps"] > 0),
              ("weight-decay", opt["weight_decay"] >= 0), ("clip", clip >= 0))
    if opt["kind"] == "sgd":
        checks += (("momentum", opt["momentum"] >= 0),
                   ("dampening", True))
        if opt["nesterov"] and (opt["momentum"] <= 0 or opt["dampening"]):
            raise ImportFailure("--nesterov needs a momentum > 0 and zero "
                                "dampening (torch.optim.SGD's rule)")
    if opt["kind"] == "muon":
        checks += (("muon-lr", opt["muon_lr"] > 0),
                   ("muon-momentum", 0 <= opt["muon_momentum"] < 1))
    if opt["kind"] == "adafactor":
        # torch.optim.Adafactor's checks (eps1 -1 is its None).
        checks += (("beta2-decay", opt["beta2_decay"] <= 0),
                   ("eps1", opt["eps1"] >= 0 or opt["eps1"] == -1.0),
                   ("eps2", opt["eps2"] >= 0), ("d", opt["d"] > 0))
    for name, ok in checks:
        value = clip if name == "clip" else opt[name.replace("-", "_")]
        if not ok or not math.isfinite(value):
            raise ImportFailure("--%s %r is out of range" % (name, value))
    precision = {"f32": "fp32", "bf16": "bf16", "f16": "fp16"}[dtype]
    return opt, clip, precision


def check_source(p, args):
    """Exactly one of FILE.py:FUNCTION and --hf, and each's own flags."""
    if (args.model is None) == (args.hf is None):
        p.error("give FILE.py:FUNCTION or --hf DIR (one of them)")
    hf_only = [f for f in ("batch", "seq", "no_weights", "attn", "lora")
               if getattr(args, f) not in (None, False)]
    if args.model is not None and hf_only:
        p.error("--%s goes with --hf" % hf_only[0].replace("_", "-"))
    if args.hf is not None:
        if args.batch is None or args.seq is None:
            p.error("--hf needs --batch and --seq")
        if args.loss_output != -1:
            p.error("--loss-output goes with FILE.py:FUNCTION")
        if args.no_weights and args.weights:
            p.error("--no-weights writes no weights (--weights)")


def check_outputs(args, weights_path):
    """-o and the weights are written at exactly their paths: neither may be
    a directory, the other, or a file the import reads."""
    from .hf import input_files
    outputs = [("-o", args.output)]
    if not args.no_weights:
        outputs.append(("--weights" if args.weights else
                        "--weights (by default -o's name with "
                        ".safetensors)", weights_path))
    inputs = [("a file --hf reads", path) for path in input_files(args.hf)] \
        if args.hf is not None else \
        [("the model's source",
          args.model.rpartition(":")[0] or args.model)]
    if args.config:
        inputs.append(("--config", args.config))
    problem = output_conflict(outputs, inputs)
    if problem:
        raise ImportFailure(problem)


def main(argv=None):
    # Paths are bytes; those that are not UTF-8 (os.fsdecode's surrogates)
    # print as they are, whatever the locale's error handler.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="surrogateescape")
    p = parser()
    args = p.parse_args(argv)
    check_source(p, args)
    try:
        check_torch()
        opt, clip, precision = options(args)
        # The importer's modules import PyTorch: loaded once check_torch has
        # found it, so that --help and a Python without it need none.
        from .importer import import_hf, import_model, write_outputs
        weights_path = args.weights or os.path.splitext(args.output)[0] + \
            ".safetensors"
        check_outputs(args, weights_path)
        if args.hf is not None:
            g, loss, weights = import_hf(args.hf, args.batch, args.seq,
                                         args.no_weights, args.seed,
                                         args.attn, precision, args.lora)
            source = "--hf " + os.path.basename(os.path.normpath(args.hf))
        else:
            g, loss, weights = import_model(args.model, args.loss_output,
                                            precision)
            source = os.path.basename(args.model)
        write_outputs(g, loss, weights, args.output, weights_path, opt,
                      precision, clip, source)
    except ImportFailure as e:
        print("zero-import: error: " + e.render(), file=sys.stderr)
        return 1
    except OSError as e:
        print("zero-import: error: %s: %s" % (e.filename, e.strerror),
              file=sys.stderr)
        return 1
    except Exception as e:  # a bug here, not the user's: say so, exit 2
        traceback.print_exc()
        print("zero-import: internal error: %s: %s" % (type(e).__name__, e),
              file=sys.stderr)
        return 2
    total = sum(math.prod(shape) for _, shape, _ in g.params)
    print("zero-import: %s: %d parameters in %d tensors, %d ops; %s" % (
        args.output, total, len(g.params), len(g.ops),
        "weights in " + weights_path if weights is not None else
        "no weights (--no-weights)"))
    if g.frozen:
        frozen = [(n, shape) for n, shape, _ in g.params if n in g.frozen]
        print("zero-import: %d parameters in %d tensors frozen "
              "(requires_grad=False), %d trainable" % (
                  sum(math.prod(shape) for _, shape in frozen), len(frozen),
                  total - sum(math.prod(shape) for _, shape in frozen)))
    if g.compute:
        print("zero-import: %d of %d parameter tensors kept in float32 (%s), "
              "the others computing in %s" % (
                  len(g.params) - len(g.compute), len(g.params),
                  " and ".join(g.fp32_reasons),
                  next(iter(g.compute.values()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
