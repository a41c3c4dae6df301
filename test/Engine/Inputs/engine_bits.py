"""Trains a compiled step through zero_mlir.Engine as `train` does.

    engine_bits.py STEP.so WEIGHTS IDS LABELS STEPS LOG EXPORT REPORT

Step s passes the global batch that `train --inputs IDS --labels LABELS`
reads for it (rows [s * R, (s + 1) * R) for R rows a step) under the step's
input names. Between the first steps it makes each kind of bad call (a wrong
shape, a wrong dtype, a missing input, an unknown name), each of which must
raise ValueError naming the input on every rank and change nothing; half
way it offloads and reloads the session, saves a checkpoint, and from there
on passes each rank's own rows (local=True; the last three steps as
PyTorch tensors, through DLPack). After the last step it loads
the checkpoint and trains three steps again, which must repeat the records
of the steps after it. Rank 0 writes each step's record
as a line of LOG, as --log-json does, and says what it saw; then the
parameters are streamed in small buckets and compared with what export_hf
writes into EXPORT. Before the steps, every rank receives rank 0's array
through engine.broadcast (bitwise) and refuses a root outside the world,
which the ranks tell each other through broadcast_object, and rank 0
compares engine.plan with REPORT, zero-report's JSON of the same schedule.
"""

import json
import sys

import numpy as np
import torch
import zero_mlir
from safetensors.numpy import load_file


def main():
    library, weights, ids, labels, steps, log, export, report = sys.argv[1:]
    bucket = 64 << 10
    ids, labels, steps = np.load(ids), np.load(labels), int(steps)
    with zero_mlir.Engine(library, init_from=weights, quiet=True) as engine:
        say = print if engine.rank == 0 else (lambda *a: None)
        shapes = {i["name"]: i["shape"] for i in engine.inputs}
        say("inputs", sorted(shapes.items()))
        rows = shapes["input_ids"][0]

        # Rank 0's rollouts on every rank; each rank makes its own.
        def rollouts(rank):
            return np.random.default_rng(rank).standard_normal(
                (3, 5), dtype=np.float32)

        got = engine.broadcast(rollouts(engine.rank) if engine.rank == 0
                               else None)
        bitwise = (got.dtype == np.float32 and got.shape == (3, 5) and
                   got.tobytes() == rollouts(0).tobytes())
        try:
            engine.broadcast(got, root=5)
            refused = False
        except ValueError:
            refused = True
        verdicts = [engine.broadcast_object((bitwise, refused), root=r)
                    for r in range(engine.world_size)]
        say("broadcast: rank 0's array bitwise, root 5 refused, by rank:",
            verdicts)
        with open(report) as f:
            expected = json.load(f)
        say("plan is the report:", engine.plan == expected,
            sorted(k for k in set(engine.plan) | set(expected)
                   if engine.plan.get(k) != expected.get(k)))

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
                    engine.plan["step_arena_bytes"])
                try:
                    engine.step(input_ids=x, labels=y)
                except RuntimeError as e:
                    say("while offloaded:", e)
                engine.reload()
            if s == steps // 2:
                engine.save("ckpt")
            x, y = batch(s)
            if s < steps // 2:
                records.append(engine.step(input_ids=x, labels=y))
            else:
                # This rank's rows of the global batch (one micro step).
                n = engine.local_inputs[0]["shape"][0]
                mine = slice(engine.rank * n, (engine.rank + 1) * n)
                x, y = x[mine], y[mine]
                if s >= steps - 3:
                    # PyTorch tensors, through DLPack.
                    x, y = torch.from_numpy(x), torch.from_numpy(y)
                records.append(engine.step(local=True, input_ids=x,
                                           labels=y))
        say("steps", engine.steps)
        streamed = {name: array for name, array in
                    engine.named_parameters(bucket_bytes=bucket)}
        largest = max(a.nbytes for a in streamed.values())
        say("streaming: device peak", engine.last_peak_bytes, "plan",
            engine.plan["peak_bytes"], "; held at most",
            engine.stream_peak_bytes, "of a bucket of", bucket,
            "(largest tensor %d)" % largest)
        say("within the bucket:",
            engine.stream_peak_bytes <= max(bucket, largest) and
            engine.last_peak_bytes <= engine.plan["peak_bytes"])
        engine.export_hf(export)
        engine.load("ckpt")
        say("loaded at step", engine.steps)
        again = [engine.step(input_ids=x, labels=y)
                 for x, y in map(batch, range(steps // 2, steps // 2 + 3))]
        say("after load the same records:",
            [a == b for a, b in
             zip([dict(r, step_ms=0) for r in again],
                 [dict(r, step_ms=0) for r in records[steps // 2:]])])
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


if __name__ == "__main__":
    main()
