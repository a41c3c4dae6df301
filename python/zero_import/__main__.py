"""zero-import: a PyTorch module's training step as zero-mlir input."""

import argparse
import math
import os
import sys

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
"""


def parser():
    p = argparse.ArgumentParser(
        prog="zero-import", epilog=USAGE_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Import a PyTorch nn.Module as a zero-mlir training step "
                    "(model.mlir) and its weights (model.safetensors).")
    p.add_argument("model", metavar="FILE.py:FUNCTION",
                   help="the file and the function returning (module, "
                        "example_args)")
    p.add_argument("-o", dest="output", required=True,
                   help="the .mlir file to write")
    p.add_argument("--weights", help="the safetensors file to write "
                   "(default: the output with .safetensors)")
    p.add_argument("--loss-output", type=int, default=-1,
                   help="which element of forward()'s tuple is the loss "
                        "(default: the last)")
    p.add_argument("--optimizer", choices=("adam", "adamw"),
                   help="default adamw")
    p.add_argument("--lr", type=float, help="default 1e-3")
    p.add_argument("--beta1", type=float, help="default 0.9")
    p.add_argument("--beta2", type=float, help="default 0.999")
    p.add_argument("--eps", type=float, help="default 1e-8")
    p.add_argument("--weight-decay", type=float, help="default 0.01")
    p.add_argument("--clip", type=float,
                   help="global gradient-norm clipping (default 0: off)")
    p.add_argument("--config", metavar="DS_CONFIG.json",
                   help="take the optimizer, gradient_clipping and bf16/fp16 "
                        "from a DeepSpeed config instead")
    p.add_argument("--dtype", choices=("f32", "bf16", "f16"),
                   help="training precision (default f32; with --config, "
                        "its bf16/fp16 section)")
    return p


def options(args):
    """(optimizer dict, clip, precision kind) from the command line."""
    from .importer import read_ds_config
    flags = ("optimizer", "lr", "beta1", "beta2", "eps", "weight_decay",
             "clip")
    given = [f for f in flags if getattr(args, f) is not None]
    if args.config:
        if given:
            raise ImportFailure("--config and --%s both set the optimizer" %
                                given[0].replace("_", "-"))
        opt, clip, dtype = read_ds_config(args.config)
        dtype = args.dtype or dtype or "f32"
    else:
        opt = {"kind": args.optimizer or "adamw",
               "lr": 1e-3 if args.lr is None else args.lr,
               "beta1": 0.9 if args.beta1 is None else args.beta1,
               "beta2": 0.999 if args.beta2 is None else args.beta2,
               "eps": 1e-8 if args.eps is None else args.eps,
               "weight_decay": 0.01 if args.weight_decay is None
               else args.weight_decay}
        clip = args.clip or 0.0
        dtype = args.dtype or "f32"
    checks = (("lr", opt["lr"] > 0), ("beta1", 0 <= opt["beta1"] < 1),
              ("beta2", 0 <= opt["beta2"] < 1), ("eps", opt["eps"] > 0),
              ("weight-decay", opt["weight_decay"] >= 0), ("clip", clip >= 0))
    for name, ok in checks:
        value = clip if name == "clip" else opt[name.replace("-", "_")]
        if not ok or not math.isfinite(value):
            raise ImportFailure("--%s %r is out of range" % (name, value))
    precision = {"f32": "fp32", "bf16": "bf16", "f16": "fp16"}[dtype]
    return opt, clip, precision


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        from .environment import check_torch
        check_torch()
        opt, clip, precision = options(args)
        from .importer import import_model, write_outputs
        g, loss, weights = import_model(args.model, args.loss_output)
        weights_path = args.weights or os.path.splitext(args.output)[0] + \
            ".safetensors"
        write_outputs(g, loss, weights, args.output, weights_path, opt,
                      precision, clip, args.model)
    except ImportFailure as e:
        print("zero-import: error: " + e.render(), file=sys.stderr)
        return 1
    except OSError as e:
        print("zero-import: error: %s: %s" % (e.filename, e.strerror),
              file=sys.stderr)
        return 1
    except Exception as e:  # a bug here, not the user's: say so, exit 2
        import traceback
        traceback.print_exc()
        print("zero-import: internal error: %s: %s" % (type(e).__name__, e),
              file=sys.stderr)
        return 2
    total = sum(w.size for _, w in weights)
    print("zero-import: %s: %d parameters in %d tensors, %d ops; weights in "
          "%s" % (args.output, total, len(weights), len(g.ops),
                  weights_path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
