"""Padding-free packed training (`zero-import --hf DIR --packed`): each row
holds several documents, and the step's `position_ids` restart at 0 at
each one.

Given position_ids without an attention mask and without a cache,
transformers finds the documents (masking_utils.
find_packed_sequence_indices: a document is a maximal run of positions
rising by one) and masks each attention to them: a token sees the earlier
tokens of its own document only (within its window, on a sliding layer),
and its rotary embedding turns it by its own position. While tracing:

- find_packed_sequence_indices is one call, `document_ids`, lowered to
  nn.document_ids of the position_ids input, once per step;
- the mask transformers builds from it (packed_sequence_compatibility_
  function's mask function, called by sdpa_mask) is one call,
  `document_mask`: the mask transformers builds without documents (causal,
  or a sliding window), on the token indices, and the same document. On
  the indices rather than the positions: within a document the positions
  rise by one with the indices, so both tell the same distances. The
  lowering holds it as a DocMask, which the attention takes as its
  `segments`;
- the model's rotary module (its own inv_freq buffer) is one call: cos
  and sin at the step's positions (rotary_table pseudo ops), which
  fuse_rope.py turns into nn.rope with `positions`.

Each call is checked on the example, whose rows hold documents of
several lengths (example_positions): the mask against transformers' own,
the cos and sin against nn.rope's at those positions. Whatever else a
model computes with positions is refused by name: an attention without
the documents (check_step), a table of the constant positions 0..T-1
(fuse.py, Blocks.positions), the positions read by any other operation
(check_positions_use), so that no step trains on a row as one document.
"""

import contextlib
import inspect
import operator
import sys

import torch
import torch.fx as fx

from .errors import ImportFailure, source_of
from .fuse_rope import positions_freqs, rotary_tables, rotary_view
from .lower_blocks import Const, DocMask, is_sym, unwrap

# Rotary types whose frequencies depend on the largest position of the
# batch (transformers' dynamic_rope_update): the example's would be baked
# in.
_DYNAMIC_ROPE = ("dynamic", "longrope")


def example_positions(batch, seq):
    """[batch, seq] int64 positions of packed rows: documents of several
    lengths (half the row or more, single tokens, a few), every other row
    starting inside a document (at position 3), each row cut elsewhere, so
    that the trace takes transformers' packed path and no row's values
    stand for the others'."""
    rows = []
    for b in range(batch):
        lengths = [seq // 2 + b % 3, 1, 2 + b % 4]
        row, start, i = [], 3 if b % 2 else 0, 0
        while len(row) < seq:
            n = lengths[i % len(lengths)]
            row.extend(range(start, start + n))
            start, i = 0, i + 1
        rows.append(row[:seq])
    return torch.tensor(rows, dtype=torch.int64)


# -- tracing -----------------------------------------------------------------


def document_ids(position_ids):
    """find_packed_sequence_indices without the shortcut that reads the
    values (None where every row is one document): the index of each
    token's document in its row."""
    first = position_ids[:, :1] - 1
    diff = torch.diff(position_ids, prepend=first, dim=-1)
    return (diff != 1).cumsum(-1)


def document_mask(documents, base):
    """`base` (sdpa_mask's bool mask [.., T, T] on the token indices, True
    where seen) where the query's and the key's documents are the same,
    [batch, 1, T, T]."""
    same = documents[:, None, :, None] == documents[:, None, None, :]
    return base & same


def _is_traced(x):
    return isinstance(x, fx.Proxy)


def _fail(tracer, message):
    raise ImportFailure(message, path=tracer.path_stack[-1]
                        if tracer.path_stack else "",
                        source=tracer.caller_source())


class _DocumentMaskFunction:
    """The mask function packed_sequence_compatibility_function returns,
    as one traced call of document_mask when sdpa_mask applies it to the
    token indices."""

    def __init__(self, tracer, compat, mask_function, position_ids,
                 documents):
        self.tracer = tracer
        self.compat = compat
        self.mask_function = mask_function
        self.position_ids = position_ids
        self.documents = documents

    def __call__(self, batch_idx, head_idx, q_idx, kv_idx):
        docs = self.documents.concrete
        b, t = docs.shape
        idx = (batch_idx, head_idx, q_idx, kv_idx)
        shapes = ((b, 1, 1, 1), (1, 1, 1, 1), (1, 1, t, 1), (1, 1, 1, t))
        ok = all(torch.is_tensor(i) and not _is_traced(i) and
                 tuple(i.shape) == s for i, s in zip(idx, shapes))
        ok = ok and all(torch.equal(i.flatten(), torch.arange(
            i.numel(), dtype=i.dtype)) for i in idx)
        if not ok:
            _fail(self.tracer,
                  "transformers builds the mask of the packed documents from "
                  "other indices than each row's tokens 0..T-1 (a custom or "
                  "combined mask function, applied by vmap, or an offset); "
                  "--packed takes the causal and sliding-window masks")
        base = self.mask_function(*idx)
        if _is_traced(base) or not torch.is_tensor(base) or \
                base.dtype != torch.bool:
            _fail(self.tracer,
                  "the mask transformers combines with the packed documents "
                  "depends on the step's inputs; --packed takes the causal "
                  "and sliding-window masks")
        out = self.tracer.create_proxy("call_function", document_mask,
                                       (self.documents, base), {})
        # transformers' own mask of the example: the same documents, its
        # mask function on the positions.
        positions = getattr(self.position_ids, "concrete", self.position_ids)
        want = self.compat(self.mask_function, positions, docs)(*idx)
        full = (b, 1, t, t)
        if not torch.equal(torch.broadcast_to(want, full),
                           torch.broadcast_to(out.concrete, full)):
            _fail(self.tracer,
                  "transformers' mask of the example's packed documents is "
                  "not its mask without documents on the token indices "
                  "within each document (a mask function that reads the "
                  "positions otherwise than by their distances)")
        return out


@contextlib.contextmanager
def traced_calls(tracer):
    """find_packed_sequence_indices and the packed mask function of
    transformers' masking_utils, as one call each while `tracer` traces
    (when their position_ids are traced); restored afterwards."""
    mu = sys.modules.get("transformers.masking_utils")
    names = ("find_packed_sequence_indices",
             "packed_sequence_compatibility_function")
    if mu is None or not all(hasattr(mu, n) for n in names):
        yield
        return
    find, compat = (getattr(mu, n) for n in names)

    def found(position_ids):
        if not _is_traced(position_ids):
            return find(position_ids)
        return tracer.create_proxy("call_function", document_ids,
                                   (position_ids,), {})

    def compatible(mask_function, position_ids, packed_sequence_mask):
        if not _is_traced(packed_sequence_mask):
            return compat(mask_function, position_ids, packed_sequence_mask)
        return _DocumentMaskFunction(tracer, compat, mask_function,
                                     position_ids, packed_sequence_mask)

    try:
        mu.find_packed_sequence_indices = found
        mu.packed_sequence_compatibility_function = compatible
        yield
    finally:
        mu.find_packed_sequence_indices = find
        mu.packed_sequence_compatibility_function = compat


def _own_inv_freq(m):
    return [name for name, buf in m.named_buffers(recurse=False)
            if buf is not None and name.endswith("inv_freq") and
            not name.endswith("original_inv_freq")]


def is_rotary(m):
    """Whether m is a transformers rotary embedding: an `inv_freq` buffer
    of its own (`<layer type>_inv_freq` too) and forward(x, position_ids)
    returning cos and sin."""
    if not _own_inv_freq(m):
        return False
    try:
        params = inspect.signature(m.forward).parameters
    except (TypeError, ValueError):
        return False
    return "position_ids" in params


def _dynamic_rope(m):
    """The rope type of m whose frequencies depend on the positions' maximum,
    or None."""
    kinds = getattr(m, "rope_type", None)
    kinds = kinds.values() if isinstance(kinds, dict) else [kinds]
    for kind in kinds:
        if isinstance(kind, str) and any(d in kind for d in _DYNAMIC_ROPE):
            return kind
    return None


def _stand_in(a):
    """A meta tensor's CPU stand-in: its shape and dtype, no memory (the
    rotary modules read x's device and dtype only)."""
    if torch.is_tensor(a) and a.is_meta:
        return torch.zeros((), dtype=a.dtype).expand(a.shape)
    return a


def rotary_value(module, args, kwargs):
    """The rotary module's cos and sin, on the CPU: its x (the hidden
    states, on the meta device) stood in for."""
    args = fx.node.map_aggregate(args, _stand_in)
    kwargs = fx.node.map_aggregate(kwargs, _stand_in)
    return module(*args, **kwargs)


# -- the model ---------------------------------------------------------------

# ALiBi adds a bias by distance to the scores: its families build it from
# the attention mask or the indices, not from the documents.
_ALIBI_TYPES = ("bloom", "mpt")


def refuse(model):
    """A model whose attention cannot take the packed documents here is
    refused before tracing, naming what it has."""
    config = getattr(model, "config", None)
    mtype = getattr(config, "model_type", "")
    if mtype in _ALIBI_TYPES or getattr(config, "alibi", False):
        raise ImportFailure(
            "--packed: %s's ALiBi attention biases the scores by the "
            "distance of the token indices, not of the documents' positions"
            % type(model).__name__, source=source_of(type(model)))
    for path, m in model.named_modules():
        kind = is_rotary(m) and _dynamic_rope(m)
        if kind:
            raise ImportFailure(
                "--packed: the rotary embedding %s (rope_type %r) recomputes "
                "its frequencies from the largest position of the batch" % (
                    type(m).__name__, kind), path=path,
                source=source_of(type(m)))


# -- lowering ----------------------------------------------------------------


def is_document_ids(fn):
    return fn is document_ids


def is_document_mask(fn):
    return fn is document_mask


def lower_document_ids(low, c):
    """nn.document_ids of the step's position_ids, one per step (each mask
    transformers builds finds the documents again)."""
    pos = c.a[0]
    if not is_sym(pos) or pos.is_float or pos.arg is None or \
            len(pos.shape) != 2:
        c.where.fail("the packed documents are found from positions that "
                     "are not the step's position_ids input [batch, seq]")
    if id(pos) not in low.documents:
        low.documents[id(pos)] = low.emit("document_ids", [pos], {},
                                          [pos.shape], c.where, dtype="i32")
    return low.documents[id(pos)]


def lower_document_mask(low, c):
    docs, base = c.a[0], unwrap(c.a[1])
    if not is_sym(docs) or docs.op is None or \
            docs.op.kind != "document_ids" or not torch.is_tensor(base):
        c.where.fail("a mask of packed documents from other than "
                     "nn.document_ids of the step's position_ids")
    return DocMask(docs, ~base.detach().cpu(), tuple(c.value.shape))


class RotaryCall:
    """One call of a rotary module: its cos and sin at the example's
    positions, and what computes them again at other positions."""

    def __init__(self, module, positions, value, pos_value, args, kwargs):
        self.module = module
        self.positions = positions
        self.cos, self.sin = (t.detach().float().cpu() for t in value)
        self.pos_value = pos_value
        self.args, self.kwargs = args, kwargs

    def tables_at(self, pos):
        """cos and sin the module computes at positions `pos` [1, P]."""
        args = [pos if a is self.positions else unwrap(a) for a in self.args]
        kwargs = {k: pos if v is self.positions else unwrap(v)
                  for k, v in self.kwargs.items()}
        with torch.no_grad():
            cos, sin = rotary_value(self.module, args, kwargs)
        return cos.float().cpu(), sin.float().cpu()


def _stand_in_arg(a):
    """A lowered argument of the rotary call as the module reads it again:
    a float Sym (its x) as a zero-stride float32 tensor of its shape."""
    if is_sym(a) and a.is_float:
        return Const(torch.zeros(()).expand(a.shape))
    return a


def lower_rotary(low, c):
    """The rotary module's (cos, sin) at the step's position_ids: a
    rotary_table pseudo op each, which fuse_rope takes."""
    m, where = c.module, c.where
    kind = _dynamic_rope(m)
    if kind:
        where.fail("--packed: a rotary embedding of rope_type %r recomputes "
                   "its frequencies from the largest position" % kind)
    params = list(inspect.signature(m.forward).parameters)
    i = params.index("position_ids")
    pos = c.arg(i, "position_ids")
    if not is_sym(pos) or pos.is_float or pos.arg is None:
        where.fail("--packed: the rotary embedding is computed from other "
                   "positions than the step's position_ids input")
    value = c.value
    if not isinstance(value, (tuple, list)) or len(value) != 2 or \
            not all(torch.is_tensor(t) and t.shape == value[0].shape
                    for t in value) or \
            tuple(value[0].shape[:2]) != pos.shape:
        where.fail("--packed: a rotary embedding that does not return cos "
                   "and sin [batch, seq, dim] at the step's positions")
    args = [_stand_in_arg(a) for a in c.a]
    kwargs = {k: _stand_in_arg(v) for k, v in c.kw.items()}
    call = RotaryCall(m, pos, value, low.input_values[id(pos)], args,
                      kwargs)
    return tuple(low.emit("rotary_table", [pos], {"fn": fn, "call": call},
                          [tuple(t.shape)], where)
                 for fn, t in zip(("cos", "sin"), value))


def lower_halves_rope(low, x, cos, sin, where):
    """nn.rope with positions of gpt-oss's rotation of the halves of x by
    [.., d / 2] tables, they a rotary module's at the step's positions."""
    found = [rotary_view(t, x.shape) if is_sym(t) else None
             for t in (cos, sin)]
    if None in found or found[0][1] or found[1][1] or \
            [op.attrs["fn"] for op, _ in found] != ["cos", "sin"] or \
            found[0][0].attrs["call"] is not found[1][0].attrs["call"] or \
            2 * found[0][0].results[0].shape[-1] != x.shape[-1]:
        where.fail("--packed: a rotary embedding of halves whose cos and sin "
                   "are not a rotary module's at the step's position_ids, "
                   "broadcast over the heads of [batch, heads, seq, "
                   "head_dim]")
    call = found[0][0].attrs["call"]
    attrs = positions_freqs(call, rotary_tables(low.module), halves=True)
    if attrs is None:
        where.fail("--packed: a rotary embedding of halves whose cos and sin, "
                   "the rotary embedding %s's at the step's position_ids, "
                   "are not Hugging Face's of a theta or of the module's own "
                   "inv_freq" % type(call.module).__name__)
    return low.emit("rope", [x, call.positions], attrs, [x.shape], where)


# -- the positions' uses -----------------------------------------------------


def _reads(v, sym):
    if v is sym:
        return True
    if isinstance(v, (tuple, list)):
        return any(_reads(x, sym) for x in v)
    if isinstance(v, dict):
        return any(_reads(x, sym) for x in v.values())
    return False


def check_positions_use(low, kind, target, module, args, kwargs, where):
    """The step's position_ids may be read by what takes them as the packed
    documents or positions: find_packed_sequence_indices, a rotary module,
    a learned position embedding (GPT-2's), and the expand to their own
    shape that transformers applies; anything else that reads them (a
    table indexed by them, a scale computed from them) is refused by
    name."""
    positions = [a for a in low.g.args if a.arg == "position_ids"]
    if not positions or not _reads((args, kwargs), positions[0]):
        return
    if kind == "call_function" and target is document_ids:
        return
    if kind == "call_method" and target in ("expand", "expand_as"):
        return
    if kind == "call_module" and (is_rotary(module) or
                                  isinstance(module, torch.nn.Embedding)):
        return
    where.fail("--packed: the step's position_ids are read by %s, which the "
               "importer takes only as the packed documents, a rotary "
               "embedding's positions or a learned position embedding's "
               "rows" % where.op)


# -- the mask's uses ---------------------------------------------------------


def has_doc_mask(v):
    if isinstance(v, DocMask):
        return True
    if isinstance(v, (tuple, list)):
        return any(has_doc_mask(x) for x in v)
    if isinstance(v, dict):
        return any(has_doc_mask(x) for x in v.values())
    return False


def _full_index(idx, shape):
    """Whether indexing by idx reads the whole tensor, as it is."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    if any(i is None or not isinstance(i, slice) and i is not Ellipsis
           for i in idx):
        return False
    axis = 0
    explicit = sum(1 for i in idx if i is not Ellipsis)
    for i in idx:
        if i is Ellipsis:
            axis += len(shape) - explicit
            continue
        if axis >= len(shape) or i.indices(shape[axis]) != \
                (0, shape[axis], 1):
            return False
        axis += 1
    return True


def _scalar(v):
    v = unwrap(v)
    if torch.is_tensor(v) and v.numel() == 1:
        return float(v)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return None


def lower_mask_use(low, kind, target, args, kwargs, value, where):
    """A call that reads the DocMask of packed documents: its views, its
    form as an added mask (torch.where(mask, 0, min)), the attentions that
    take it; anything else is refused."""
    a = list(args)
    m = a[0] if a and isinstance(a[0], DocMask) else None
    shape = tuple(value.shape) if torch.is_tensor(value) else None
    if kind == "call_method" and m is not None:
        if target in ("expand", "expand_as", "contiguous", "to", "bool",
                      "float", "type_as") and shape is not None:
            is_bool = value.dtype == torch.bool
            if is_bool == (m.fill is None) and (is_bool or value.dtype ==
                                                torch.float32):
                return m.viewed(shape)
    if kind == "call_function":
        if target is operator.getitem and m is not None and \
                _full_index(unwrap(a[1]), m.shape):
            return m
        if target is torch.where and m is not None and m.fill is None and \
                len(a) == 3 and not kwargs:
            keep, fill = _scalar(a[1]), _scalar(a[2])
            if keep == 0.0 and fill is not None and \
                    value.dtype == torch.float32:
                return m.filled(fill, shape)
        if target in (operator.add, operator.iadd, torch.add) and \
                len(a) == 2 and not kwargs:
            return _add_mask(low, a, value, where)
    if kind == "call_method" and target == "add" and len(a) == 2 and \
            not kwargs:
        return _add_mask(low, a, value, where)
    where.fail("--packed: the attention mask of the packed documents "
               "(transformers' causal mask within each document) is read by "
               "%s, which the importer takes only as an attention's mask" %
               where.op)


def _add_mask(low, a, value, where):
    """scores + the added DocMask: an add_segments pseudo op, which
    fuse_attention takes as the attention's mask."""
    x, m = (a[0], a[1]) if isinstance(a[1], DocMask) else (a[1], a[0])
    if not is_sym(x) or not isinstance(m, DocMask) or m.fill is None or \
            tuple(value.shape) != x.shape:
        where.fail("--packed: the attention mask of the packed documents "
                   "added to other than an attention's scores")
    x = low.float_sym(x, where)
    # The documents an operand, so that they live until the attention
    # takes them.
    return low.emit("add_segments", [x, m.segments], {"mask": m}, [x.shape],
                    where)


# -- the step ----------------------------------------------------------------


def check_step(g):
    """Every attention of a packed step masks the documents and every
    rotary embedding turns by the step's positions; a step that reads
    neither, or whose attention or rope is computed without them
    somewhere, would train on rows as one document each."""
    docs = [op for op in g.ops if op.kind == "document_ids"]
    for op in g.ops:
        if op.kind == "attention" and (len(op.operands) < 5 or
                                       op.operands[4] is None):
            op.where.fail("--packed: this attention does not mask the "
                          "packed documents (transformers builds its mask "
                          "without the step's position_ids)")
        if op.kind == "rope" and len(op.operands) < 2:
            op.where.fail("--packed: this rotary embedding turns by the "
                          "positions 0..T-1 of every row, not by the step's "
                          "position_ids")
    if not docs:
        raise ImportFailure("--packed: the step has no attention that masks "
                            "the packed documents")
