"""GPT-2 and Gemma from transformers' own classes (GPT2LMHeadModel,
GemmaForCausalLM), tiny configs, default settings except dropout (0: the
step has no dropout) and use_cache=False (no KV cache is traced).

make_gpt2 and make_gemma return the model under a wrapper that takes the
cross entropy of its logits against labels the data source has already
shifted; make_*_labels return it called with labels=, so that the loss is
transformers' own (ForCausalLMLoss, which shifts the labels itself)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import transformers
from transformers import (GemmaConfig, GemmaForCausalLM, GPT2Config,
                          GPT2LMHeadModel)

transformers.logging.set_verbosity_error()


class Logits(nn.Module):
    """model(input_ids=ids).logits against labels shifted by the data."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, labels):
        logits = self.model(input_ids=ids).logits
        return F.cross_entropy(logits.view(-1, logits.shape[-1]),
                               labels.view(-1))


class Labels(nn.Module):
    """model(input_ids=ids, labels=labels).loss."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, labels):
        return self.model(input_ids=ids, labels=labels).loss


def _perturbed(model, norm_offset):
    """Weights well away from the initializer's, so that every block moves
    the losses: normal with std 0.2, norm weights around norm_offset."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(0.0, 0.2)
            if "ln_" in name or "norm" in name:
                p.add_(norm_offset)
    return model


def gpt2():
    torch.manual_seed(0)
    # A position table longer than the sequence (48 rows, T = 32).
    config = GPT2Config(vocab_size=256, n_positions=48, n_embd=64, n_layer=2,
                        n_head=4, embd_pdrop=0.0, resid_pdrop=0.0,
                        attn_pdrop=0.0, use_cache=False)
    return _perturbed(GPT2LMHeadModel(config), 1.0)


def gemma():
    torch.manual_seed(0)
    # head_dim 24 with 4 heads of a 64-wide model (Gemma's head_dim is not
    # hidden / heads); pad_token_id 32 (a frequent byte of the training
    # text) as the embedding's padding_idx; tied embeddings (the default).
    config = GemmaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=4, head_dim=24,
                         max_position_embeddings=64, pad_token_id=32,
                         use_cache=False)
    return _perturbed(GemmaForCausalLM(config), 0.0)


def _example():
    return (torch.randint(0, 256, (8, 32)),) * 2


def make_gpt2():
    return Logits(gpt2()), _example()


def make_gemma():
    return Logits(gemma()), _example()


def make_gpt2_labels():
    return Labels(gpt2()), _example()


def make_gemma_labels():
    return Labels(gemma()), _example()
