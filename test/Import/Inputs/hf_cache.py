"""make() files written the obvious way: the tiny Llama of hf_models.py
with transformers' defaults, use_cache=True among them, its loss
`model(input_ids=ids, labels=labels).loss`; as it is, as PEFT's LoRA model
of it (the PeftModel itself) and with its embedding frozen. transformers
builds a KV cache (DynamicCache) in such a forward unless told not to;
zero-import traces none. make_use_cache and make_past_key_values ask for
one explicitly, which is refused."""

import sys

import torch
import torch.nn as nn
import transformers
from peft import LoraConfig, get_peft_model

sys.path.insert(0, __file__.rpartition("/")[0])
import hf_models  # noqa: E402

transformers.logging.set_verbosity_error()


class Loss(nn.Module):
    """model(input_ids=ids, labels=labels, **kwargs).loss."""

    def __init__(self, model, **kwargs):
        super().__init__()
        self.model = model
        self.kwargs = kwargs

    def forward(self, ids, labels):
        return self.model(input_ids=ids, labels=labels, **self.kwargs).loss


def llama():
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(hf_models.config("llama"))
    assert model.config.use_cache
    return model


def _args():
    ids = torch.zeros(8, 32, dtype=torch.long)
    return ids, ids.clone()


def make_llama():
    return Loss(llama()), _args()


def make_lora():
    model = llama()
    torch.manual_seed(1)
    return get_peft_model(model, LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
        task_type="CAUSAL_LM")), _args()


def make_frozen():
    model = llama()
    model.get_input_embeddings().weight.requires_grad_(False)
    return Loss(model), _args()


def make_use_cache():
    return Loss(llama(), use_cache=True), _args()


def make_past_key_values():
    return Loss(llama(), past_key_values=transformers.DynamicCache()), _args()
