"""The chunked loss's end-to-end check (loss-chunk.test).

data: token ids and labels [N, T] as .npy (int32), labels the next token
with every `--ignore-every`-th label -100 (Hugging Face's ignored label).

check: two --log-json logs of the same steps, unchunked then chunked: every
step's loss within --rtol, each run's measured peak equal to its plan, and
the chunked plan's peak below the unchunked one's by at least the logits'
bytes less one chunk's ([rows, vocab] and [min(chunk, rows), vocab] fp32).
With --dtype bf16 the logits are 16-bit and a chunk's bytes are those the
16-bit gradient keeps besides its matmuls' panels (zero_rt/scratch.h): the
chunk's 16-bit logits, its logits gradient and input rows in fp32 and the
fp32 sum of the head's gradient, [vocab, hidden].
"""

import argparse
import json
import sys

import numpy as np


def cmd_data(args):
    rng = np.random.default_rng(args.seed)
    tokens = rng.integers(0, args.vocab, size=(args.rows, args.seq + 1),
                          dtype=np.int64)
    ids = tokens[:, :-1].astype(np.int32)
    labels = tokens[:, 1:].astype(np.int32)
    flat = labels.reshape(-1)
    flat[::args.ignore_every] = -100
    np.save(args.out + ".ids.npy", ids)
    np.save(args.out + ".labels.npy", labels)
    print("rows %d, ignored labels %d of %d" %
          (args.rows, int((flat == -100).sum()), flat.size))


def read_log(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def cmd_check(args):
    plain, chunked = read_log(args.plain), read_log(args.chunked)
    if len(plain) != len(chunked) or not plain:
        fail("%d and %d steps" % (len(plain), len(chunked)))
    worst = 0.0
    for a, b in zip(plain, chunked):
        diff = abs(a["loss"] - b["loss"]) / max(abs(a["loss"]), 1e-30)
        worst = max(worst, diff)
        if diff > args.rtol:
            fail("step %d: loss %r unchunked, %r chunked" %
                 (a["step"], a["loss"], b["loss"]))
    for name, log in (("unchunked", plain), ("chunked", chunked)):
        last = log[-1]
        if last["peak_bytes"] != last["planned_peak_bytes"]:
            fail("%s: measured peak %d, planned %d" %
                 (name, last["peak_bytes"], last["planned_peak_bytes"]))
    n = min(args.chunk, args.rows)
    if args.dtype == "bf16":
        logits = args.rows * args.vocab * 2
        chunk = (n * args.vocab * (2 + 4) + n * args.hidden * 4 +
                 args.vocab * args.hidden * 4)
    else:
        logits = args.rows * args.vocab * 4
        chunk = n * args.vocab * 4
    drop = plain[-1]["planned_peak_bytes"] - chunked[-1]["planned_peak_bytes"]
    if drop < logits - chunk:
        fail("the planned peak falls by %d bytes, less than the logits' %d "
             "less one chunk's %d" % (drop, logits, chunk))
    print("%d steps: losses within %g relative" % (len(plain), args.rtol))
    print("measured peak == planned peak, unchunked and chunked")
    print("planned peak falls by %d >= logits %d - chunk %d" %
          (drop, logits, chunk))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("data")
    d.add_argument("out")
    d.add_argument("--rows", type=int, required=True)
    d.add_argument("--seq", type=int, required=True)
    d.add_argument("--vocab", type=int, required=True)
    d.add_argument("--ignore-every", type=int, default=7)
    d.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("check")
    c.add_argument("plain")
    c.add_argument("chunked")
    c.add_argument("--rows", type=int, required=True,
                   help="rows of logits per rank and micro step")
    c.add_argument("--vocab", type=int, required=True)
    c.add_argument("--chunk", type=int, required=True)
    c.add_argument("--rtol", type=float, default=1e-6)
    c.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    c.add_argument("--hidden", type=int, default=0,
                   help="the head's hidden size (bf16)")
    args = p.parse_args()
    {"data": cmd_data, "check": cmd_check}[args.cmd](args)


if __name__ == "__main__":
    main()
