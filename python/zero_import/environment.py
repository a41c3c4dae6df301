"""The PyTorch zero-import runs on, checked before anything is imported."""

import re
import sys

from .errors import ImportFailure

# scaled_dot_product_attention(enable_gqa=...) (transformers' grouped-query
# attention) and torch.nn.RMSNorm arrived in 2.5 and 2.4. The tested
# release is the one scripts/requirements.txt pins.
MIN_TORCH = (2, 5)


def check_torch():
    """The torch module, or an ImportFailure saying which Python lacks it."""
    try:
        import torch
    except ImportError as e:
        raise ImportFailure(
            "the Python at %s cannot import PyTorch (%s): install torch>=%d.%d "
            "there, or set ZERO_IMPORT_PYTHON to a Python that has it"
            % (sys.executable, e, *MIN_TORCH))
    m = re.match(r"(\d+)\.(\d+)", torch.__version__)
    if not m or (int(m.group(1)), int(m.group(2))) < MIN_TORCH:
        raise ImportFailure(
            "PyTorch %s (the Python at %s) is older than %d.%d, the oldest "
            "zero-import reads: upgrade it, or set ZERO_IMPORT_PYTHON to a "
            "Python with a newer one" % (torch.__version__, sys.executable,
                                         *MIN_TORCH))
    return torch
