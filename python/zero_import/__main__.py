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
from .optimizers import Kind, OPTIMIZERS, PARAMS, STATE_PRECISIONS

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
On rows of packed documents (position_ids an input of the step):
  zero-import --hf DIR --batch 8 --seq 512 --packed -o model.mlir
"""


# -- the optimizers ----------------------------------------------------------
#
# Their names, ds_config types, parameters, keys and defaults are
# optimizers.def's (optimizers.py, generated from it); what follows is what
# the table does not say, keyed by it.

# The optimizer when neither --optimizer nor a ds_config names one.
DEFAULT_KIND = Kind.AdamW

# ds_config keys that are no parameter of the table: DeepSpeed's Muon's
# adam_lr (the AdamW half's lr) and ns_method, torch.optim.Adafactor's
# foreach (an implementation of the same update), accepted where the
# optimizer's own keys are the only ones allowed.
EXTRA_DS_KEYS = {Kind.Muon: ("adam_lr", "ns_method"),
                 Kind.Adafactor: ("foreach",)}
# The keys of DeepSpeed's Adam that are refused for an optimizer whose
# constructor does not take them (DeepSpeed's TypeError), in this order;
# adam_w_mode (AdamW unless false) is no parameter of the table but Adam's
# and AdamW's.
DS_ADAM_KEYS = ("eps", "betas", "bias_correction", "adam_w_mode")
ADAM_W_MODE_KINDS = (Kind.Adam, Kind.AdamW)
# DeepSpeed's bias_correction: zero-import neither reads nor writes it
# (#zero.optimizer's default).
NOT_READ = ("bias_correction",)
# The parameters of every #zero.optimizer that zero-import writes (another
# kind's at their defaults), each with its flag (--lr, ..., --weight-decay):
# the default optimizer's.
BASE = tuple(name for name, _, _ in OPTIMIZERS[DEFAULT_KIND]["params"]
             if name not in NOT_READ)
# The flags of an optimizer's own parameters (those of the kinds that have
# them), the help of a switch.
OWN_FLAGS = {"momentum": None, "dampening": None,
             "nesterov": "Nesterov momentum"}


def ds_keys(kind):
    """{parameter: ds_config key} of `kind`'s parameters that have one."""
    return {name: key for name, key, _ in OPTIMIZERS[kind]["params"] if key}


def ds_pairs(kind):
    """{ds_config key: (parameter, ...)} of `kind`'s keys that are lists
    (betas[0], betas[1])."""
    pairs = {}
    for name, key in ds_keys(kind).items():
        if "[" in key:
            top, index = key[:-1].split("[")
            pairs.setdefault(top, {})[int(index)] = name
    return {top: tuple(names[i] for i in sorted(names))
            for top, names in pairs.items()}


def ds_top_keys(kind):
    """The keys of `optimizer.params` that set `kind`'s parameters."""
    return [key.split("[")[0] for key in ds_keys(kind).values()]


def type_name(kind):
    """How the ds_config names `kind`, in messages."""
    row = OPTIMIZERS[kind]
    return (row["ds_types"] + row["torch_types"])[0]


def imported(kind):
    """The parameters zero-import sets for `kind`: BASE, then the kind's
    own that a ds_config can set (a parameter without a key stays at
    #zero.optimizer's default)."""
    return BASE + tuple(name for name, key, _ in OPTIMIZERS[kind]["params"]
                        if key and name not in BASE and name not in NOT_READ)


def default(kind, name):
    """zero-import's value for parameter `name` of `kind` when nothing
    sets it: the table's ZRT_OPTIMIZER_IMPORT_DEFAULT, else the
    parameter's."""
    own = OPTIMIZERS[kind]["import_defaults"]
    if name in own:
        return own[name]
    row = {n: d for n, _, d in OPTIMIZERS[kind]["params"]}
    for value in (row.get(name), PARAMS.get(name)):
        if value is not None:
            return value
    raise LookupError("optimizers.def gives %s's parameter %s no default" %
                      (kind, name))


def default_options(kind):
    """The options dict of `kind` at zero-import's defaults."""
    opt = {"kind": kind}
    for name in imported(kind):
        opt[name] = default(kind, name)
    return opt


def either(items, word="or"):
    """'a, b or c'."""
    items = list(items)
    return ", ".join(items[:-1]) + (" %s " % word if len(items) > 1
                                    else "") + items[-1]


def shown(value):
    """A default as the help shows it (1e-8, 0.9, 0)."""
    text = "%g" % value
    mantissa, e, exponent = text.partition("e")
    return mantissa + e + (str(int(exponent)) if e else "")


def default_help(name):
    """'default X', with the kinds whose default differs."""
    by_value = {}
    for kind in OPTIMIZERS:
        by_value.setdefault(default(kind, name), []).append(kind)
    base = default(DEFAULT_KIND, name)
    others = ["%s for %s" % (shown(v), either(kinds, "and"))
              for v, kinds in by_value.items() if v != base]
    return "default %s%s" % (shown(base), " (%s)" % "; ".join(others)
                             if others else "")


def owners(name):
    """The kinds whose parameter `name` zero-import sets."""
    return either(kind for kind in OPTIMIZERS if name in imported(kind))


def states_help():
    by_kinds = {}
    for precision in STATE_PRECISIONS[1:]:
        kinds = tuple(k for k, row in OPTIMIZERS.items()
                      if precision in row["precisions"])
        by_kinds.setdefault(kinds, []).append(precision)
    return "precision of the optimizer's states (default %s; %s)" % (
        STATE_PRECISIONS[0], "; ".join(
            "%s with --optimizer %s" % (either(precisions), either(kinds))
            for kinds, precisions in by_kinds.items()))


def add_optimizer_flags(p):
    p.add_argument("--optimizer", choices=tuple(OPTIMIZERS),
                   help="default %s (%s: torch.optim.Muon on the hidden "
                        "matrices, AdamW on the rest, both at --lr; "
                        "%s: torch.optim.Adafactor with its defaults)" % (
                            DEFAULT_KIND, Kind.Muon, Kind.Adafactor))
    for name in BASE:
        p.add_argument("--" + name.replace("_", "-"), type=float,
                       help=default_help(name))
    for name, switch in OWN_FLAGS.items():
        if switch is None:
            kind = next(k for k in OPTIMIZERS if name in imported(k))
            p.add_argument("--" + name.replace("_", "-"), type=float,
                           help="%s: default %s" % (
                               owners(name), shown(default(kind, name))))
        else:
            p.add_argument("--" + name.replace("_", "-"),
                           action="store_true", default=None,
                           help="%s: %s" % (owners(name), switch))
    p.add_argument("--optimizer-states", choices=STATE_PRECISIONS,
                   help=states_help())


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
    add_optimizer_flags(p)
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
    hf.add_argument("--packed", action="store_true",
                    help="padding-free packed rows: the step takes "
                         "position_ids [B, T] beside the ids and labels, "
                         "restarting at 0 at each document; each token "
                         "attends within its document and rotates by its "
                         "position, as transformers computes with "
                         "position_ids and no attention mask")
    return p


def ds_kind(t):
    """The kind a ds_config's optimizer.type selects, or None: torch.optim's
    classes, which DeepSpeed falls back to, by their exact names, and
    DeepSpeed's own without regard to case."""
    for kind, row in OPTIMIZERS.items():
        if t in row["torch_types"]:
            return kind
    t = str(t).lower()
    for kind, row in OPTIMIZERS.items():
        if t in [d.lower() for d in row["ds_types"]]:
            return kind
    return None


def not_a_parameter(path, key, kind):
    return ImportFailure("%s: optimizer.params.%s is not a parameter of %s" %
                         (path, key, type_name(kind)))


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
    o = cfg.get("optimizer", {})
    kind = ds_kind(o.get("type", type_name(DEFAULT_KIND)))
    if kind is None:
        raise ImportFailure("%s: optimizer.type '%s' is not supported "
                            "(expected %s)" % (path, o.get("type"), either(
                                t for row in OPTIMIZERS.values()
                                for t in row["ds_types"] +
                                row["torch_types"])))
    opt = default_options(kind)
    p = o.get("params", {})
    if kind == Kind.Adafactor:
        return read_ds_adafactor(path, p, opt), *read_ds_rest(cfg)
    if kind == Kind.Muon:
        return read_ds_muon(path, p, opt), *read_ds_rest(cfg)
    keys = ds_top_keys(kind)
    for key in DS_ADAM_KEYS:
        takes = key in keys or (key == "adam_w_mode" and
                                kind in ADAM_W_MODE_KINDS)
        if key in p and not takes:
            raise not_a_parameter(path, key, kind)
    if kind == Kind.SGD and p.get("maximize"):
        # torch.optim.SGD's maximize.
        raise ImportFailure("%s: optimizer.params.maximize is not "
                            "supported" % path)
    # The optimizer's own keys, then BASE's, then the lists (betas).
    names = imported(kind)
    for name in [n for n in names if n not in BASE] + list(BASE):
        key = ds_keys(kind).get(name, "")
        if key and "[" not in key and key in p:
            opt[name] = bool(p[key]) if isinstance(opt[name], bool) \
                else float(p[key])
    read_lists(path, p, opt, kind)
    return (opt, *read_ds_rest(cfg))


def read_lists(path, p, opt, kind):
    """The keys of `kind` that are lists of its parameters (betas)."""
    for key, names in ds_pairs(kind).items():
        if key in p:
            b = p[key]
            if not (isinstance(b, list) and len(b) == len(names)):
                raise ImportFailure("%s: optimizer.params.%s: expected "
                                    "[%s]" % (path, key, ", ".join(names)))
            for name, value in zip(names, b):
                opt[name] = float(value)


def read_ds_adafactor(path, p, opt):
    """torch.optim.Adafactor's keywords and defaults: `eps` is its pair
    (eps1 None, written as eps1's default -1, and eps2)."""
    kind = Kind.Adafactor
    allowed = ds_top_keys(kind) + list(EXTRA_DS_KEYS[kind])
    for key in p:
        if key not in allowed:
            raise not_a_parameter(path, key, kind)
    for name, key in ds_keys(kind).items():
        if "[" not in key:
            d = default(kind, name)
            opt[name] = bool(p.get(key, d)) if isinstance(d, bool) \
                else float(p.get(key, d))
    for key, (first, second) in ds_pairs(kind).items():
        if key in p:
            e = p[key]
            if not (isinstance(e, list) and len(e) == 2 and
                    e[1] is not None):
                raise ImportFailure("%s: optimizer.params.%s: expected "
                                    "[%s or null, %s]" % (path, key, first,
                                                          second))
            opt[first] = default(kind, first) if e[0] is None \
                else float(e[0])
            opt[second] = float(e[1])
    return opt


def read_ds_muon(path, p, opt):
    """DeepSpeed's Muon: `lr` shared, `muon_lr` and `adam_lr` each the lr
    of its half, `momentum` Muon's, the betas and eps AdamW's, one
    weight_decay; DeepSpeed's defaults for absent keys."""
    kind = Kind.Muon
    keys = ds_keys(kind)
    allowed = ds_top_keys(kind) + list(EXTRA_DS_KEYS[kind])
    for key in p:
        if key not in allowed:
            raise not_a_parameter(path, key, kind)
    # DeepSpeed 0.19 defaults to its "gram" Newton-Schulz; only torch's
    # ("standard") is implemented.
    method = p.get("ns_method", "gram")
    if method != "standard":
        raise ImportFailure("%s: optimizer.params.ns_method '%s' is not "
                            "supported (only \"standard\", torch.optim.Muon's "
                            "Newton-Schulz; DeepSpeed's default is \"gram\")" %
                            (path, method))

    def ds_default(name):
        return OPTIMIZERS[kind]["ds_defaults"].get(name, default(kind, name))

    shared = p.get(keys["lr"])
    opt["muon_lr"] = float(p.get(keys["muon_lr"], ds_default("muon_lr")
                                 if shared is None else shared))
    opt["lr"] = float(p.get("adam_lr", ds_default("lr") if shared is None
                            else shared))
    opt["muon_momentum"] = float(p.get(keys["muon_momentum"],
                                       ds_default("muon_momentum")))
    opt["beta1"], opt["beta2"] = ds_default("beta1"), ds_default("beta2")
    read_lists(path, p, opt, kind)
    opt["eps"] = float(p.get(keys["eps"], ds_default("eps")))
    opt["weight_decay"] = float(p.get(keys["weight_decay"],
                                      ds_default("weight_decay")))
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
    flags = ("optimizer",) + BASE + ("clip",) + tuple(OWN_FLAGS)
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
        opt = default_options(args.optimizer or DEFAULT_KIND)
        for name in BASE:
            if getattr(args, name) is not None:
                opt[name] = getattr(args, name)
        for name in OWN_FLAGS:
            value = getattr(args, name)
            if name in opt:
                opt[name] = value or opt[name]
            elif value is not None:
                raise ImportFailure("--%s is a parameter of --optimizer %s" %
                                    (name.replace("_", "-"), owners(name)))
        if opt["kind"] == Kind.Muon:
            # DeepSpeed's shared lr: both halves at --lr.
            opt["muon_lr"] = opt["lr"]
        clip = args.clip or 0.0
        dtype = args.dtype or "f32"
    if args.optimizer_states and \
            args.optimizer_states != STATE_PRECISIONS[0]:
        # optimizers.def's ZRT_OPTIMIZER_PRECISION rows.
        if args.optimizer_states not in OPTIMIZERS[opt["kind"]]["precisions"]:
            raise ImportFailure("--optimizer-states %s needs --optimizer %s, "
                                "got %s" % (args.optimizer_states, either(
                                    k for k, row in OPTIMIZERS.items()
                                    if args.optimizer_states in
                                    row["precisions"]), opt["kind"]))
        opt["states"] = args.optimizer_states
    checks = (("lr", opt["lr"] > 0), ("beta1", 0 <= opt["beta1"] < 1),
              ("beta2", 0 <= opt["beta2"] < 1), ("eps", opt["eps"] > 0),
              ("weight-decay", opt["weight_decay"] >= 0), ("clip", clip >= 0))
    # torch's and DeepSpeed's range checks of the optimizers' own
    # parameters.
    if opt["kind"] == Kind.SGD:
        checks += (("momentum", opt["momentum"] >= 0),
                   ("dampening", True))
        if opt["nesterov"] and (opt["momentum"] <= 0 or opt["dampening"]):
            raise ImportFailure("--nesterov needs a momentum > 0 and zero "
                                "dampening (torch.optim.SGD's rule)")
    if opt["kind"] == Kind.Muon:
        checks += (("muon-lr", opt["muon_lr"] > 0),
                   ("muon-momentum", 0 <= opt["muon_momentum"] < 1))
    if opt["kind"] == Kind.Adafactor:
        # torch.optim.Adafactor's checks (eps1's default, -1, is its None).
        checks += (("beta2-decay", opt["beta2_decay"] <= 0),
                   ("eps1", opt["eps1"] >= 0 or
                    opt["eps1"] == default(Kind.Adafactor, "eps1")),
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
    hf_only = [f for f in ("batch", "seq", "no_weights", "attn", "lora",
                           "packed")
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
                                         args.attn, precision, args.lora,
                                         args.packed)
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
