"""The building blocks of GPT-2 and Gemma as transformers and minGPT write
them, in one small token model: a position table longer than the sequence
(minGPT's block_size > T) looked up with position ids [1, T]; GPT-2's
Conv1D (torch.addmm of the bias, the flattened input and a [in, out]
weight); gelu_new written with tanh and pow(x, 3.0); a token embedding with
padding_idx, scaled by sqrt(hidden) as Gemma scales it; Gemma's RMS norm
x * rsqrt(mean(x ** 2) + eps) * (1 + w) in fp32; GeGLU
(F.gelu(approximate="tanh")(gate) * up); a split into unequal parts."""

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

# transformers' Conv1D and gelu_new as the GPT-2 interchange test writes
# them.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "E2E", "Inputs"))
from hf_gpt2 import Conv1D, gelu_new  # noqa: E402

VOCAB, HIDDEN, FFN, BLOCK = 256, 32, 64, 40
# A frequent byte of the training text (the space), so that the padding
# row is looked up and its missing gradient shows in the losses.
PADDING = 32


class NewGELU(nn.Module):
    def forward(self, input):
        return gelu_new(input)


class GemmaRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


class Blocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, HIDDEN, padding_idx=PADDING)
        self.wpe = nn.Embedding(BLOCK, HIDDEN)
        self.register_buffer("normalizer", torch.tensor(HIDDEN ** 0.5),
                             persistent=False)
        self.norm = GemmaRMSNorm(HIDDEN)
        self.c_fc = Conv1D(FFN, HIDDEN)
        self.act = NewGELU()
        self.c_proj = Conv1D(HIDDEN, FFN)
        self.gate_proj = nn.Linear(HIDDEN, FFN, bias=False)
        self.up_proj = nn.Linear(HIDDEN, FFN, bias=False)
        self.down_proj = nn.Linear(FFN, HIDDEN, bias=False)
        self.final_norm = GemmaRMSNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, ids, labels):
        t = ids.size(1)
        pos = torch.arange(0, t, dtype=torch.long,
                           device=ids.device).unsqueeze(0)
        h = self.wte(ids) * self.normalizer.to(self.wte.weight.dtype)
        h = h + self.wpe(pos)
        h = h + self.c_proj(self.act(self.c_fc(self.norm(h))))
        x = self.norm(h)
        gate = F.gelu(self.gate_proj(x), approximate="tanh")
        h = h + self.down_proj(gate * self.up_proj(x))
        a, b = h.split([12, HIDDEN - 12], dim=-1)
        h = torch.cat([b, a], dim=-1)
        logits = self.head(self.final_norm(h))
        return F.cross_entropy(logits.view(-1, VOCAB), labels.view(-1))


def make():
    torch.manual_seed(0)
    model = Blocks()
    # Weights well away from an initializer's, so that every block (and
    # the padding row's frozen gradient) moves the losses.
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.2)
    ids = torch.randint(0, VOCAB, (4, 16))
    return model, (ids, ids)
