"""The block-wise 8-bit Adam of zrt_adam8bit (abi.def), modelled in numpy
from its written rules (nothing here comes from the runtime), against the
runtime's kernel run by zrt-adam8bit-dump on the same inputs: the dynamic
maps, and after every step the masters, the codes and the absmaxes of both
moments must be equal bit for bit.

    adam8bit_model.py ZRT_ADAM8BIT_DUMP WORKDIR

Prints one line per case and "adam8bit-model: N cases bitwise equal".
"""

import math
import os
import subprocess
import sys

import numpy as np

BLOCK = 2048
F = np.float32


def dynamic_map(signed):
    """bitsandbytes' create_dynamic_map(signed, 7, 8): for decade i, 2^i
    (signed, with negatives) or 2^(i+1) midpoints of linspace(0.1, 1)
    scaled by 10^(i-6), then 0 and 1; in double, sorted, rounded once."""
    decades = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0]
    values = []
    for i in range(7):
        parts = 2**i if signed else 2 ** (i + 1)
        for j in range(parts):
            lo = 0.1 + 0.9 * float(j) / float(parts)
            hi = 0.1 + 0.9 * float(j + 1) / float(parts)
            v = decades[i] * ((lo + hi) / 2.0)
            values.append(v)
            if signed:
                values.append(-v)
    values += [0.0, 1.0]
    assert len(values) == 256
    return np.array(sorted(values), np.float64).astype(F)


def nearest(code_map, x):
    """The first code minimising |map - x|, for each x (x in [-1, 1])."""
    d = np.abs(code_map[None, :] - x[:, None])
    return np.argmin(d, axis=1).astype(np.uint8)


def constants(lr, beta1, beta2, eps, wd, step):
    """adamConstants in double, each rounded once to fp32."""
    return dict(
        decay=F(1.0 - lr * wd),
        wd=F(wd),
        omb1=F(1.0 - beta1),
        beta2=F(beta2),
        omb2=F(1.0 - beta2),
        neg_step=F(-(lr / (1.0 - math.pow(beta1, float(step))))),
        bc2=F(math.sqrt(1.0 - math.pow(beta2, float(step)))),
        eps=F(eps),
    )


def model(n, steps, adamw, lr, beta1, beta2, eps, wd, rng_range, master,
          grads, smap, umap):
    blocks = (n + BLOCK - 1) // BLOCK
    w = master.copy()
    qm = np.zeros(n, np.uint8)
    qv = np.zeros(n, np.uint8)
    am = np.zeros(blocks, F)
    av = np.zeros(blocks, F)
    out = []
    for s in range(steps):
        k = constants(lr, beta1, beta2, eps, wd, s + 1)
        decay = np.full(n, k["decay"], F)
        l2 = np.full(n, k["wd"], F)
        b, e, d = rng_range
        if b < e:
            own = constants(lr, beta1, beta2, eps, d, s + 1)
            decay[b:e] = own["decay"]
            l2[b:e] = own["wd"]
        g = grads[s].copy()
        m = smap[qm] * np.repeat(am, BLOCK)[:n]
        v = umap[qv] * np.repeat(av, BLOCK)[:n]
        if adamw:
            w = w * decay
        else:
            g = g + l2 * w
        m = m + k["omb1"] * (g - m)
        v = v * k["beta2"] + (k["omb2"] * g) * g
        denom = np.sqrt(v) / k["bc2"] + k["eps"]
        w = w + (k["neg_step"] * m) / denom
        for blk in range(blocks):
            lo, hi = blk * BLOCK, min(n, (blk + 1) * BLOCK)
            am[blk] = np.abs(m[lo:hi]).max()
            av[blk] = v[lo:hi].max()
            xm = m[lo:hi] / am[blk] if am[blk] > 0 else np.zeros(hi - lo, F)
            xv = v[lo:hi] / av[blk] if av[blk] > 0 else np.zeros(hi - lo, F)
            qm[lo:hi] = nearest(smap, xm.astype(F))
            qv[lo:hi] = nearest(umap, xv.astype(F))
        for a in (w, m, v):
            assert a.dtype == F
        out += [w.tobytes(), qm.tobytes(), am.tobytes(), qv.tobytes(),
                av.tobytes()]
    return b"".join(out)


def main():
    dump, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    smap, umap = dynamic_map(True), dynamic_map(False)
    assert len(np.unique(smap)) == 256 and len(np.unique(umap)) == 256
    rs = np.random.RandomState(49)
    cases = [
        # n, steps, adamw, lr, betas, eps, wd, decay range (begin, end, wd)
        (3 * BLOCK + 77, 5, 1, 1e-2, 0.9, 0.999, 1e-8, 0.1, (0, 0, 0.0)),
        (3 * BLOCK + 77, 5, 0, 1e-3, 0.9, 0.95, 1e-6, 0.01, (0, 0, 0.0)),
        (2 * BLOCK + 1, 4, 1, 3e-3, 0.8, 0.99, 1e-8, 0.1,
         (BLOCK - 100, BLOCK + 50, 0.0)),
        (5, 3, 1, 1e-2, 0.9, 0.999, 1e-8, 0.0, (0, 0, 0.0)),
    ]
    equal = 0
    for idx, (n, steps, adamw, lr, b1, b2, eps, wd, rng_range) in \
            enumerate(cases):
        master = rs.standard_normal(n).astype(F)
        grads = []
        for s in range(steps):
            g = (rs.standard_normal(n) *
                 np.exp(rs.uniform(-8, 2, n))).astype(F)
            # A block of zero gradients: with decoupled decay its moments
            # stay zero (absmax 0), with L2 they do not.
            if n > 2 * BLOCK:
                g[BLOCK:2 * BLOCK] = 0
            grads.append(g)
        grads = np.stack(grads)
        inp = os.path.join(work, "in%d.bin" % idx)
        outp = os.path.join(work, "out%d.bin" % idx)
        with open(inp, "wb") as f:
            f.write(master.tobytes() + grads.tobytes())
        subprocess.check_call([
            dump, str(n), str(steps), str(adamw), repr(lr), repr(b1),
            repr(b2), repr(eps), repr(wd), str(rng_range[0]),
            str(rng_range[1]), repr(rng_range[2]), inp, outp])
        with open(outp, "rb") as f:
            got = f.read()
        want = smap.tobytes() + umap.tobytes() + model(
            n, steps, adamw, lr, b1, b2, eps, wd, rng_range, master, grads,
            smap, umap)
        if got != want:
            gm = np.frombuffer(got[:2048], F)
            print("case %d differs (maps equal: %s; %d of %d bytes differ)" %
                  (idx, bool((gm == np.concatenate([smap, umap])).all()),
                   sum(1 for a, b in zip(got, want) if a != b)
                   if len(got) == len(want) else -1, len(want)))
            sys.exit(1)
        blocks = (n + BLOCK - 1) // BLOCK
        last = want[-4 * blocks:]
        zero_blocks = int((np.frombuffer(last, F) == 0).sum())
        print("n=%d steps=%d adamw=%d blocks=%d zero-blocks=%d: %d bytes "
              "equal" % (n, steps, adamw, blocks, zero_blocks, len(want)))
        equal += 1
    print("adam8bit-model: %d cases bitwise equal" % equal)


if __name__ == "__main__":
    main()
