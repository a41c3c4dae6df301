#!/usr/bin/env python3
"""The compiled step as a library on a machine without zero_mlir's build:
drives a `zero-compile --emit shared` library through zero_rt/session.h with
ctypes (the standard library only), as scripts/gpu-check.sh's library part
does on a lent GPU.

    gpu-session.py STEP.so IDS.npy LABELS.npy STEPS LOG.json WEIGHTS.out

Trains STEPS steps on the rows `train --inputs IDS --labels LABELS` reads,
offloading and reloading the session after the first half (the device's
memory freed in between), writes each step's record to LOG.json (as
--log-json does) and the streamed parameters to WEIGHTS.out as a
safetensors file of F32 tensors (as --export writes them), then compares:

    gpu-session.py --compare A.json B.json A.safetensors B.safetensors

every record but its wall time, and every tensor's bytes, must be equal;

    gpu-session.py --tokens ROWS SEQ VOCAB IDS.npy LABELS.npy

writes random int64 token rows (the labels the same tokens), seeded.
"""

import ctypes
import json
import struct
import sys


class Array(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("data", ctypes.c_void_p),
                ("dtype", ctypes.c_char_p), ("ndim", ctypes.c_int32),
                ("shape", ctypes.POINTER(ctypes.c_int64))]


class InputInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_char_p),
                ("ndim", ctypes.c_int32), ("shape", ctypes.c_int64 * 8)]


class TensorOut(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p),
                ("data", ctypes.POINTER(ctypes.c_float)),
                ("ndim", ctypes.c_int32), ("shape", ctypes.c_int64 * 8)]


def read_npy(path):
    """(dtype string, shape, bytes) of a version 1 .npy file."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:6] != b"\x93NUMPY":
        raise SystemExit("%s: not an .npy file" % path)
    length = struct.unpack("<H", raw[8:10])[0]
    header = eval(raw[10:10 + length].decode("latin1"))  # a dict literal
    if header["fortran_order"]:
        raise SystemExit("%s: Fortran order" % path)
    return header["descr"], tuple(header["shape"]), raw[10 + length:]


def write_tokens(rows, seq, vocab, ids_path, labels_path):
    import random
    rng = random.Random(1234)
    values = [rng.randrange(vocab) for _ in range(rows * seq)]
    header = "{'descr': '<i8', 'fortran_order': False, 'shape': (%d, %d), }" % (
        rows, seq)
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"
    blob = (b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) +
            header.encode("latin1") + struct.pack("<%dq" % len(values),
                                                  *values))
    for path in (ids_path, labels_path):
        with open(path, "wb") as f:
            f.write(blob)


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, shape, blob in tensors:
        header[name] = {"dtype": "F32", "shape": list(shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    base = 8 + n
    return {k: raw[base + v["data_offsets"][0]:base + v["data_offsets"][1]]
            for k, v in header.items()}


def train(library, ids_path, labels_path, steps, log, weights):
    lib = ctypes.CDLL(library, mode=ctypes.RTLD_GLOBAL)
    lib.zrt_session_error.restype = ctypes.c_char_p
    lib.zrt_session_offloaded_bytes.restype = ctypes.c_int64
    session = ctypes.c_void_p()
    argv = (ctypes.c_char_p * 1)(b"--quiet")
    program = ctypes.c_void_p.in_dll(lib, "zero_program")

    def check(status, what):
        if status != 0:
            raise SystemExit("%s: status %d: %s" % (
                what, status, lib.zrt_session_error(session).decode()))

    check(lib.zrt_session_open(ctypes.byref(program), 1, argv,
                               ctypes.byref(session)), "open")
    info = InputInfo()
    check(lib.zrt_session_input(session, 0, 0, ctypes.byref(info)), "input")
    rows = info.shape[0]
    arrays = []
    for name, path in ((b"input_ids", ids_path), (b"labels", labels_path)):
        descr, shape, data = read_npy(path)
        arrays.append((name, descr.encode(), shape, data))
    records = []
    for s in range(steps):
        if s == steps // 2:
            check(lib.zrt_session_offload(session), "offload")
            print("offloaded %d bytes" % lib.zrt_session_offloaded_bytes(
                session))
            check(lib.zrt_session_reload(session), "reload")
        keep, items = [], []
        for name, descr, shape, data in arrays:
            row = len(data) // shape[0]
            first = (s * rows) % shape[0]
            chunk = ctypes.create_string_buffer(
                data[first * row:(first + rows) * row])
            dims = (ctypes.c_int64 * len(shape))(rows, *shape[1:])
            keep += [chunk, dims]
            items.append(Array(name, ctypes.cast(chunk, ctypes.c_void_p),
                               descr, len(shape), dims))
        record = ctypes.c_char_p()
        check(lib.zrt_session_step(session, (Array * 2)(*items), 2, 0,
                                   ctypes.byref(record)), "step %d" % s)
        records.append(record.value.decode())
    with open(log, "w") as f:
        f.write("".join(r + "\n" for r in records))
    check(lib.zrt_session_parameters_begin(session, ctypes.c_int64(64 << 20),
                                           -1), "parameters")
    tensors = []
    while True:
        t = TensorOut()
        check(lib.zrt_session_parameters_next(session, ctypes.byref(t)),
              "parameters")
        if not t.name:
            break
        shape = tuple(t.shape[:t.ndim])
        n = 1
        for d in shape:
            n *= d
        tensors.append((t.name.decode(), shape,
                        ctypes.string_at(t.data, 4 * n)))
    write_safetensors(weights, tensors)
    lib.zrt_session_close(session)


def compare(a_log, b_log, a_weights, b_weights):
    a = [json.loads(line) for line in open(a_log)]
    b = [json.loads(line) for line in open(b_log)]
    bad = [(x["step"], k) for x, y in zip(a, b) for k in x
           if k != "step_ms" and x[k] != y.get(k)]
    wa, wb = read_safetensors(a_weights), read_safetensors(b_weights)
    differ = sorted(k for k in wa if wa[k] != wb.get(k))
    ok = len(a) == len(b) > 0 and not bad and not differ and \
        sorted(wa) == sorted(wb)
    print("%s: %d records%s, %d tensors%s" % (
        "same" if ok else "DIFFERENT", len(a),
        "" if not bad else " (differ: %s)" % bad[:5], len(wa),
        "" if not differ else " (differ: %s)" % differ[:5]))
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        sys.exit(compare(*sys.argv[2:6]))
    if sys.argv[1] == "--tokens":
        write_tokens(*map(int, sys.argv[2:5]), *sys.argv[5:7])
        sys.exit(0)
    train(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]),
          sys.argv[5], sys.argv[6])
