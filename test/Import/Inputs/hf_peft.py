"""The tiny Llama of hf_models.py (`llama`) for fine-tuning: with its
embedding and every norm frozen, or as PEFT's LoRA model of it, and LoRA
models that zero-import refuses. Each make_* returns (module, (ids,
labels)); a PeftModel itself is traced as its loss with labels=.

  hf_peft.py save DIR    (the base model, save_pretrained, for --hf)
"""

import sys

import torch
import transformers
from peft import LoraConfig, get_peft_model

sys.path.insert(0, __file__.rpartition("/")[0])
import hf_models  # noqa: E402
from hf_classes import Labels  # noqa: E402

transformers.logging.set_verbosity_error()


def llama():
    torch.manual_seed(0)
    config = hf_models.config("llama")
    config.use_cache = False
    return transformers.LlamaForCausalLM(config)


def _args():
    ids = torch.zeros(8, 32, dtype=torch.long)
    return ids, ids.clone()


def freeze(model):
    """requires_grad=False on the embedding and every norm."""
    for name, p in model.named_parameters():
        if "embed_tokens" in name or "norm" in name:
            p.requires_grad_(False)
    return model


def make_frozen():
    return Labels(freeze(llama())), _args()


def make_unfrozen():
    return Labels(llama()), _args()


def lora(**kwargs):
    settings = dict(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                    task_type="CAUSAL_LM")
    settings.update(kwargs)
    model = llama()
    torch.manual_seed(1)
    return get_peft_model(model, LoraConfig(**settings))


def make_lora():
    return lora(), _args()


def make_lora_wrapped():
    return Labels(lora()), _args()


def make_lora_rslora():
    return lora(use_rslora=True, r=3), _args()


def make_lora_dropout():
    return lora(lora_dropout=0.05), _args()


def make_lora_dora():
    return lora(use_dora=True), _args()


def make_lora_bias():
    return lora(bias="lora_only"), _args()


def make_lora_modules_to_save():
    return lora(modules_to_save=["lm_head"]), _args()


def make_lora_embedding():
    return lora(target_modules=["embed_tokens"]), _args()


def make_lora_two_adapters():
    pm = lora()
    pm.add_adapter("second", LoraConfig(r=2, target_modules=["q_proj"]))
    return pm, _args()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "save":
        sys.exit(__doc__)
    llama().save_pretrained(sys.argv[2])
