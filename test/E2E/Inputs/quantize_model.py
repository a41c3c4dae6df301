"""The block quantization of zero_rt/quantize.h, modelled in numpy from its
written rules (nothing here comes from the runtime), against the runtime's
kernels run by zrt-quantize-dump on the same inputs: the quantized buffers
(scales, payload, padding) and the dequantized values must be equal bit for
bit.

    quantize_model.py ZRT_QUANTIZE_DUMP WORKDIR

Prints one line per case and "quantize-model: N cases bitwise equal".
"""

import os
import subprocess
import sys

import numpy as np

# Elements per block: INT8 (qwZ's weights) and INT4 (qgZ's gradients).
BLOCK = {8: 256, 4: 128}
NAN32 = np.uint32(0x7FC00000)
TYPE_NAN = {"f32": 0x7FC00000, "bf16": 0x7FC0, "f16": 0x7E00}
STORAGE = {"f32": np.uint32, "bf16": np.uint16, "f16": np.uint16}


def widen(dtype, bits):
    """Stored bits -> exact fp32 values."""
    if dtype == "f32":
        return bits.view(np.float32)
    if dtype == "bf16":
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return bits.view(np.float16).astype(np.float32)


def narrow(dtype, values):
    """fp32 values (no NaN) -> stored bits, rounded to nearest even."""
    if dtype == "f32":
        return values.view(np.uint32)
    if dtype == "f16":
        with np.errstate(over="ignore"):
            return values.astype(np.float16).view(np.uint16)
    u = values.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def model(dtype, bits, n, chunks, data):
    qmax = 127 if bits == 8 else 7
    block = BLOCK[bits]
    blocks = (n + block - 1) // block
    payload_bytes = n if bits == 8 else (n + 1) // 2
    chunk_bytes = (4 * blocks + payload_bytes + 3) // 4 * 4
    quantized = bytearray()
    out = np.zeros(n * chunks, STORAGE[dtype])
    x_all = widen(dtype, data)
    for c in range(chunks):
        scales = np.zeros(blocks, np.uint32)
        q = np.zeros(n, np.int32)
        for b in range(blocks):
            lo, hi = c * n + b * block, c * n + min(n, (b + 1) * block)
            x = x_all[lo:hi]
            abs_bits = x.view(np.uint32) & np.uint32(0x7FFFFFFF)
            top = abs_bits.max()
            if top >= 0x7F800000:  # a NaN or an infinity
                scales[b] = NAN32
                out[lo:hi] = TYPE_NAN[dtype]
                continue
            scale = np.float32(np.uint32(top).view(np.float32)) / np.float32(qmax)
            scales[b] = np.float32(scale).view(np.uint32)
            if scale > 0:
                with np.errstate(over="ignore"):
                    r = np.rint(x / np.float32(scale))  # half to even
                qb = np.clip(r, -qmax, qmax).astype(np.int32)
            else:
                qb = np.zeros(hi - lo, np.int32)
            q[lo - c * n:hi - c * n] = qb
            with np.errstate(over="ignore"):
                y = qb.astype(np.float32) * np.float32(scale)
            out[lo:hi] = narrow(dtype, y.astype(np.float32))
        if bits == 8:
            payload = q.astype(np.int8).tobytes()
        else:
            nib = (q & 0xF).astype(np.uint8)
            if n % 2:
                nib = np.append(nib, np.uint8(0))
            payload = (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8).tobytes()
        chunk = scales.tobytes() + payload
        quantized += chunk + bytes(chunk_bytes - len(chunk))
    return bytes(quantized), out


def block_values(kind, m, big, tiny, dtype, rng):
    """One block of values of a kind the rules name."""
    if kind == 0:  # ordinary weights
        v = rng.normal(0, 0.02, m)
    elif kind == 1:  # a zero block, with -0
        v = np.zeros(m)
        v[::3] = -0.0
    elif kind == 2:  # huge
        v = rng.uniform(-big, big, m)
    elif kind == 3:  # tiny, down to the subnormals of the type
        v = rng.uniform(-tiny, tiny, m)
    elif kind == 4:  # exact ties of x / scale for INT8: scale 2^-4
        v = (rng.integers(-127, 127, m) + 0.5) * 2.0**-4
        v[0] = 127 * 2.0**-4
    elif kind == 5:  # exact ties for INT4: scale 2^-3
        v = (rng.integers(-7, 7, m) + 0.5) * 2.0**-3
        v[0] = 7 * 2.0**-3
    elif kind == 6:  # a NaN
        v = rng.normal(0, 1, m)
        v[m // 2] = np.nan
    elif kind == 7:  # an infinity
        v = rng.normal(0, 1, m)
        v[m // 3] = -np.inf
    elif kind == 8:  # the type's largest finite value
        v = rng.normal(0, 1, m)
        v[0] = {"f32": np.finfo(np.float32).max, "bf16": 3.3895e38,
                "f16": 65504.0}[dtype]
    else:  # magnitudes over 17 decades in one block
        v = rng.normal(0, 1, m) * np.exp(rng.uniform(-20, 20, m))
    return v


def make_inputs(dtype, bits, n, chunks, rng):
    """Values of every kind the rules name, one kind per block."""
    x = np.zeros(n * chunks, np.float32)
    big = {"f32": 1e30, "bf16": 1e30, "f16": 3e4}[dtype]
    tiny = {"f32": 1e-40, "bf16": 1e-40, "f16": 1e-7}[dtype]
    kind = 0
    for c in range(chunks):
        for start in range(c * n, (c + 1) * n, BLOCK[bits]):
            end = min((c + 1) * n, start + BLOCK[bits])
            x[start:end] = block_values(kind % 10, end - start, big, tiny,
                                        dtype, rng)
            kind += 1
    if dtype == "f32":
        return x.view(np.uint32)
    if dtype == "f16":
        with np.errstate(over="ignore"):
            return x.astype(np.float16).view(np.uint16)
    u = x.view(np.uint32).astype(np.uint64)
    nan = np.isnan(x)
    b = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    b[nan] = 0x7FC0
    return b


def main():
    tool, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(35)
    cases = 0
    for dtype in ("f32", "bf16", "f16"):
        for bits in (8, 4):
            for n, chunks in ((1, 1), (7, 3), (2048, 2), (2049, 1),
                              (5001, 3), (12288, 4), (0, 2),
                              (10 * BLOCK[bits] + 5, 2)):
                data = make_inputs(dtype, bits, n, chunks, rng)
                inp = os.path.join(work, "in.bin")
                qf = os.path.join(work, "q.bin")
                yf = os.path.join(work, "y.bin")
                data.tofile(inp)
                subprocess.run([tool, dtype, str(bits), str(n), str(chunks),
                                inp, qf, yf], check=True)
                want_q, want_y = model(dtype, bits, n, chunks, data)
                got_q = open(qf, "rb").read()
                got_y = np.fromfile(yf, STORAGE[dtype])
                name = "%s int%d n=%d chunks=%d" % (dtype, bits, n, chunks)
                if got_q != want_q:
                    diff = next(i for i in range(min(len(got_q), len(want_q)))
                                if got_q[i] != want_q[i]) \
                        if len(got_q) == len(want_q) else "size"
                    sys.exit("%s: quantized buffers differ (%d vs %d bytes, "
                             "first difference at %s)" % (name, len(got_q),
                                                          len(want_q), diff))
                if not np.array_equal(got_y, want_y):
                    i = int(np.flatnonzero(got_y != want_y)[0])
                    sys.exit("%s: dequantized element %d is 0x%x, the model "
                             "0x%x" % (name, i, got_y[i], want_y[i]))
                print("%s: %d bytes equal" % (name, len(got_q)))
                cases += 1
    print("quantize-model: %d cases bitwise equal" % cases)


if __name__ == "__main__":
    main()
