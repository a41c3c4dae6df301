"""zero_mlir: drive a training step compiled by zero-mlir from Python.

    zero-compile model.mlir --stage 3 --world-size 4 --emit shared -o step.so

    from zero_mlir import Engine
    with Engine("step.so", init_from="model.safetensors") as engine:
        record = engine.step(input_ids=ids, labels=labels)

Run under `mpirun -np 4 python train.py`: each process is one rank, and the
calls that say so are collective (every rank makes them in the same order).
"""

from .engine import Engine

__all__ = ["Engine"]
