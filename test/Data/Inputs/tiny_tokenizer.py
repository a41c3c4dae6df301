"""A tiny Hugging Face tokenizer written by the test itself, and the
reference tokenisation zero-data's output is compared with.

  tiny_tokenizer.py save DIR [--no-pad] [--big]
  tiny_tokenizer.py check-sft DIR FILE.jsonl T ids.npy labels.npy
  tiny_tokenizer.py check-tokens DIR FILE... tokens.npy
  tiny_tokenizer.py check-pack DIR FILE.jsonl T ids.npy labels.npy positions.npy
  tiny_tokenizer.py check-sft-pack DIR FILE.jsonl T ids.npy labels.npy positions.npy
"""

import json
import sys

import numpy as np
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import AutoTokenizer, PreTrainedTokenizerFast

WORDS = ("the a cat dog sat on mat what did say hello hi how are you fine "
         "thanks user assistant system : yes no").split()
CHAT = ("{{ bos_token }}{% for m in messages %}<{{ m['role'] }}> "
        "{{ m['content'] }} <end> {% endfor %}"
        "{% if add_generation_prompt %}<assistant> {% endif %}")


def save(out, pad=True, big=False):
    special = ["<unk>", "<s>", "</s>", "<pad>", "<user>", "<assistant>",
               "<system>", "<end>"]
    words = WORDS + ["w%d" % i for i in range(70000 if big else 0)]
    vocab = {w: i for i, w in enumerate(special + words)}
    t = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    # The tokenizer adds BOS to a text, as Llama's does.
    t.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", 1)])
    f = PreTrainedTokenizerFast(
        tokenizer_object=t, bos_token="<s>", eos_token="</s>",
        unk_token="<unk>", pad_token="<pad>" if pad else None,
        additional_special_tokens=special[4:])
    f.chat_template = CHAT
    f.save_pretrained(out)


def sft_samples(tok, path):
    """Each sample of a .jsonl file as (ids, labels), the prompt's labels
    -100, whole."""
    samples = []
    for line in open(path):
        row = json.loads(line)
        if "messages" in row:
            m = row["messages"]
            p = tok(tok.apply_chat_template(m[:-1], tokenize=False,
                                            add_generation_prompt=True),
                    add_special_tokens=False)["input_ids"]
            full = tok(tok.apply_chat_template(m, tokenize=False),
                       add_special_tokens=False)["input_ids"]
            r = full[len(p):]
        else:
            p = tok(row["prompt"])["input_ids"]
            r = tok(row["response"], add_special_tokens=False)["input_ids"] \
                + [tok.eos_token_id]
        samples.append((p + r, [-100] * len(p) + r))
    return samples


def sft_reference(tok, path, T):
    ids, labels = [], []
    pad = tok.pad_token_id if tok.pad_token_id is not None else \
        tok.eos_token_id
    for i, l in sft_samples(tok, path):
        i, l = i[:T], l[:T]
        ids.append(i + [pad] * (T - len(i)))
        labels.append(l + [-100] * (T - len(l)))
    return np.array(ids, np.int64), np.array(labels, np.int64)


def documents(tok, path):
    """Each document of a .jsonl file's "text" as zero-data tokens encodes
    it: the tokenizer's ids (its BOS), then eos."""
    return [tok(json.loads(l)["text"])["input_ids"] + [tok.eos_token_id]
            for l in open(path) if l.strip()]


def check_pack(tok, path, T, ids, labels, positions):
    """Packed rows hold each piece of at most T tokens of each document once,
    laid out as DataCollatorWithFlattening lays out the row's documents, and
    transformers finds the same documents in the positions."""
    pieces = [d[b:b + T] for d in documents(tok, path)
              for b in range(0, len(d), T)]
    check_rows([(d, d) for d in pieces], T, tok.pad_token_id, ids, labels,
               positions)
    print("pack: %d rows laid out as DataCollatorWithFlattening lays out "
          "their documents; %d pieces of %d documents, each once" % (
              len(ids), len(pieces), len(documents(tok, path))))


def check_sft_pack(tok, path, T, ids, labels, positions):
    """Packed samples (each at most T tokens here): every sample once, its
    prompt's labels -100, laid out as DataCollatorWithFlattening lays out
    the row's samples."""
    samples = sft_samples(tok, path)
    assert all(len(i) <= T for i, _ in samples)
    check_rows(samples, T, tok.pad_token_id, ids, labels, positions)
    print("sft pack: %d rows laid out as DataCollatorWithFlattening lays out "
          "their samples; %d samples, each once, %d prompt tokens -100" % (
              len(ids), len(samples),
              sum(l.count(-100) for _, l in samples)))


def check_rows(want, T, pad, ids, labels, positions):
    """The rows hold each of `want`, [(ids, labels)], once."""
    import torch
    from transformers import DataCollatorWithFlattening
    from transformers.masking_utils import find_packed_sequence_indices
    assert ids.shape == labels.shape == positions.shape
    assert ids.dtype == labels.dtype == positions.dtype == np.int64
    collate = DataCollatorWithFlattening(return_position_ids=True,
                                         return_tensors="np")
    labels_of = {tuple(i): l for i, l in want}
    got = []
    for r in range(len(ids)):
        starts = [0] + [i for i in range(1, T)
                        if positions[r, i] != positions[r, i - 1] + 1]
        bounds = list(zip(starts, starts[1:] + [T]))
        docs = [ids[r, b:e].tolist() for b, e in bounds]
        # The padding after the last document: pad ids, no label.
        if docs and all(t == pad for t in docs[-1]) and \
                (labels[r, bounds[-1][0]:] == -100).all():
            docs, bounds = docs[:-1], bounds[:-1]
        end = bounds[-1][1] if bounds else 0
        if docs:
            ref = collate([{"input_ids": d, "labels": labels_of[tuple(d)]}
                           for d in docs])
            assert np.array_equal(ref["input_ids"][0], ids[r, :end])
            assert np.array_equal(ref["labels"][0], labels[r, :end]), (
                ref["labels"][0], labels[r, :end])
            assert np.array_equal(ref["position_ids"][0], positions[r, :end])
        seq = find_packed_sequence_indices(torch.from_numpy(positions[r:r + 1]))
        assert seq is not None or len(bounds) <= 1
        if seq is not None:
            assert int(seq[0, -1]) + 1 == len(bounds) + (end < T)
        got += [tuple(d) for d in docs]
    assert sorted(got) == sorted(tuple(i) for i, _ in want), (sorted(got),
                                                              want)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "save":
        save(args[0], "--no-pad" not in args, "--big" in args)
        return
    tok = AutoTokenizer.from_pretrained(args[0])
    if cmd == "check-sft":
        ids, labels = sft_reference(tok, args[1], int(args[2]))
        got_ids, got_labels = np.load(args[3]), np.load(args[4])
        assert got_ids.dtype == np.int64 and got_labels.dtype == np.int64
        assert np.array_equal(got_ids, ids), (got_ids, ids)
        assert np.array_equal(got_labels, labels), (got_labels, labels)
        print("sft: %d rows equal transformers' tokenisation, %d prompt "
              "tokens -100" % (len(ids), int(((labels == -100) &
                                             (ids != tok.pad_token_id)).sum())))
    elif cmd in ("check-pack", "check-sft-pack"):
        check = check_pack if cmd == "check-pack" else check_sft_pack
        check(tok, args[1], int(args[2]), *(np.load(a) for a in args[3:6]))
    elif cmd == "check-tokens":
        want = []
        for path in args[1:-1]:
            docs = [json.loads(l)["text"] for l in open(path)] \
                if path.endswith(".jsonl") else [open(path).read()]
            for d in docs:
                want += tok(d)["input_ids"] + [tok.eos_token_id]
        got = np.load(args[-1])
        assert np.array_equal(got, np.array(want)), (got, want)
        print("tokens: %d equal transformers' tokenisation, %s" % (
            len(got), got.dtype))


if __name__ == "__main__":
    main()
