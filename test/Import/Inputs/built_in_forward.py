"""An MLP whose activation, softmax, RMS norm (without a weight) and loss
are modules built inside forward() (as transformers' CodeGen attention,
RoBERTa's head and the decoders of its encoder-decoders write them), with
a squared ReLU, an RMS norm without a weight written as Gemma 4 writes it
and a LayerNorm without a bias written out as Cohere's."""

import torch
import torch.nn as nn


class BuiltInForward(nn.Module):
    def __init__(self, features, hidden, classes):
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.gate = nn.Linear(features, hidden)
        self.norm = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.head = nn.Linear(hidden, classes, bias=False)

    def forward(self, x, y):
        h = torch.square(nn.ReLU()(self.fc1(x)))
        h = h * torch.pow(h.pow(2).mean(-1, keepdim=True) + 1e-6, -0.5)
        h = h * nn.Softmax(dim=-1)(self.gate(x))
        h = nn.RMSNorm(h.shape[-1], eps=1e-5, elementwise_affine=False)(h)
        mean = h.mean(-1, keepdim=True)
        var = (h - mean).pow(2).mean(-1, keepdim=True)
        h = self.norm * ((h - mean) * torch.rsqrt(var + 1e-5))
        return nn.CrossEntropyLoss()(self.head(h), y)


def make():
    torch.manual_seed(0)
    model = BuiltInForward(32, 48, 8)
    return model, (torch.randn(16, 32), torch.randint(0, 8, (16,)))
