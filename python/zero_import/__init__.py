"""zero-import: a PyTorch nn.Module as a zero-mlir training step.

`zero-import model.py:make -o model.mlir` calls `make()`, which returns
`(module, example_args)`, traces `module(*example_args)` with torch.fx
(the example arguments fix every shape), lowers the trace onto the `nn`
dialect, recognises the multi-op patterns the dialect has one op for (RMS
norm, rotary embedding, causal attention, SwiGLU), and writes one
`zero.param` per parameter and one `zero.train_step` ending in the loss,
with the module's weights as safetensors for `--init-from`.

`zero-import --hf DIR --batch B --seq T -o model.mlir` does the same for a
Hugging Face causal language model in a directory (hf.py): transformers'
own class for its config.json, its safetensors (one file or shards), else
its seeded from_config initialisation, or (`--no-weights`) no weights at
all; the step is the model's own loss, traced.

Anything it cannot map exactly is an error naming the torch operation, the
module path and the user's source line.
"""

from .errors import ImportFailure  # noqa: F401

__all__ = ["ImportFailure"]
