"""Opens a step whose arenas cannot fit (argv[1]), then one that fits
(argv[2]), in the same process: the first is a RuntimeError on every rank."""

import sys

import numpy as np
import zero_mlir

try:
    zero_mlir.Engine(sys.argv[1])
    first = "opened"
except RuntimeError as e:
    first = "RuntimeError: %s" % e
with zero_mlir.Engine(sys.argv[2]) as engine:
    print("rank %d: %s" % (engine.rank, first))
    x = np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32)
    record = engine.step(inputs=x, labels=np.array([3, 5]))
    print("rank %d: then a step of the other program, loss finite: %s"
          % (engine.rank, bool(np.isfinite(record["loss"]))))
