"""A safetensors writer (numpy + json): Debian has no safetensors package."""

import json
import struct

import numpy as np


def write(path, tensors):
    """`tensors`: [(name, float32 numpy array)], written F32 in that order."""
    header = {"__metadata__": {"format": "pt"}}
    blobs = []
    offset = 0
    for name, array in tensors:
        raw = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    # The data starts 8-byte aligned, as the format's writers pad it.
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)
