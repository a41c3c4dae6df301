#!/usr/bin/env python3
"""An independent numpy implementation of what a compiled MLP executable
does: the zero-model-gen MLP (x @ W + b, ReLU between layers or SiLU with
--activation silu, mean softmax cross-entropy), float64 forward and
backward, and torch.optim.Adam/AdamW's update rule, on the same data order (consecutive rows of the global batch,
wrapping). Reads the initial weights with its own safetensors parser and
compares the losses of --log and the weights of --final, and each step's
`tokens` with the labels its loss averages over. With --ignore-index, the
loss is the mean over the labels other than it of the whole global batch;
a global batch without one stops the run, so the log never holds it."""

import argparse
import json
import re
import struct
import sys

import numpy as np


def load_safetensors(path):
    data = open(path, "rb").read()
    (length,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + length])
    base = 8 + length
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] == "F32", entry
        begin, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(data[base + begin:base + end],
                                      dtype="<f4").reshape(entry["shape"])
    return tensors


def optimizer(model_text):
    attr = re.search(r"#zero\.optimizer<([^>]*)>", model_text).group(1)
    attr = attr.split(", schedule = ")[0]
    values = dict(kv.split(" = ") for kv in attr.split(", "))
    get = lambda k, d: float(values.get(k, d))
    return (values["kind"], get("lr", 1e-3), get("beta1", 0.9),
            get("beta2", 0.999), get("eps", 1e-8), get("weight_decay", 0.0))


def bias_correction(model_text):
    """False when the optimizer sets bias_correction = false."""
    return "bias_correction = false" not in model_text


def own_decays(model_text):
    """The weight decay each zero.param sets for itself (its group's)."""
    return {m.group(1): float(m.group(2)) for m in re.finditer(
        r"zero\.param @(\S+) : .* weight_decay (\S+)", model_text)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--init", required=True)
    p.add_argument("--x", required=True)
    p.add_argument("--y", required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--final", required=True)
    p.add_argument("--tol", type=float, default=1e-5)
    p.add_argument("--activation", choices=("relu", "silu"), default="relu")
    p.add_argument("--schedule", help="the step's lr-schedule (its "
                   "learning rates from lr_schedule_reference.py)")
    p.add_argument("--ignore-index", type=int,
                   help="the label the loss ignores (torch's ignore_index)")
    args = p.parse_args()

    text = open(args.model).read()
    kind, base_lr, beta1, beta2, eps, wd = optimizer(text)
    corrected = bias_correction(text)
    decays = own_decays(text)
    sched = None
    if args.schedule:
        import lr_schedule_reference
        sched = lr_schedule_reference.make(args.schedule, base_lr)
    init = load_safetensors(args.init)
    layers = sorted({int(re.match(r"fc(\d+)\.", n).group(1)) for n in init})
    names = [n for i in layers for n in ("fc%d.weight" % i, "fc%d.bias" % i)]
    params = {n: init[n].astype(np.float64) for n in names}
    m = {n: np.zeros_like(v) for n, v in params.items()}
    v = {n: np.zeros_like(x) for n, x in params.items()}
    x_all = np.load(args.x).astype(np.float64)
    y_all = np.load(args.y).astype(np.int64)
    log = [json.loads(line) for line in open(args.log)]

    worst_loss = 0.0
    adam_steps = 0
    for step, entry in enumerate(log, start=1):
        rows = [(((step - 1) * args.batch) + i) % len(x_all)
                for i in range(args.batch)]
        x, y = x_all[rows], y_all[rows]
        # Forward, keeping each layer's input and pre-activation.
        h, cache = x, []
        for k, i in enumerate(layers):
            z = h @ params["fc%d.weight" % i] + params["fc%d.bias" % i]
            cache.append((h, z))
            if k + 1 == len(layers):
                h = z
            elif args.activation == "silu":
                h = z / (1 + np.exp(-z))
            else:
                h = np.maximum(z, 0)
        z = h - h.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        # torch's cross_entropy(ignore_index=...): the mean over the rows
        # that count.
        valid = y != args.ignore_index if args.ignore_index is not None \
            else np.ones(len(y), dtype=bool)
        count = int(valid.sum())
        if count == 0:
            print("FAIL: step %d has no valid label, but the run logged it: "
                  "%s" % (step, entry))
            sys.exit(1)
        if entry["tokens"] != count:
            print("FAIL: step %d: tokens %s, the reference counts %d valid "
                  "labels" % (step, entry["tokens"], count))
            sys.exit(1)
        rows_valid = np.arange(len(y))[valid]
        loss = -logp[rows_valid, y[valid]].sum() / count
        # Backward.
        dz = np.exp(logp)
        dz[rows_valid, y[valid]] -= 1
        dz[~valid] = 0
        dz /= count
        grads = {}
        for k in reversed(range(len(layers))):
            i = layers[k]
            h_in, z_k = cache[k]
            if k + 1 < len(layers) and args.activation == "silu":
                s = 1 / (1 + np.exp(-z_k))
                dz = dz * s * (1 + z_k * (1 - s))
            elif k + 1 < len(layers):
                dz = dz * (z_k > 0)
            grads["fc%d.weight" % i] = h_in.T @ dz
            grads["fc%d.bias" % i] = dz.sum(axis=0)
            dz = dz @ params["fc%d.weight" % i].T
        # torch.optim.Adam / AdamW, single-tensor, one group per weight
        # decay; without bias correction as DeepSpeed's Adam.
        lr = sched.lr if sched else base_lr
        adam_steps += 1
        bc1 = 1 - beta1**adam_steps if corrected else 1.0
        bc2 = 1 - beta2**adam_steps if corrected else 1.0
        for n in names:
            g = grads[n]
            decay = decays.get(n, wd)
            if kind == "adamw":
                params[n] = params[n] * (1 - lr * decay)
            else:
                g = g + decay * params[n]
            m[n] = beta1 * m[n] + (1 - beta1) * g
            v[n] = beta2 * v[n] + (1 - beta2) * g * g
            denom = np.sqrt(v[n]) / np.sqrt(bc2) + eps
            params[n] = params[n] - lr / bc1 * m[n] / denom
        if sched:
            sched.step()
        diff = abs(entry["loss"] - loss) / abs(loss)
        worst_loss = max(worst_loss, diff)
        if diff > args.tol:
            print("FAIL: step %d: loss %.9g, reference %.9g" %
                  (step, entry["loss"], loss))
            sys.exit(1)

    final = load_safetensors(args.final)
    worst_weight = max(np.abs(final[n] - params[n]).max() for n in names)
    if worst_weight > args.tol:
        print("FAIL: weights differ from the reference by %g" % worst_weight)
        sys.exit(1)
    print("%d steps match the numpy reference: losses within %g relative, "
          "weights within %g" % (len(log), args.tol, args.tol))
    if decays:
        print("weight-decay groups: %d parameters with their own decay (%s)" %
              (len(decays), ", ".join(sorted(set("%g" % d for d in
                                                 decays.values())))))


if __name__ == "__main__":
    main()
