"""A classifier exercising the tensor plumbing the importer maps one for one:
chunk/split, cat, permute, transpose, view/reshape, contiguous, + - * /
with scalars and broadcasting, -= on a tensor read nowhere after, unary
minus, F.gelu (tanh), F.silu, ReLU,
softmax, dropout with p = 0, a parameter broadcast over the batch;
make_slices, slices cut with nn.split."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Mixer(nn.Module):
    def __init__(self, features=32, hidden=24, classes=8):
        super().__init__()
        self.inp = nn.Linear(features, 2 * hidden)
        self.gain = nn.Parameter(torch.randn(hidden))
        self.mid = nn.Linear(2 * hidden, 2 * hidden, bias=False)
        self.out = nn.Linear(2 * hidden, classes)
        self.drop = nn.Dropout(0.0)
        self.hidden = hidden

    def forward(self, x, y):
        B = x.shape[0]
        a, b = self.inp(x).chunk(2, dim=-1)
        h = torch.cat([a - b, a * self.gain / 2.0], dim=-1) + 1.0
        h = h.view(B, 2, self.hidden).permute(0, 2, 1).contiguous()
        h = h.reshape(B, 2 * self.hidden)
        h = F.gelu(self.mid(h), approximate="tanh") - 0.25
        p, q = torch.split(h, self.hidden, dim=1)
        h = torch.cat((F.silu(p), -F.relu(q)), 1)
        h = h * F.softmax(h, dim=-1) * 4.0 + h
        h -= 0.125
        h = self.drop(h).view(B, 2, self.hidden).transpose(1, 2)
        h = torch.reshape(h, (B, -1))
        return F.cross_entropy(self.out(h), y)


def make():
    torch.manual_seed(0)
    model = Mixer()
    return model, (torch.randn(16, 32), torch.randint(0, 8, (16,)))


class Slices(nn.Module):
    """Slices the importer cuts with nn.split: two that overlap (each the
    nn.concat of its parts), a part no slice reads (its gradient zero), and
    a slice along a middle axis."""

    def __init__(self, features=32, classes=8):
        super().__init__()
        self.inp = nn.Linear(features, 48)
        self.out = nn.Linear(24, classes)

    def forward(self, x, y):
        B = x.shape[0]
        h = self.inp(x)
        a, b = h[:, :16], h[:, 8:32]
        g = torch.cat([a * 2.0, b], dim=-1)
        t = g.view(B, 5, 8)[:, 1:4]
        return F.cross_entropy(self.out(t.reshape(B, 24)), y)


def make_slices():
    torch.manual_seed(0)
    return Slices(), (torch.randn(16, 32), torch.randint(0, 8, (16,)))
