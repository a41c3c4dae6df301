"""zero-data: text as the token arrays `./train` reads, with the model's own
tokenizer (a Hugging Face tokenizer directory, through AutoTokenizer).

`zero-data tokens` writes one token stream for pretraining (`--data`):
every document encoded as the tokenizer encodes a text by default (its BOS
where it adds one) and followed by its eos token when it has one, uint16
when the vocabulary fits, else uint32.

`zero-data sft` writes `ids.npy` and `labels.npy`, int64 [N, T], for
`--inputs/--labels`: a prompt's tokens are labelled -100 and the response's
tokens are their own ids (not shifted: a Hugging Face step shifts them, its
`labels same_tokens`); rows are padded to T with the pad token (else eos,
else 0), labelled -100.

With `--pack`, either writes rows of T tokens that hold whole documents one
after another (packing.py), their labels (a document's tokens, or a
sample's as sft labels them, the first of each document -100) and
`positions.npy`, each document's positions from 0.
"""

import argparse
import io
import json
import os
import sys

from .checks import output_conflict, too_big
from .packing import (PackFailure, doc_lengths_json, layout, plan_rows,
                      split_pieces)

# transformers, numpy and jinja2 are imported in the functions that use
# them, so that --help and the argument checks need none of them.

IGNORE = -100

USAGE_EXAMPLE = """examples:
  zero-data tokens --tokenizer DIR train.txt more.jsonl -o tokens.npy
  zero-data sft --tokenizer DIR pairs.jsonl --seq 512 --truncate \\
      --ids ids.npy --labels labels.npy
  mpirun -np 2 ./train --inputs ids.npy --labels labels.npy --steps 100
  zero-data tokens --tokenizer DIR docs.jsonl --pack --seq 1024 \\
      --tokens-per-step 16384 --doc-lengths lengths.json

A .txt file is one document; a .jsonl file holds one JSON object a line,
its "text" (tokens), its "prompt" and "response" or its chat "messages"
(sft: the tokenizer's chat template renders them; the prompt is all
before the last assistant turn, the response that turn).
"""


class DataFailure(Exception):
    """Input zero-data cannot turn into tokens: the message names where."""


def parser():
    p = argparse.ArgumentParser(
        prog="zero-data", epilog=USAGE_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Tokenize text with a model's Hugging Face tokenizer "
                    "into the arrays ./train reads.")
    sub = p.add_subparsers(dest="mode", required=True, metavar="MODE")
    t = sub.add_parser("tokens", help="one token stream for pretraining "
                       "(./train --data)")
    s = sub.add_parser("sft", help="prompt-masked ids and labels [N, T] "
                       "(./train --inputs/--labels)")
    for q in (t, s):
        q.add_argument("inputs", metavar="FILE", nargs="+",
                       help=".txt (one document) or .jsonl files")
        q.add_argument("--tokenizer", metavar="DIR", required=True,
                       help="the model's Hugging Face tokenizer directory")
    t.add_argument("-o", dest="output",
                   help="the token .npy to write (its name ends in .npy; "
                        "without --pack, required)")
    t.add_argument("--text-field", default="text",
                   help="the text of a jsonl row (default: text)")
    t.add_argument("--seq", type=int, metavar="T",
                   help="with --pack, the tokens of each row")
    s.add_argument("--seq", type=int, required=True, metavar="T",
                   help="the tokens of each row")
    for q in (t, s):
        q.add_argument("--ids",
                       help="the ids .npy to write (default: ids.npy)")
        q.add_argument("--labels",
                       help="the labels .npy to write (default: labels.npy)")
    s.add_argument("--prompt-field", default="prompt",
                   help="the prompt of a jsonl row (default: prompt)")
    s.add_argument("--response-field", default="response",
                   help="the response of a jsonl row (default: response)")
    s.add_argument("--messages-field", default="messages",
                   help="a row's chat messages, rendered by the tokenizer's "
                        "chat template (default: messages)")
    s.add_argument("--truncate", action="store_true",
                   help="cut rows longer than T to their first T tokens "
                        "(otherwise such a sample is an error)")
    for q in (t, s):
        q.add_argument("--pack", action="store_true",
                       help="rows of T tokens holding whole documents, with "
                            "each document's positions (--positions)")
        q.add_argument("--positions",
                       help="with --pack, the positions .npy to write "
                            "(default: positions.npy)")
        q.add_argument("--no-split", action="store_true",
                       help="with --pack, refuse a document over T tokens "
                            "(otherwise it is cut into pieces of at most T)")
        q.add_argument("--seed", type=int,
                       help="with --pack, the order the documents are packed "
                            "in and the rows' order (default: 1234)")
        q.add_argument("--pack-window", type=int, metavar="N",
                       help="with --pack, the documents first-fit "
                            "decreasing places together (default: 1000)")
        q.add_argument("--tokens-per-step", type=int, metavar="N",
                       help="with --pack, the tokens of a global batch (a "
                            "multiple of T): the rows come in whole steps of "
                            "N / T rows")
        q.add_argument("--doc-lengths", metavar="FILE",
                       help="with --pack, write the packed documents' "
                            "lengths (JSON) for the cost model")
    return p


def load_tokenizer(path):
    if not os.path.isdir(path):
        raise DataFailure("tokenizer directory %s does not exist" % path)
    from transformers import AutoTokenizer
    try:
        return AutoTokenizer.from_pretrained(path)
    # transformers' own code on the directory's files, whatever they hold.
    except Exception as e:  # noqa: BLE001
        raise DataFailure("cannot load a tokenizer from %s: %s" % (
            path, str(e).splitlines()[0] if str(e) else type(e).__name__))


def read_text(path):
    """The text of `path` as open(path, encoding="utf-8") reads it
    (universal newlines); bytes that are not UTF-8 name their line and
    column."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        before = data[:e.start].decode("utf-8")
        before = before.replace("\r\n", "\n").replace("\r", "\n")
        raise DataFailure("%s:%d:%d: not UTF-8 text (byte 0x%02x)" % (
            path, before.count("\n") + 1,
            len(before) - before.rfind("\n"), data[e.start]))
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")


def read_rows(path):
    """(line, value) of each document in a file: a .txt file's whole text,
    or each non-blank line of a .jsonl file as a JSON object."""
    if not os.path.isfile(path):
        raise DataFailure("%s: no such file" % path)
    with read_text(path) as f:
        if not path.endswith(".jsonl"):
            yield 1, f.read()
            return
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataFailure("%s:%d:%d: malformed JSON: %s" % (
                    path, n, e.colno, e.msg))
            except RecursionError:
                raise DataFailure("%s:%d: JSON nested too deeply to read" % (
                    path, n))
            if not isinstance(row, dict):
                raise DataFailure("%s:%d: expected a JSON object, not %s" % (
                    path, n, type(row).__name__))
            yield n, row


def field(row, name, where):
    if name not in row:
        raise DataFailure("%s: no field \"%s\"" % (where, name))
    value = row[name]
    if not isinstance(value, str):
        raise DataFailure("%s: field \"%s\" is not a string" % (where, name))
    return unicode_text(value, where, "field \"%s\"" % name)


def unicode_text(value, where, what):
    """`value`, a string JSON's \\u escapes may have given lone surrogates
    that no tokenizer encodes."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise DataFailure("%s: %s holds \\u%04x, half of a surrogate pair, "
                          "not a character" % (where, what,
                                               ord(value[e.start])))
    return value


def encode(tok, text, special):
    try:
        return list(tok(text, add_special_tokens=special)["input_ids"])
    # A tokenizer directory whose files transformers loads but then fails
    # on (a tokenizer_config.json "model_max_length" that is a list).
    except (TypeError, ValueError, AttributeError, KeyError,
            IndexError) as e:
        raise DataFailure("the tokenizer %s fails to encode a text: %s: %s"
                          % (getattr(tok, "name_or_path", ""),
                             type(e).__name__, e))


def make_tokens(args, tok):
    import numpy as np
    eos = tok.eos_token_id
    stream, docs, packed = [], 0, []
    for path in args.inputs:
        for n, row in read_rows(path):
            where = "%s:%d" % (path, n)
            text = row if isinstance(row, str) else \
                field(row, args.text_field, where)
            # An empty document would add only its BOS and eos.
            if not text.strip():
                continue
            ids = encode(tok, text, True)
            if eos is not None and (not ids or ids[-1] != eos):
                ids.append(eos)
            if args.pack:
                packed.append((ids, list(ids), where))
            stream.extend(ids)
            docs += 1
    if not stream:
        raise DataFailure("no text in %s" % ", ".join(args.inputs))
    if args.pack:
        return write_packed(args, packed, pad_token(tok), docs)
    vocab = max(len(tok), tok.vocab_size)
    dtype = np.uint16 if vocab <= 1 << 16 else np.uint32
    save(args.output, np.asarray(stream, dtype=dtype))
    print("zero-data: %s: %d documents, %d tokens (%s, vocabulary %d%s)" % (
        args.output, docs, len(stream), np.dtype(dtype).name, vocab,
        ", eos %d after each document" % eos if eos is not None else
        ", no eos token"))


def chat_sample(tok, messages, where, name):
    if not isinstance(messages, list) or not all(
            isinstance(m, dict) and "role" in m for m in messages):
        raise DataFailure("%s: field \"%s\" is not a list of messages with "
                          "a role" % (where, name))
    # A template renders a missing content as nothing: a silent empty turn.
    for i, m in enumerate(messages, 1):
        if not isinstance(m.get("content"), str):
            raise DataFailure("%s: message %d of \"%s\" (%s) %s" % (
                where, i, name, m["role"], "has no \"content\""
                if "content" not in m else "has a \"content\" that is not "
                "a string"))
        unicode_text(m["content"], where, "message %d of \"%s\"" % (i, name))
    last = max((i for i, m in enumerate(messages)
                if m["role"] == "assistant"), default=None)
    if last is None:
        raise DataFailure("%s: no assistant message in \"%s\"" % (where, name))
    if not tok.chat_template:
        raise DataFailure("%s: the tokenizer has no chat template for \"%s\""
                          % (where, name))
    from jinja2 import TemplateError
    # The template writes the special tokens (BOS included) as text.
    try:
        prompt = tok.apply_chat_template(messages[:last], tokenize=False,
                                         add_generation_prompt=True)
        full = tok.apply_chat_template(messages[:last + 1], tokenize=False)
    # transformers' own ValueError: a conversation whose only assistant
    # turn comes first leaves an empty prompt.
    except (TemplateError, ValueError, TypeError) as e:
        raise DataFailure("%s: the tokenizer's chat template fails on "
                          "\"%s\": %s" % (where, name, e))
    prompt, full = encode(tok, prompt, False), encode(tok, full, False)
    if full[:len(prompt)] != prompt:
        raise DataFailure("%s: the chat template's rendering of the "
                          "conversation does not begin with its rendering of "
                          "the prompt, so the prompt cannot be masked" % where)
    return prompt, full[len(prompt):]


def pair_sample(tok, prompt, response):
    # The prompt as the tokenizer encodes a text (its BOS), the response
    # encoded alone and ended with eos, so that the model learns to stop.
    ids = encode(tok, response, False)
    if tok.eos_token_id is not None:
        ids.append(tok.eos_token_id)
    return encode(tok, prompt, True), ids


# The options that only --pack reads, and their defaults.
PACK_OPTIONS = (("--positions", "positions", "positions.npy"),
                ("--no-split", "no_split", False),
                ("--seed", "seed", 1234),
                ("--pack-window", "pack_window", 1000),
                ("--tokens-per-step", "tokens_per_step", None),
                ("--doc-lengths", "doc_lengths", None))


def check_args(args):
    """The command line's problems that need no input read: the options that
    go together, the outputs (exactly the files named, none an input or
    another output), and the sizes. Fills in the defaults."""
    rows = args.mode == "sft" or args.pack
    # Given on the command line: not None, and for --no-split not False
    # (`0 in (None, False)` would miss --seed 0).
    given = [option for option, name, default in PACK_OPTIONS
             if getattr(args, name) is not None and
             getattr(args, name) is not False]
    if args.mode == "tokens":
        if args.pack and args.output is not None:
            raise DataFailure("-o: --pack writes rows, to --ids, --labels and "
                              "--positions, not one token stream")
        if not args.pack:
            given += [o for o, v in (("--seq", args.seq), ("--ids", args.ids),
                                     ("--labels", args.labels))
                      if v is not None]
            if args.output is None:
                raise DataFailure("-o: the token stream's .npy is required "
                                  "(or --pack for rows)")
        elif args.seq is None:
            raise DataFailure("--pack needs --seq T, the tokens of a row")
    if given and not args.pack:
        raise DataFailure("%s: only --pack reads %s" % (
            ", ".join(given), "it" if len(given) == 1 else "them"))
    for option, name, default in PACK_OPTIONS:
        if getattr(args, name) is None:
            setattr(args, name, default)
    args.ids = args.ids or "ids.npy"
    args.labels = args.labels or "labels.npy"
    inputs = [("an input", path) for path in args.inputs]
    if rows:
        outputs = [("--ids", args.ids), ("--labels", args.labels)]
        if args.pack:
            outputs.append(("--positions", args.positions))
    else:
        outputs = [("-o", args.output)]
    problem = output_conflict(outputs, inputs, ".npy") or (
        args.doc_lengths and output_conflict(
            [("--doc-lengths", args.doc_lengths)],
            inputs + [("the output of " + o, p) for o, p in outputs]))
    if problem:
        raise DataFailure(problem)
    if not rows:
        return
    if args.seq < 1:
        raise DataFailure("--seq %d: the rows need at least one token" %
                          args.seq)
    if args.pack_window < 1:
        raise DataFailure("--pack-window %d: first-fit decreasing needs at "
                          "least one document a window" % args.pack_window)
    if args.tokens_per_step is not None and (
            args.tokens_per_step < args.seq or
            args.tokens_per_step % args.seq):
        raise DataFailure("--tokens-per-step %d: a global batch is whole "
                          "rows, a positive multiple of --seq %d" % (
                              args.tokens_per_step, args.seq))
    arrays = 3 if args.pack else 2
    problem = too_big("--seq %d: the %s (int64) of one row" % (
        args.seq, "ids, labels and positions" if args.pack else
        "ids and labels"), arrays * 8 * args.seq)
    if problem:
        raise DataFailure(problem)


def save(path, array):
    """The .npy file at exactly `path` (np.save of a name adds .npy to a
    name without it; check_args saw that it has it)."""
    import numpy as np
    with open(path, "wb") as f:
        np.save(f, array)


def pad_token(tok):
    """The pad token, else eos, else 0."""
    return next((t for t in (tok.pad_token_id, tok.eos_token_id)
                 if t is not None), 0)


def write_packed(args, docs, pad, read, truncated=0, dropped=0):
    """Packs `docs`, [(ids, labels, where)], into rows of --seq tokens and
    writes --ids, --labels, --positions (and --doc-lengths)."""
    T = args.seq
    try:
        pieces = split_pieces(docs, T, args.no_split)
    except PackFailure as e:
        raise DataFailure(str(e))
    split = len(pieces) - len(docs)
    # A piece whose labels past its first (which packing ignores) are all
    # -100 (an sft prompt cut from its response) adds nothing to the loss.
    kept = [p for p in pieces if any(l != IGNORE for l in p[1][1:])]
    dropped += len(pieces) - len(kept)
    if not kept:
        raise DataFailure("all %d documents dropped: none has a label to "
                          "learn within --seq %d" % (len(pieces), T))
    step_rows = args.tokens_per_step // T if args.tokens_per_step else None
    kept, rows, filler = plan_rows(kept, T, args.seed, args.pack_window,
                                   step_rows)
    problem = too_big("--seq %d: the ids, labels and positions [%d, %d] "
                      "(int64)" % (T, len(rows), T), 3 * 8 * len(rows) * T)
    if problem:
        raise DataFailure(problem)
    ids, labels, positions, stats = layout(kept, rows, filler, T, pad)
    save(args.ids, ids)
    save(args.labels, labels)
    save(args.positions, positions)
    if args.doc_lengths:
        with open(args.doc_lengths, "w") as f:
            json.dump(doc_lengths_json(stats, T), f)
            f.write("\n")
    N = stats["rows"]
    steps = ""
    if step_rows:
        steps = "; %d steps of %d rows (--tokens-per-step %d)%s" % (
            N // step_rows, step_rows, args.tokens_per_step,
            ", the last completed by %d empty rows" % stats["filler_rows"]
            if stats["filler_rows"] else "")
    print("zero-data: %s, %s, %s: %d documents packed in %d rows [%d, %d], "
          "%d tokens (%d labelled), fill %.1f%% (one document a row: "
          "%.1f%%), %d split, %d truncated, %d dropped; padding %d%s" % (
              args.ids, args.labels, args.positions, read, N, N, T,
              stats["tokens"], int((labels != IGNORE).sum()),
              100 * stats["fill"], 100 * stats["padded_fill"], split,
              truncated, dropped, pad, steps))


def make_sft(args, tok):
    import numpy as np
    T = args.seq
    pad = pad_token(tok)
    rows, truncated, dropped, samples = [], 0, 0, 0
    for path in args.inputs:
        if not path.endswith(".jsonl"):
            raise DataFailure("%s: sft reads .jsonl files" % path)
        for n, row in read_rows(path):
            where = "%s:%d" % (path, n)
            samples += 1
            if args.messages_field in row:
                prompt, response = chat_sample(
                    tok, row[args.messages_field], where, args.messages_field)
            else:
                prompt, response = pair_sample(
                    tok, field(row, args.prompt_field, where),
                    field(row, args.response_field, where))
            ids = prompt + response
            labels = [IGNORE] * len(prompt) + response
            # Packing cuts a longer sample into pieces unless --truncate.
            if len(ids) > T and (args.truncate or not args.pack):
                if not args.truncate:
                    raise DataFailure(
                        "%s: the sample has %d tokens, more than --seq %d "
                        "(--truncate cuts it)" % (where, len(ids), T))
                ids, labels = ids[:T], labels[:T]
                truncated += 1
            # A row with no label to learn adds nothing to the loss.
            if all(l == IGNORE for l in labels):
                dropped += 1
                continue
            rows.append((ids, labels, where))
    if not samples:
        raise DataFailure("no samples in %s" % ", ".join(args.inputs))
    if args.pack:
        return write_packed(args, rows, pad, samples, truncated, dropped)
    if not rows:
        raise DataFailure("all %d samples dropped: none has a response token "
                          "within --seq %d" % (samples, T))
    problem = too_big("--seq %d: the ids and labels [%d, %d] (int64)" % (
        T, len(rows), T), 2 * 8 * len(rows) * T)
    if problem:
        raise DataFailure(problem)
    ids = np.full((len(rows), T), pad, dtype=np.int64)
    labels = np.full((len(rows), T), IGNORE, dtype=np.int64)
    for i, (r, l, _) in enumerate(rows):
        ids[i, :len(r)] = r
        labels[i, :len(l)] = l
    save(args.ids, ids)
    save(args.labels, labels)
    tokens = sum(len(r) for r, _, _ in rows)
    print("zero-data: %s, %s: %d samples, %d rows [%d, %d], %d tokens "
          "(%d labelled), %d truncated, %d dropped; padding %d" % (
              args.ids, args.labels, samples, len(rows), len(rows), T,
              tokens, int((labels != IGNORE).sum()), truncated, dropped,
              pad))


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        check_args(args)
        tok = load_tokenizer(args.tokenizer)
        (make_tokens if args.mode == "tokens" else make_sft)(args, tok)
    except DataFailure as e:
        print("zero-data: error: %s" % e, file=sys.stderr)
        return 1
    except UnicodeDecodeError as e:
        print("zero-data: error: input is not UTF-8: %s" % e, file=sys.stderr)
        return 1
    except OSError as e:
        print("zero-data: error: %s: %s" % (e.filename, e.strerror),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
