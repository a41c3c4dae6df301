"""Drives zero_mlir.Engine over fake_session.c's library (argv[1]) and
prints what each call passed and returned, for engine.test to check."""

import gc
import sys

import numpy as np

import zero_mlir

fake, old, empty = sys.argv[1:4]
# fake_session.c prints too: keep the two in order.
sys.stdout.reconfigure(line_buffering=True)


def attempt(what, call):
    try:
        call()
        print(what, "ok")
    except Exception as e:  # noqa: BLE001 - the test prints every kind
        print(what, type(e).__name__ + ":", e)


# Libraries that cannot be used, each refused by name.
attempt("missing", lambda: zero_mlir.Engine("/nonexistent/step.so"))
attempt("empty", lambda: zero_mlir.Engine(empty))
attempt("version", lambda: zero_mlir.Engine(old))
attempt("option", lambda: zero_mlir.Engine(fake, bad=True))

with zero_mlir.Engine(fake, init_from="model.safetensors", seed=7,
                      threads=2, quiet=True, resume=None) as engine:
    print("argv", engine.manifest["argv"])
    print("plan", engine.plan)
    # The root's array, as a new contiguous NumPy array of its dtype.
    sent = np.arange(6, dtype=np.float32).reshape(2, 3)[:, ::-1]
    got = engine.broadcast(sent)
    print("broadcast", got.dtype, got.shape, got.tolist(), got is not sent,
          got.flags.writeable)
    for value in (np.array([True, False]), np.int64(7), np.zeros((0, 3)),
                  [[1, 2], [3, 4]]):
        got = engine.broadcast(value, root=0)
        print("broadcast", got.dtype, got.shape, got.tolist())
    print("broadcast object", engine.broadcast_object({"a": [1, (2, 3)]}))
    attempt("broadcast root", lambda: engine.broadcast(sent, root=1))
    attempt("broadcast none", lambda: engine.broadcast(None))
    attempt("broadcast object array",
            lambda: engine.broadcast(np.array([object()])))
    attempt("broadcast complex", lambda: engine.broadcast(np.zeros(2, np.complex64)))
    attempt("broadcast unpicklable", lambda: engine.broadcast_object(lambda: 0))
    print("inputs", engine.inputs)
    print("local", engine.local_inputs)
    ids = np.arange(32, dtype=np.int64).reshape(4, 8)
    # A transposed view is copied to a contiguous array; int32 keeps its
    # dtype (the session checks dtypes against its inputs).
    labels = np.ones((8, 4), dtype=np.int32).T
    print("step", engine.step(input_ids=ids, labels=labels))
    print("evaluate", engine.evaluate(local=True, input_ids=ids[:2],
                                      labels=[[1.5] * 8] * 2))
    bits = np.zeros((4, 8), dtype=np.uint16) + 2
    print("bits", engine.step(input_ids=ids, labels=bits)["arrays"][1])
    # Read-only memory (a memory-mapped np.load) is read as it is.
    frozen = np.frombuffer(ids.tobytes(), dtype=np.int64).reshape(4, 8)
    print("read-only", frozen.flags.writeable, engine.evaluate(
        input_ids=frozen, labels=frozen)["arrays"][0])
    attempt("count", lambda: engine.step(input_ids=ids))
    attempt("object", lambda: engine.step(input_ids=ids, labels=object()))
    attempt("complex", lambda: engine.step(input_ids=ids,
                                           labels=np.zeros(2, np.complex64)))
    print("steps", engine.steps)
    for name, array in engine.named_parameters(bucket_bytes=1 << 20):
        print("parameter", name, array.dtype, array.shape, array.tolist())
    for name, array in engine.named_parameters(rank=1):
        print("parameter rank 1", name, array)
    attempt("bucket", lambda: list(engine.named_parameters(bucket_bytes=0)))
    engine.save("ckpt")
    engine.offload()
    engine.reload()
    attempt("load", lambda: engine.load("/nonexistent"))
    print("peak", engine.last_peak_bytes)
    attempt("lost", lambda: engine.step(input_ids=ids, lost=ids))
    attempt("after lost", lambda: engine.step(input_ids=ids, labels=ids))
    engine.close()
    attempt("closed", lambda: engine.inputs)
print("exited")
gc.collect()
