"""Activation modules of transformers that the importer keeps whole.

transformers' `XIELUActivation` (Apertus's xIELU) compares its input with
zero and selects between two branches, which tracing cannot follow as
`nn` ops, so it is traced as one call (a leaf module) and becomes
`nn.xielu` of its effective coefficients (lower.py's rule). transformers
is optional here: the module is recognised by its class's name and module.
"""


def is_xielu(m):
    """Whether m is transformers' XIELUActivation."""
    cls = type(m)
    return (cls.__name__ == "XIELUActivation"
            and cls.__module__ == "transformers.activations")


def is_leaf(m):
    """Whether tracing keeps module m as one call."""
    return is_xielu(m)
