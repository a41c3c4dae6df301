"""What the torch reference scripts of the runtime tests share
(adafactor_reference.py, muon_reference.py): torch with the optimizer, or
exit 77, which the tests take as a skip; the steps they take and the
cases they write."""
import sys


def require_torch(optimizer):
    """torch, or exit 77 when the Python has no torch or its torch no
    torch.optim.`optimizer`."""
    try:
        import torch
    except ImportError:
        print(sys.executable, "has no torch")
        sys.exit(77)
    if not hasattr(torch.optim, optimizer):
        print("torch", torch.__version__, "has no torch.optim." + optimizer)
        sys.exit(77)
    return torch


def step_blobs(p, opt, grads):
    """Steps `opt` over parameter p with each gradient in turn; the .bin
    file's first tensors: the initial parameter, the gradients and the
    parameter after the last step."""
    blobs = [p.detach().clone()]
    for g in grads:
        p.grad = g.clone()
        opt.step()
    return blobs + grads + [p.detach()]


def write_case(out, cases, name, blobs, fields):
    """Case `name`: its tensors one after the other, float32
    little-endian, into OUT/name.bin, and its line (the name, then
    `fields`) into the cases file."""
    import torch
    with open(f"{out}/{name}.bin", "wb") as f:
        for b in blobs:
            f.write(b.contiguous().to(torch.float32).numpy().tobytes())
    cases.write(f"{name} {fields}\n")
