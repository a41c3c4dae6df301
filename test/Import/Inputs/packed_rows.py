"""Packed rows of documents of mixed lengths, and the same documents one a
padded row, for training tests of `zero-import --packed`.

  packed_rows.py OUT --vocab V --seq T --rows R --steps S [--seed N]

Writes OUT/ids.npy, OUT/labels.npy and OUT/positions.npy [S * R, T]: each
step's R rows hold 3 to 6 documents each (3, 4, 4, 5, 6, 3, then again,
in an order drawn for each step), laid out as DataCollatorWithFlattening
lays them out (positions from 0 at each document, the first label of each
-100; after the last document the pad id 0, labelled -100, at positions of
its own). OUT/one-ids.npy and OUT/one-labels.npy hold the same documents
one a row padded to T with the pad id and -100, each step's in the step's
order: a step of as many rows as it has documents holds the same ones.
Every step holds the same number of documents.
"""

import argparse
import os

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    rng = np.random.default_rng(a.seed)
    T = a.seq
    counts = ([3, 4, 4, 5, 6, 3] * a.rows)[:a.rows]
    ids, labels, positions, one_ids, one_labels = [], [], [], [], []
    for _ in range(a.steps):
        for k in rng.permutation(counts):
            # k documents of 2 to T // k tokens: mixed lengths that fit.
            lengths = rng.integers(2, T // k + 1, size=k)
            row_ids, row_labels, row_pos = [], [], []
            for n in lengths:
                doc = list(rng.integers(1, a.vocab, size=n))
                row_ids += doc
                row_labels += [-100] + doc[1:]
                row_pos += list(range(n))
                one_ids.append(doc + [0] * (T - n))
                one_labels.append([-100] + doc[1:] + [-100] * (T - n))
            pad = T - len(row_ids)
            ids.append(row_ids + [0] * pad)
            labels.append(row_labels + [-100] * pad)
            positions.append(row_pos + list(range(pad)))
    os.makedirs(a.out, exist_ok=True)
    for name, rows in (("ids", ids), ("labels", labels),
                       ("positions", positions), ("one-ids", one_ids),
                       ("one-labels", one_labels)):
        np.save(os.path.join(a.out, name + ".npy"),
                np.array(rows, dtype=np.int64))
    print("packed_rows: %d rows of %d documents a step (%d in all), "
          "%d documents one a row" % (len(ids), sum(counts),
                                      len(one_ids), len(one_ids)))


if __name__ == "__main__":
    main()
