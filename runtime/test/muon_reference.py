"""torch.optim.Muon's numbers for MuonTest.cpp.

Writes DIR/cases.txt, one line per case:
    name rows cols nesterov adjust momentum lr weight_decay steps
(adjust: 0 original, 1 match_rms_adamw, 2 spectral_unclamped) and DIR/name.bin,
float32 little-endian: the initial parameter, the gradient of each step, the
parameter and the momentum buffer after the last step. Exits 77 when the
Python has no torch or its torch no Muon (torch < 2.9).
"""
import sys

from torch_reference import require_torch, step_blobs, write_case

torch = require_torch("Muon")

ADJUST = {None: 0, "match_rms_adamw": 1, "spectral_unclamped": 2}
# The tiny Llama of test/E2E (hidden 64, 4 heads of 16, 2 KV heads, ffn 172)
# as nn.Linear weights [out, in], and shapes with rows < cols, rows > cols.
CASES = [
    ("q_proj", 64, 64, True, None, 0.95),
    ("k_proj", 32, 64, True, None, 0.95),
    ("v_proj", 32, 64, False, "match_rms_adamw", 0.95),
    ("o_proj", 64, 64, False, None, 0.95),
    ("gate_proj", 172, 64, True, None, 0.95),
    ("up_proj", 172, 64, True, "match_rms_adamw", 0.95),
    ("down_proj", 64, 172, True, None, 0.95),
    ("wide", 24, 200, True, "spectral_unclamped", 0.95),
    ("tall", 200, 24, False, "spectral_unclamped", 0.95),
    ("tall_low_momentum", 150, 40, True, None, 0.3),
    ("square_odd", 37, 37, True, "match_rms_adamw", 0.9),
]
STEPS, LR, WD = 5, 0.02, 0.1


def main(out):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    with open(f"{out}/cases.txt", "w") as cases:
        for name, rows, cols, nesterov, adjust, momentum in CASES:
            p = torch.nn.Parameter(torch.randn(rows, cols) * 0.05)
            grads = [torch.randn(rows, cols) * (0.1 + 0.3 * s)
                     for s in range(STEPS)]
            opt = torch.optim.Muon([p], lr=LR, weight_decay=WD,
                                   momentum=momentum, nesterov=nesterov,
                                   adjust_lr_fn=adjust)
            blobs = step_blobs(p, opt, grads)
            blobs.append(opt.state[p]["momentum_buffer"])
            write_case(out, cases, name, blobs,
                       f"{rows} {cols} {int(nesterov)} {ADJUST[adjust]} "
                       f"{momentum!r} {LR!r} {WD!r} {STEPS}")


if __name__ == "__main__":
    main(sys.argv[1])
