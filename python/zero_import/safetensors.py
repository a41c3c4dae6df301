"""A safetensors writer (numpy + json): the make() path needs no safetensors
package."""

import json
import struct

import numpy as np


def write(path, tensors):
    """`tensors`: [(name, float32 numpy array, or an object with `shape`
    whose numpy() reads it)], written F32 in that order, one tensor at a
    time (a model's size is not held twice)."""
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, array in tensors:
        size = 4 * int(np.prod(array.shape, dtype=np.int64))
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    # The data starts 8-byte aligned, as the format's writers pad it.
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, array in tensors:
            if not isinstance(array, np.ndarray):
                array = array.numpy()
            f.write(np.ascontiguousarray(array, dtype="<f4").tobytes())
