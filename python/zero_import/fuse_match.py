"""What the fusion patterns (fuse.py, fuse_rope.py, fuse_attention.py) ask
of the lowered graph: the op of a kind that computed a symbol, and whether
a symbol is read once."""


def producer(sym, kind):
    return sym.op if sym.op is not None and sym.op.kind == kind else None


def single_use(g, sym):
    return len(g.users(sym)) == 1
