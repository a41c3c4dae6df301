"""Loads a directory that --export-hf or zero-ckpt consolidate --hf wrote
with transformers' own AutoModelForCausalLM.from_pretrained, and compares
its weights with a reference state dict (torch_train.py --save-state).

  hf_export_check.py OUT REFERENCE.pt [--rms 1e-5] [--loose REGEX RMS]...

Fails on any missing, unexpected or mismatched key from_pretrained reports,
on a tied weight that is not one tensor after loading, and on a tensor whose
root mean square difference from the reference exceeds --rms (fp32 Adam
amplifies rounding where a gradient is near zero, so single elements may
differ more). --loose gives the tensors whose names match REGEX a bound of
their own: one whose gradient is zero in exact arithmetic is moved by
rounding noise alone, which Adam scales to steps of the learning rate's
size, so two correct implementations differ there by up to lr per step.
"""

import re

import argparse
import sys

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("reference")
    p.add_argument("--rms", type=float, default=1e-5)
    p.add_argument("--loose", nargs=2, action="append", default=[],
                   metavar=("REGEX", "RMS"))
    args = p.parse_args()
    from transformers import AutoModelForCausalLM
    model, info = AutoModelForCausalLM.from_pretrained(
        args.out, output_loading_info=True)
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        if info.get(kind):
            sys.exit("from_pretrained(%s): %s %s" % (args.out, kind,
                                                      sorted(info[kind])))
    if model.config.tie_word_embeddings and \
            model.get_output_embeddings().weight is not \
            model.get_input_embeddings().weight:
        sys.exit("from_pretrained(%s): the tied head is not the embedding"
                 % args.out)
    ref = torch.load(args.reference)
    got = model.state_dict()
    if sorted(got) != sorted(ref):
        sys.exit("state dict keys differ: %s" % sorted(set(got) ^ set(ref)))
    worst, name = 0.0, None
    for k in ref:
        rms = float((got[k].double() - ref[k].double()).pow(2).mean().sqrt())
        if rms > worst:
            worst, name = rms, k
        bound = next((float(b) for r, b in args.loose if re.search(r, k)),
                     args.rms)
        if rms > bound:
            sys.exit("%s: RMS difference %.3g from PyTorch's > %g" % (
                k, rms, bound))
    print("from_pretrained: %d tensors (%s), each within %g RMS of "
          "PyTorch's%s" % (len(ref), model.config.dtype, args.rms, "".join(
              " (%s: %s)" % (r, b) for r, b in args.loose)))
    print("worst RMS difference %.2g (%s)" % (worst, name))


if __name__ == "__main__":
    main()
