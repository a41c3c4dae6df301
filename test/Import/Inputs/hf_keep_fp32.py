"""A tiny transformers Llama that keeps modules in float32 under 16-bit
training, as some Hugging Face models do: its RMSNorms (`norm` finds
input_layernorm, post_attention_layernorm and model.norm) in bf16 and f16
(`_keep_in_fp32_modules_strict`), and lm_head in f16 only
(`_keep_in_fp32_modules`). make() returns it under a wrapper taking the
cross entropy of its float32 logits against labels the data source has
already shifted."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

transformers.logging.set_verbosity_error()


class KeptLlama(LlamaForCausalLM):
    _keep_in_fp32_modules_strict = ["norm"]
    _keep_in_fp32_modules = ["lm_head"]


class Logits(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, labels):
        logits = self.model(input_ids=ids).logits.float()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]),
                               labels.view(-1))


def model():
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=172,
                         num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=64,
                         use_cache=False)
    m = KeptLlama(config)
    # Weights away from the initializer's (norms around 1), so that every
    # module moves the losses.
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.normal_(0.0, 0.2)
            if "norm" in name:
                p.add_(1.0)
    return m


def make():
    return Logits(model()), (torch.randint(0, 256, (8, 32)),) * 2
