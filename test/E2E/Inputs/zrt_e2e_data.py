"""The data files of zrt_e2e.py: tokens (raw, retyped, counting, words) and
.npy features and labels."""

import random
import struct

from zrt_e2e_checks import fail


def cmd_tokens(args):
    """Byte-level tokens of text files, each byte % vocab, as uint16."""
    data = b"".join(open(f, "rb").read() for f in args.files)
    with open(args.out, "wb") as f:
        f.write(struct.pack("<%dH" % len(data), *(b % args.vocab for b in data)))
    print("tokens: %d" % len(data))


# struct formats of the token types.
TOKEN_FORMATS = {"u2": "H", "u4": "I", "i4": "i", "i8": "q"}


def cmd_retype(args):
    """The uint16 tokens of a raw file in another form: raw uint32
    (raw-u4), a 1-D .npy array of a token type (npy-u2, npy-u4, npy-i4,
    npy-i8), or token ids and next-token labels [N, T] as two .npy arrays
    (rows-IDS-LABELS, e.g. rows-u2-i8: row k is the window at k * T, its
    labels shifted by one, as --data reads the file); --set I=V changes
    token I (a label of the arrays) after the conversion."""
    data = open(args.src, "rb").read()
    tokens = list(struct.unpack("<%dH" % (len(data) // 2), data))
    changes = [tuple(int(x) for x in c.split("=")) for c in args.set]
    form, _, kind = args.form.partition("-")
    if form == "raw":
        for i, v in changes:
            tokens[i] = v
        with open(args.out, "wb") as f:
            f.write(struct.pack("<%d%s" % (len(tokens), TOKEN_FORMATS[kind]),
                                *tokens))
    elif form == "npy":
        for i, v in changes:
            tokens[i] = v
        write_npy(args.out, "<" + kind, (len(tokens),), TOKEN_FORMATS[kind],
                  tokens)
    elif form == "rows":
        ids_kind, labels_kind = kind.split("-")
        t, n = args.seq, (len(tokens) - 1) // args.seq
        ids = tokens[:n * t]
        labels = tokens[1:n * t + 1]
        for i, v in changes:
            labels[i] = v
        write_npy(args.out + ".ids.npy", "<" + ids_kind, (n, t),
                  TOKEN_FORMATS[ids_kind], ids)
        write_npy(args.out + ".labels.npy", "<" + labels_kind, (n, t),
                  TOKEN_FORMATS[labels_kind], labels)
    else:
        fail("unknown form " + args.form)


def cmd_counting(args):
    """Tokens i * step + 1 mod vocab, i = 0, 1, ...: every id of a large
    vocabulary appears, and no two neighbours are equal."""
    tokens = [(i * args.step + 1) % args.vocab for i in range(args.count)]
    form, _, kind = args.form.partition("-")
    if form == "raw":
        with open(args.out, "wb") as f:
            f.write(struct.pack("<%d%s" % (len(tokens), TOKEN_FORMATS[kind]),
                                *tokens))
    else:
        write_npy(args.out, "<" + kind, (len(tokens),), TOKEN_FORMATS[kind],
                  tokens)


def cmd_words(args):
    """Byte tokens of a made-up text with fixed statistics: a lexicon of
    lowercase words and, after each word, one of a few successors of it
    (probabilities 1/2, 1/4, 1/8, 1/8); sentences of 4-11 words end with a
    full stop and a newline. Generated from --seed alone (random.random
    only, stable across Python versions), so no other file changes it, and
    it has no repeats to memorize: the loss falls to a floor."""
    rng = random.Random(args.seed)

    def pick(n):
        return min(int(rng.random() * n), n - 1)

    letters = "abcdefghijklmnopqrstuvwxyz"
    lexicon = ["".join(letters[pick(26)] for _ in range(2 + pick(6)))
               for _ in range(args.words)]
    successors = [[pick(args.words) for _ in range(4)]
                  for _ in range(args.words)]
    text, word, left = [], 0, 4 + pick(8)
    while len(text) < args.count:
        text += lexicon[word].encode()
        left -= 1
        if left == 0:
            text += b".\n"
            left = 4 + pick(8)
        else:
            text += b" "
        u = rng.random()
        word = successors[word][0 if u < 0.5 else 1 if u < 0.75 else
                                2 if u < 0.875 else 3]
    with open(args.out, "wb") as f:
        f.write(struct.pack("<%dH" % args.count, *text[:args.count]))
    print("tokens: %d" % args.count)


def write_npy(path, descr, shape, fmt, values):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d, " % d for d in shape).rstrip(" ")
        if len(shape) > 1 else "%d," % shape[0])
    pad = (64 - (10 + len(header) + 1) % 64) % 64
    header += " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        f.write(header.encode("latin1"))
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))


def cmd_npy(args):
    """Features from a Gaussian and labels from a random linear teacher."""
    rng = random.Random(args.seed)
    teacher = [[rng.gauss(0, 1) for _ in range(args.classes)]
               for _ in range(args.features)]
    xs, ys = [], []
    for _ in range(args.rows):
        x = [rng.gauss(0, 1) for _ in range(args.features)]
        scores = [sum(x[i] * teacher[i][c] for i in range(args.features))
                  for c in range(args.classes)]
        xs += x
        ys.append(max(range(args.classes), key=lambda c: scores[c]))
    # Rows whose label is the loss's ignore_index: "0,3,8-11".
    for part in filter(None, args.ignore_rows.split(",")):
        first, _, last = part.partition("-")
        for row in range(int(first), int(last or first) + 1):
            ys[row] = args.ignore_index
    write_npy(args.x, "<f4", (args.rows, args.features), "f", xs)
    write_npy(args.y, "<" + args.label_dtype,
              (args.rows,), "q" if args.label_dtype == "i8" else "i", ys)
