"""An MLP whose activations are PyTorch's tanh in its three spellings."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class TanhMLP(nn.Module):
    def __init__(self, features, hidden, classes):
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.act = nn.Tanh()
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, classes, bias=False)

    def forward(self, x, y):
        h = self.act(self.fc1(x))
        h = torch.tanh(self.fc2(h))
        h = self.fc3(h).tanh()
        return F.cross_entropy(self.head(h), y)


def make():
    torch.manual_seed(0)
    model = TanhMLP(32, 64, 8)
    return model, (torch.randn(16, 32), torch.randint(0, 8, (16,)))
