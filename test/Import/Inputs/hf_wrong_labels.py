"""Imports a Hugging Face directory with a step whose loss scores the
logits against the input ids instead of the labels (as a model that
ignored transformers' shift_labels would): zero-import must refuse it.

  hf_wrong_labels.py DIR
"""

import sys

from zero_import import hf
from zero_import.errors import ImportFailure
from zero_import.importer import import_hf


def wrong_step(model, input_ids, labels):
    return model(input_ids=input_ids, labels=labels,
                 shift_labels=input_ids).loss


def main():
    hf.step = wrong_step
    try:
        import_hf(sys.argv[1], 2, 16)
    except ImportFailure as e:
        print("zero-import: error: " + e.render())
        return
    print("FAIL: imported")
    sys.exit(1)


if __name__ == "__main__":
    main()
