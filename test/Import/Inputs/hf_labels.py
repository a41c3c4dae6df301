#!/usr/bin/env python3
"""Writes a causal LM's batches as --inputs/--labels read them: ids.npy,
integer token ids [N, T] in [0, vocab), and labels.npy, the same tokens
with some positions -100 (ignored). Row r's first r * T // N labels are
-100, so consecutive rows (and so the micro batches of one global batch)
hold unequal numbers of valid labels, and a fifth of the others at random
too; row 1 is all -100, and the labels of each global batch of --batch
rows hold at least one valid label.

  hf_labels.py IDS LABELS --rows N --seq T --vocab V --batch B
"""

import argparse

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("ids")
    p.add_argument("labels")
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    args = p.parse_args()
    rng = np.random.default_rng(33)
    n, t = args.rows, args.seq
    ids = rng.integers(0, args.vocab, size=(n, t), dtype=np.int64)
    labels = ids.copy()
    for r in range(n):
        labels[r, :r * t // n] = -100
    labels[rng.random((n, t)) < 0.2] = -100
    labels[1] = -100
    for first in range(0, n, args.batch):
        # The shift drops each row's first label: count from the second.
        if not (labels[first:first + args.batch, 1:] != -100).any():
            raise SystemExit("a global batch without a valid label")
    np.save(args.ids, ids)
    np.save(args.labels, labels)


if __name__ == "__main__":
    main()
