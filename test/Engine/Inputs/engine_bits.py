"""Trains a compiled step through zero_mlir.Engine as `train` does.

    engine_bits.py STEP.so WEIGHTS IDS LABELS STEPS LOG EXPORT

Step s passes the global batch that `train --inputs IDS --labels LABELS`
reads for it (rows [s * R, (s + 1) * R) for R rows a step) under the step's
input names. Between the first steps it makes each kind of bad call (a wrong
shape, a wrong dtype, a missing input, an unknown name), each of which must
raise ValueError naming the input on every rank and change nothing; half
way it offloads and reloads the session. Rank 0 writes each step's record
as a line of LOG, as --log-json does, and says what it saw; then the
parameters are streamed in small buckets and compared with what export_hf
writes into EXPORT.
"""

import json
import resource
import sys

import numpy as np
import zero_mlir
from safetensors.numpy import load_file


def main():
    library, weights, ids, labels, steps, log, export = sys.argv[1:]
    ids, labels, steps = np.load(ids), np.load(labels), int(steps)
    with zero_mlir.Engine(library, init_from=weights, quiet=True) as engine:
        say = print if engine.rank == 0 else (lambda *a: None)
        shapes = {i["name"]: i["shape"] for i in engine.inputs}
        say("inputs", sorted(shapes.items()))
        rows = shapes["input_ids"][0]

        def batch(s):
            take = [(s * rows + r) % len(ids) for r in range(rows)]
            return ids[take], labels[take]

        x, y = batch(0)
        bad = [("shape", dict(input_ids=x[:-1], labels=y)),
               ("dtype", dict(input_ids=x.astype(np.float32), labels=y)),
               ("missing", dict(input_ids=x)),
               ("unknown", dict(input_ids=x, labels=y, mask=y))]
        records = []
        for s in range(steps):
            if s < len(bad):
                kind, arrays = bad[s]
                try:
                    engine.step(**arrays)
                    say("bad", kind, "accepted")
                except ValueError as e:
                    # Every rank raises, with the same message.
                    print("rank %d bad %s: %s" % (engine.rank, kind, e),
                          file=sys.stderr)
                    say("bad", kind, "ValueError:", e)
            if s == steps // 2:
                engine.offload()
                say("offloaded bytes", engine.offloaded_bytes,
                    "plan persistent + arena",
                    engine.plan["persistent_bytes"] +
                    engine.plan["arena_bytes"])
                try:
                    engine.step(input_ids=x, labels=y)
                except RuntimeError as e:
                    say("while offloaded:", e)
                engine.reload()
            x, y = batch(s)
            records.append(engine.step(input_ids=x, labels=y))
        say("steps", engine.steps)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        streamed = {name: array for name, array in
                    engine.named_parameters(bucket_bytes=64 << 10)}
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        engine.export_hf(export)
        if engine.rank == 0:
            with open(log, "w") as f:
                for r in records:
                    f.write(json.dumps(r) + "\n")
            written = load_file(export + "/model.safetensors")
            same = sorted(streamed) == sorted(written) and all(
                streamed[k].dtype == written[k].dtype and
                np.array_equal(streamed[k], written[k]) for k in written)
            say("streamed", len(streamed), "tensors, bitwise the export:",
                same)
            print("streaming: host peak grew by %d KiB (bucket 64 KiB, "
                  "parameters %d KiB)" % (after - before, sum(
                      a.nbytes for a in streamed.values()) >> 10),
                  file=sys.stderr)


if __name__ == "__main__":
    main()
