"""Token-budget batches on two ranks: what per-rank micro-batching would
run, and what packed whole steps run.

  budget_check.py DOCS.jsonl TOKENIZER BUDGET ids.npy ROWS_PER_RANK_STEP RANKS

The documents (their tokens as zero-data encodes them) split between the
ranks in their order, as a sampler that shards the dataset hands them out,
each rank filling micro-batches of at most BUDGET tokens on its own (the
dynamic batch size of verl's use_dynamic_bsz and prime-rl): the micro-batch
count each rank would run in one step over its share, which differs
between ranks whose documents differ in length, so that their gradient
reductions would not pair up and the collectives would hang. Then the
packed rows that zero-data --pack --tokens-per-step wrote: every step is
whole rows, every rank reads the same ROWS_PER_RANK_STEP of each, so every
rank runs the same micro steps.
"""

import json
import sys

import numpy as np
from transformers import AutoTokenizer


def micro_batches(lengths, budget):
    """First-fit micro-batches of at most `budget` tokens (a longer
    document alone), in order."""
    count, used = 0, budget
    for n in lengths:
        if used + n > budget:
            count, used = count + 1, 0
        used += n
    return count


def main():
    docs, tok_dir, budget, ids, per_rank, ranks = sys.argv[1:7]
    budget, per_rank, ranks = int(budget), int(per_rank), int(ranks)
    tok = AutoTokenizer.from_pretrained(tok_dir)
    lengths = [len(tok(json.loads(l)["text"])["input_ids"]) + 1
               for l in open(docs) if l.strip()]
    share = len(lengths) // ranks
    counts = [micro_batches(lengths[r * share:(r + 1) * share], budget)
              for r in range(ranks)]
    shortest = [min(lengths[r * share:(r + 1) * share]) for r in range(ranks)]
    longest = [max(lengths[r * share:(r + 1) * share]) for r in range(ranks)]
    print("per-rank budget of %d tokens: documents of %s tokens, "
          "micro-batches %s: %s" % (
              budget, ", ".join("%d-%d" % (a, b)
                                for a, b in zip(shortest, longest)),
              " vs ".join(str(c) for c in counts),
              "the ranks' collectives would not pair up (a hang)"
              if len(set(counts)) > 1 else "equal"))
    rows = np.load(ids).shape[0]
    step = per_rank * ranks
    assert rows % step == 0, (rows, step)
    print("packed whole steps: %d rows, %d steps of %d rows, every rank %d "
          "rows (micro steps) a step" % (rows, rows // step, step, per_rank))


if __name__ == "__main__":
    main()
