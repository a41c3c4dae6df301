"""Tensors made by Tensor.new_empty and filled by copy_ into slices, as
MiniCPM3's and DeepSeek's attention builds its keys: make_filled covers
its buffer (a concatenation), each other make_* leaves it uninitialized in
part or writes it otherwise (hf-mla.test checks the messages)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    """fc -> fill(h) [4, 12] -> head -> cross-entropy."""

    def __init__(self, fill):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.block = Block(fill)
        self.head = nn.Linear(12, 4)

    def forward(self, x, y):
        return F.cross_entropy(self.head(self.block(self.fc(x))), y)


class Block(nn.Module):
    def __init__(self, fill):
        super().__init__()
        self.fill = fill

    def forward(self, h):
        return self.fill(h)


def _make(fill):
    torch.manual_seed(0)
    return Net(fill), (torch.randn(4, 8), torch.randint(0, 4, (4,)))


def make_filled():
    """h, then its first feature broadcast over 4 (copy_ expands it)."""
    def fill(h):
        buf = h.new_empty(4, 12)
        buf[:, :8].copy_(h)
        buf[..., 8:].copy_(h[:, :1])
        return buf
    return _make(fill)


def make_partly_filled():
    def fill(h):
        buf = h.new_empty(4, 12)
        buf[:, :8].copy_(h)
        return buf
    return _make(fill)


def make_overlapping():
    def fill(h):
        buf = h.new_empty(4, 12)
        buf[:, :8].copy_(h)
        buf[:, 4:].copy_(h)
        return buf
    return _make(fill)


def make_read_between():
    def fill(h):
        buf = torch.empty_like(h[:, :1].expand(4, 12))
        buf[:, :8].copy_(h)
        twice = buf * 2
        buf[:, 8:].copy_(h[:, :4])
        return twice
    return _make(fill)


def make_strided():
    def fill(h):
        buf = h.new_empty(4, 16)
        buf[:, ::2].copy_(h)
        buf[:, 1::2].copy_(h)
        return buf[:, :12]
    return _make(fill)
