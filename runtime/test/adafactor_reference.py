"""torch.optim.Adafactor's numbers for AdafactorTest.cpp.

Writes DIR/cases.txt, one line per case:
    name batch rows cols factored lr beta2_decay eps1 eps2 d weight_decay
    maximize steps
(eps1 -1: torch's None, fp32's machine epsilon; a vector has batch 1,
rows 1, factored 0) and DIR/name.bin, float32 little-endian: the initial
parameter, the gradient of each step, the parameter after the last step,
then row_var and col_var (factored) or variance. Exits 77 when the Python has
no torch or its torch no torch.optim.Adafactor (torch < 2.5).
"""
import sys

from torch_reference import require_torch, step_blobs, write_case

torch = require_torch("Adafactor")

# The tiny Llama of test/E2E (hidden 64, 4 heads of 16, 2 KV heads, ffn 172,
# vocab 256) as nn.Linear weights [out, in], its norms' vectors, and a
# stack of matrices (factored over its last two dims).
# name, shape, lr, beta2_decay, eps1 (None: fp32's eps), eps2, d,
# weight_decay, maximize
CASES = [
    ("q_proj", (64, 64), 1e-2, -0.8, None, 1e-3, 1.0, 0.0, False),
    ("k_proj", (32, 64), 1e-2, -0.8, None, 1e-3, 1.0, 0.1, False),
    ("gate_proj", (172, 64), 2e-2, -0.8, None, 1e-3, 1.0, 0.0, False),
    ("down_proj", (64, 172), 1e-2, -0.5, None, 1e-3, 2.0, 0.0, True),
    ("embed", (256, 64), 1e-2, -0.8, 1e-30, 1e-3, 1.0, 0.01, False),
    ("tiny_rows", (3, 50), 5e-2, -0.8, None, 1.0, 1.0, 0.0, False),
    ("norm", (64,), 1e-2, -0.8, None, 1e-3, 1.0, 0.0, False),
    ("bias_decay", (37,), 1e-2, -0.7, 1e-6, 1e-3, 1.5, 0.1, True),
    ("stack", (3, 5, 7), 1e-2, -0.8, None, 1e-3, 1.0, 0.0, False),
]
STEPS = 5


def main(out):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    with open(f"{out}/cases.txt", "w") as cases:
        for name, shape, lr, decay, eps1, eps2, d, wd, maximize in CASES:
            p = torch.nn.Parameter(torch.randn(*shape) * 0.05)
            # Gradients of growing size with a few near-zero rows so that
            # eps1 and the clipping both act.
            grads = []
            for s in range(STEPS):
                g = torch.randn(*shape) * (0.01 + 0.3 * s)
                if len(shape) > 1:
                    g[..., 0, :] *= 1e-4
                grads.append(g)
            opt = torch.optim.Adafactor([p], lr=lr, beta2_decay=decay,
                                        eps=(eps1, eps2), d=d,
                                        weight_decay=wd, maximize=maximize)
            blobs = step_blobs(p, opt, grads)
            st = opt.state[p]
            factored = len(shape) > 1
            if factored:
                blobs += [st["row_var"], st["col_var"]]
                batch = 1
                for n in shape[:-2]:
                    batch *= n
                rows, cols = shape[-2], shape[-1]
            else:
                blobs.append(st["variance"])
                batch, rows, cols = 1, 1, shape[0]
            write_case(out, cases, name, blobs,
                       f"{batch} {rows} {cols} {int(factored)} {lr!r} "
                       f"{decay!r} {-1.0 if eps1 is None else eps1!r} "
                       f"{eps2!r} {d!r} {wd!r} {int(maximize)} {STEPS}")


if __name__ == "__main__":
    main(sys.argv[1])
