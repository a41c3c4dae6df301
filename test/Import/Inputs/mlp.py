"""An MLP classifier written as ordinary PyTorch code."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Classifier(nn.Module):
    def __init__(self, features, hidden, classes):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(features, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.GELU(),
            nn.Linear(hidden, classes, bias=False))

    def forward(self, x, y):
        return F.cross_entropy(self.net(x), y)


def make():
    torch.manual_seed(0)
    model = Classifier(32, 64, 8)
    x = torch.randn(16, 32)
    y = torch.randint(0, 8, (16,))
    return model, (x, y)
