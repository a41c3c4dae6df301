"""Sessions one after another in one process (argv[1], a step library): the
first trains a step and closes; the second opens, refuses a third opened
beside it (a RuntimeError on every rank) and trains the first one's step
again: same seed, same batch, the same loss bit for bit."""

import sys

import numpy as np
import zero_mlir

x = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
y = np.arange(8, dtype=np.int64) % 4
with zero_mlir.Engine(sys.argv[1]) as engine:
    rank = engine.rank
    first = engine.step(inputs=x, labels=y)["loss"]
with zero_mlir.Engine(sys.argv[1]) as engine:
    try:
        zero_mlir.Engine(sys.argv[1])
        print("rank %d: a second open session" % rank)
    except RuntimeError as e:
        print("rank %d: RuntimeError: %s" % (rank, e))
    again = engine.step(inputs=x, labels=y)["loss"]
print("rank %d: the reopened session's first loss is the first session's: %s"
      % (rank, bool(again == first)))
