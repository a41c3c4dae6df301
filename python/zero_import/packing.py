"""Packs tokenized documents into fixed rows of T tokens without padding
between them, as Hugging Face's DataCollatorWithFlattening lays a batch out:
each document keeps its own positions (0, 1, ... restarting at each one) and
the first label of each is -100, so that no token learns to predict the next
document's first token. A document is then a maximal run of positions that
rise by one, which is how transformers finds the documents of a packed row.

The packing is first-fit decreasing over windows of documents taken in an
order shuffled by the seed: deterministic for a seed, and close to the best
fill without sorting the whole corpus by length. A document longer than T is
cut into pieces of at most T tokens, each a document of its own (positions
from 0). The slots after a row's last document are padding: the pad id,
labelled -100, positions 0, 1, ... (a document of their own, which no real
token attends to).
"""

IGNORE = -100


class PackFailure(Exception):
    """Documents that cannot be packed as asked: the message names where."""


def split_pieces(docs, T, no_split):
    """(ids, labels, where) of each piece of at most T tokens; a document over
    T is an error naming where it came from when `no_split`."""
    pieces = []
    for ids, labels, where in docs:
        if len(ids) > T and no_split:
            raise PackFailure("%s: the document has %d tokens, more than "
                              "--seq %d (--no-split keeps documents whole)"
                              % (where, len(ids), T))
        for b in range(0, len(ids), T):
            pieces.append((ids[b:b + T], labels[b:b + T], where))
    return pieces


def first_fit_decreasing(lengths, T, window):
    """Rows of document indices: each window of `window` consecutive
    documents is placed longest first into the first row of that window with
    room for it."""
    import numpy as np
    rows = []
    for start in range(0, len(lengths), window):
        idx = list(range(start, min(start + window, len(lengths))))
        # Stable: documents of one length keep their order.
        idx.sort(key=lambda i: -lengths[i])
        free = np.empty(len(idx), dtype=np.int64)
        members = []
        for i in idx:
            n = len(members)
            fits = np.flatnonzero(free[:n] >= lengths[i])
            if fits.size:
                r = int(fits[0])
            else:
                r = n
                members.append([])
                free[r] = T
            members[r].append(i)
            free[r] -= lengths[i]
        rows.extend(members)
    return rows


def plan_rows(pieces, T, seed, window, rows_per_step=None):
    """The order of `pieces` (shuffled by the seed), the rows of indices into
    it (first-fit decreasing, then shuffled by the same generator), the last
    step completed by empty rows to a multiple of `rows_per_step`, and how
    many those are. Nothing of size [N, T] yet: zero-data checks that the
    arrays fit before layout allocates them."""
    import numpy as np
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(pieces))
    pieces = [pieces[i] for i in order]
    rows = first_fit_decreasing([len(p[0]) for p in pieces], T, window)
    # Windows fill their rows longest first: shuffle the rows so that a
    # step does not hold only long or only short documents.
    rows = [rows[i] for i in rng.permutation(len(rows))]
    filler = 0
    if rows_per_step and len(rows) % rows_per_step:
        filler = rows_per_step - len(rows) % rows_per_step
        rows += [[] for _ in range(filler)]
    return pieces, rows, filler


def layout(pieces, rows, filler, T, pad):
    """ids, labels and positions [N, T] (int64) of planned rows, and the
    statistics zero-data prints."""
    import numpy as np
    N = len(rows)
    ids = np.full((N, T), pad, dtype=np.int64)
    labels = np.full((N, T), IGNORE, dtype=np.int64)
    positions = np.tile(np.arange(T, dtype=np.int64), (N, 1))
    for r, members in enumerate(rows):
        at = 0
        for i in members:
            d_ids, d_labels, _ = pieces[i]
            n = len(d_ids)
            ids[r, at:at + n] = d_ids
            labels[r, at:at + n] = d_labels
            labels[r, at] = IGNORE
            positions[r, at:at + n] = np.arange(n)
            at += n
        # The padding after the last document restarts its positions.
        positions[r, at:] = np.arange(T - at)
    lengths = [len(p[0]) for p in pieces]
    tokens = sum(lengths)
    histogram = {}
    for n in lengths:
        histogram[n] = histogram.get(n, 0) + 1
    return ids, labels, positions, {
        "documents": len(pieces), "rows": N, "filler_rows": filler,
        "tokens": tokens, "fill": tokens / (N * T) if N else 0.0,
        "padded_fill": tokens / (len(pieces) * T) if pieces else 0.0,
        "histogram": histogram}


def doc_lengths_json(stats, T):
    """The packed documents' lengths, as `--doc-lengths` writes them: what a
    cost model needs to price attention by the documents' squared lengths
    instead of T^2 a row."""
    return {"seq": T, "rows": stats["rows"], "documents": stats["documents"],
            "tokens": stats["tokens"],
            "lengths": [[n, c] for n, c in sorted(stats["histogram"].items())]}
