"""Checks that transformers masks packed rows by documents, the reference
of `zero-import --hf DIR --packed`: the loss of
model(input_ids, position_ids=pos, labels=labels, use_cache=False) on rows
of several documents (positions from 0 at each; one row begins inside a
document, at position 3) against each document run alone, its loss times
its scored tokens summed over the documents and divided by their tokens.
Each document's first label is -100 (as DataCollatorWithFlattening
writes it), so that no token is scored against the next document's
first. Also the logits of every document's tokens, packed and alone, and
the same rows with an attention mask of ones (transformers then finds no
documents), which must differ: a check that cannot fail proves nothing.

  packed_check.py DIR [--rows N] [--seq T] [--seed S] [--attn sdpa|eager]

Prints one line; exits 1 when the packed loss is not within 1e-5
(relative) of the documents' or the unmasked loss is.
"""

import argparse
import os
import sys

import torch


def documents(rows, seq, gen):
    """[(row, start, length, first position)] of packed rows: random
    lengths from 1 to seq, the second row beginning inside a document."""
    docs = []
    for r in range(rows):
        at, first = 0, 3 if r == 1 else 0
        while at < seq:
            n = min(int(torch.randint(1, seq // 2 + 2, (1,),
                                      generator=gen)), seq - at)
            docs.append((r, at, n, first))
            at, first = at + n, 0
    return docs


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--rows", type=int, default=4)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--attn", choices=("sdpa", "eager"))
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers as tf
    kwargs = {"dtype": torch.float32}
    if args.attn:
        kwargs["attn_implementation"] = args.attn
    model = tf.AutoModelForCausalLM.from_pretrained(args.dir, **kwargs)
    model.eval()
    gen = torch.Generator().manual_seed(args.seed)
    vocab = model.config.get_text_config().vocab_size
    ids = torch.randint(0, vocab, (args.rows, args.seq), generator=gen)
    pos = torch.zeros_like(ids)
    labels = ids.clone()
    docs = documents(args.rows, args.seq, gen)
    for r, at, n, first in docs:
        pos[r, at:at + n] = torch.arange(first, first + n)
        labels[r, at] = -100
    with torch.no_grad():
        out = model(input_ids=ids, position_ids=pos, labels=labels,
                    use_cache=False)
        unmasked = model(input_ids=ids, position_ids=pos, labels=labels,
                         attention_mask=torch.ones_like(ids),
                         use_cache=False).loss
        total, tokens, logits_diff = 0.0, 0, 0.0
        for r, at, n, first in docs:
            alone = model(input_ids=ids[r:r + 1, at:at + n],
                          position_ids=pos[r:r + 1, at:at + n],
                          labels=labels[r:r + 1, at:at + n], use_cache=False)
            logits_diff = max(logits_diff, float(
                (alone.logits[0] - out.logits[r, at:at + n]).abs().max()))
            if n > 1:
                total += float(alone.loss) * (n - 1)
                tokens += n - 1
    separate = total / tokens
    packed = float(out.loss)
    rel = abs(packed - separate) / abs(separate)
    rel_unmasked = abs(float(unmasked) - separate) / abs(separate)
    ok = rel <= 1e-5 and rel_unmasked > 1e-5
    print("packed_check: %s: %d rows x %d tokens, %d documents: packed loss "
          "%.7f, documents alone %.7f (relative difference %.1e), logits "
          "max abs difference %.1e; without the documents (attention mask "
          "of ones) %.7f (relative difference %.1e): %s" % (
              os.path.basename(os.path.normpath(args.dir)), args.rows,
              args.seq, len(docs), packed, separate, rel, logits_diff,
              float(unmasked), rel_unmasked,
              "masked by documents" if ok else "NOT masked by documents"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
