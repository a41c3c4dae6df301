"""A step whose forward takes token ids, a completion mask and per-token
advantages (the arguments of a policy-gradient step; the loss here is a
cross-entropy the importer takes): the step's inputs are named after them."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Policy(nn.Module):
    def __init__(self, vocab, hidden):
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, input_ids, completion_mask, advantages):
        h = self.emb(input_ids) * (completion_mask * advantages).unsqueeze(-1)
        logits = self.head(h)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]),
                               input_ids.view(-1))


def make():
    torch.manual_seed(0)
    ids = torch.randint(0, 16, (4, 8))
    return Policy(16, 8), (ids, torch.ones(4, 8), torch.randn(4, 8))
