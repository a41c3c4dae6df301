"""An MLP through PyTorch's exp, log, softplus, logsumexp and amax, in the
spellings the importer maps: F.softplus and nn.Softplus (PyTorch's defaults,
and beta 2 with threshold 5), torch.log and Tensor.log of softplus + 1,
torch.exp and Tensor.exp, torch.logsumexp over the last dimension (keepdim
or not) and torch.amax and Tensor.amax over it (dim -1 and dim 2)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ExpLogMLP(nn.Module):
    def __init__(self, features, hidden, classes, parts):
        super().__init__()
        self.classes, self.parts = classes, parts
        self.fc1 = nn.Linear(features, hidden)
        self.act = nn.Softplus(beta=2.0, threshold=5.0)
        self.fc2 = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, classes * parts, bias=False)

    def forward(self, x, y):
        h = torch.log(F.softplus(self.fc1(x)) + 1.0)
        h = self.act(self.fc2(h)).log() * torch.exp(-h) + h.exp() * 0.25
        z = self.head(h).view(x.shape[0], self.classes, self.parts)
        logits = (torch.logsumexp(z, dim=-1) +
                  torch.logsumexp(z, 2, keepdim=True).squeeze(-1) * 0.5 +
                  torch.amax(z, dim=-1) +
                  z.amax(2, keepdim=True).squeeze(2))
        return F.cross_entropy(logits, y)


def make():
    torch.manual_seed(0)
    model = ExpLogMLP(32, 64, 8, 4)
    return model, (torch.randn(16, 32), torch.randint(0, 8, (16,)))


class Refused(nn.Module):
    """One call the importer refuses, naming its argument."""

    def __init__(self, fn):
        super().__init__()
        self.fc = nn.Linear(8, 6)
        self.fn = fn

    def forward(self, x, y):
        return F.cross_entropy(self.fn(self.fc(x).view(4, 2, 3)), y)


def _refused(fn):
    torch.manual_seed(0)
    return Refused(fn), (torch.randn(4, 8), torch.randint(0, 2, (4,)))


def make_logsumexp_dim1():
    return _refused(lambda z: torch.logsumexp(z, 1))


def make_amax_all():
    return _refused(lambda z: torch.amax(z).expand(4, 2))


def make_softplus_beta():
    return _refused(lambda z: F.softplus(z, beta=-1.0).sum(-1))
