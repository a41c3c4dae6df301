"""Imports a Hugging Face directory with a step whose loss does not score
the logits against the labels shifted inside the model, as `labels=` does:
zero-import must refuse it.

  hf_wrong_labels.py DIR unshifted   the labels as given (shift_labels=)
  hf_wrong_labels.py DIR ids         the input ids, shifted (labels=ids)
"""

import sys

from zero_import import hf
from zero_import.errors import ImportFailure
from zero_import.importer import import_hf

STEPS = {
    "unshifted": lambda model, input_ids, labels: model(
        input_ids=input_ids, labels=labels, shift_labels=labels).loss,
    "ids": lambda model, input_ids, labels: model(
        input_ids=input_ids, labels=input_ids).loss,
}


def main():
    hf.step = STEPS[sys.argv[2]]
    try:
        import_hf(sys.argv[1], 2, 16)
    except ImportFailure as e:
        print("zero-import: error: " + e.render())
        return
    print("FAIL: imported")
    sys.exit(1)


if __name__ == "__main__":
    main()
