"""Models with one construct the importer cannot map exactly each; every
make_* function returns one (unsupported.test checks the messages)."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    """fc -> body(h) -> head -> cross-entropy; body is the construct."""

    def __init__(self, body, width=8, extra=None):
        super().__init__()
        self.fc = nn.Linear(8, width)
        self.block = Block(body, extra)
        self.head = nn.Linear(width, 4)

    def forward(self, x, y):
        return F.cross_entropy(self.head(self.block(self.fc(x))), y)


class Block(nn.Module):
    def __init__(self, body, extra):
        super().__init__()
        self.body = body
        if extra is not None:
            self.extra = extra

    def forward(self, h):
        return self.body(self, h)


def _make(body, **kw):
    torch.manual_seed(0)
    return Net(body, **kw), (torch.randn(4, 8), torch.randint(0, 4, (4,)))


def make_conv():
    def body(self, h):
        return self.extra(h[:, None, :])[:, 0, :]
    return _make(body, extra=nn.Conv1d(1, 1, 3, padding=1))


def make_cumsum():
    def body(self, h):
        return torch.cumsum(h, dim=-1)
    return _make(body)


def make_strided_slice():
    """The odd and even features outside an interleaved rotary
    embedding."""
    def body(self, h):
        return torch.cat([h[..., 1::2], h[..., ::2]], dim=-1)
    return _make(body)


def make_strided_slice_3():
    def body(self, h):
        return h[:, ::3].repeat(1, 3)[:, :8]
    return _make(body)


def make_dropout():
    return _make(lambda self, h: self.extra(h), extra=nn.Dropout(0.1))


def make_dropout_eval():
    model, args = make_dropout()
    return model.eval(), args


def make_value_branch():
    def body(self, h):
        if h.sum() > 0:
            return h
        return -h
    return _make(body)


def make_index_and_repeat():
    """h.view(4, 2, 4)[:, 1, :] (a slice of one, its axis dropped) tiled
    twice by repeat: these import."""
    return _make(lambda self, h: h.view(4, 2, 4)[:, 1, :].repeat(1, 2))


def make_sum_last():
    """h.view(4, 2, 4).sum(-1), tiled back to 8 features: a sum over the
    last dimension imports."""
    return _make(lambda self, h: h.view(4, 2, 4).sum(-1).repeat(1, 4))


def make_sum_dim0():
    return _make(lambda self, h: h.sum(0, keepdim=True).expand(4, 8))


def make_gather_index():
    """h[:, [0, 2, ...]]: a list of indices that are not consecutive (a
    gather, not a slice)."""
    return _make(lambda self, h: h[:, [0, 2, 4, 6, 1, 3, 5, 7]])


def make_advanced_index():
    """A list and an integer index together: advanced indexing."""
    return _make(lambda self, h: h.view(4, 2, 4)[:, [1], 0].repeat(1, 8))


def make_floor_division():
    """A quotient rounded down (a / b of two tensors is a * reciprocal(b),
    grpo.test)."""
    return _make(lambda self, h: torch.div(h, h * h + 1,
                                           rounding_mode="floor"))


def make_module_in_forward():
    """A layer built inside forward(): its parameters are new on every
    call (a module without parameters, nn.Softmax(dim=-1)(h), is traced
    through)."""
    def body(self, h):
        return nn.Linear(8, 8)(h)
    return _make(body)


def make_softmax_dim0():
    return _make(lambda self, h: F.softmax(h, dim=0))


def make_label_smoothing():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 4)

        def forward(self, x, y):
            return F.cross_entropy(self.fc(x), y, label_smoothing=0.1)
    torch.manual_seed(0)
    return M(), (torch.randn(4, 8), torch.randint(0, 4, (4,)))


class Tokens(nn.Module):
    """emb -> body(ids, h) -> fc -> cross-entropy of token ids."""

    def __init__(self, body, emb=None):
        super().__init__()
        self.body = body
        self.emb = emb if emb is not None else nn.Embedding(16, 8)
        self.pos = nn.Embedding(8, 8)
        self.fc = nn.Linear(8, 16)

    def forward(self, ids, y):
        h = self.body(self, ids, self.emb(ids))
        return F.cross_entropy(self.fc(h).view(-1, 16), y.view(-1))


def _tokens(body, **kw):
    torch.manual_seed(0)
    ids = torch.randint(0, 16, (2, 4))
    return Tokens(body, **kw), (ids, ids)


def make_max_norm():
    """nn.Embedding(max_norm=...) renormalizes the rows it looks up."""
    return _tokens(lambda self, ids, h: h, emb=nn.Embedding(16, 8,
                                                            max_norm=1.0))


def make_scale_grad_by_freq():
    return _tokens(lambda self, ids, h: h,
                   emb=nn.Embedding(16, 8, scale_grad_by_freq=True))


def make_positions_reversed():
    """Position ids T-1..0: not consecutive ascending rows of the table."""
    def body(self, ids, h):
        return h + self.pos(torch.arange(ids.shape[1] - 1, -1, -1))
    return _tokens(body)


def make_positions_per_row():
    """Position ids [B, T] whose rows start at different offsets: a [B, T, C]
    lookup, not rows that nn.add broadcasts."""
    def body(self, ids, h):
        b, t = ids.shape
        return h + self.pos(torch.arange(t) + torch.arange(b)[:, None])
    return _tokens(body)


def make_pow4():
    return _make(lambda self, h: h ** 4)


def make_cube_alone():
    """x ** 3 outside GELU's tanh approximation."""
    return _make(lambda self, h: torch.pow(h, 3.0))


def make_gelu_wrong_constant():
    """gelu_new with 0.04 in place of 0.044715: not nn.gelu."""
    def body(self, h):
        return 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (
            h + 0.04 * torch.pow(h, 3.0))))
    return _make(body)


class CausalLMLoss(nn.Module):
    """transformers' ForCausalLMLoss: the labels shifted inside the model."""

    def __init__(self, fill=-100, ignore_index=-100, flatten=False):
        super().__init__()
        self.emb = nn.Embedding(16, 8)
        self.fc = nn.Linear(8, 16)
        self.fill, self.ignore_index = fill, ignore_index
        self.flatten = flatten

    def forward(self, ids, labels):
        logits = self.fc(self.emb(ids)).float()
        if self.flatten:
            labels = labels.view(-1)
        labels = F.pad(labels, (0, 1), value=self.fill)
        shift_labels = labels[..., 1:].contiguous()
        return F.cross_entropy(logits.view(-1, 16), shift_labels.view(-1),
                               ignore_index=self.ignore_index)


def make_causal_lm_loss():
    torch.manual_seed(0)
    ids = torch.randint(0, 16, (2, 4))
    return CausalLMLoss(), (ids, ids)


def make_shift_fill_not_ignored():
    torch.manual_seed(0)
    ids = torch.randint(0, 16, (2, 4))
    return CausalLMLoss(fill=0), (ids, ids)


def make_shift_flattened():
    """The shift of the flattened labels: each row's last label would be the
    next row's first token."""
    torch.manual_seed(0)
    ids = torch.randint(0, 16, (2, 4))
    return CausalLMLoss(flatten=True), (ids, ids)


def make_pad_features():
    return _make(lambda self, h: F.pad(h, (0, 1))[:, 1:])


def make_label_slice():
    """labels[:, 1:] without the pad: a computed label tensor."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(16, 8)
            self.fc = nn.Linear(8, 16)

        def forward(self, ids, y):
            logits = self.fc(self.emb(ids))[:, :-1]
            return F.cross_entropy(logits.reshape(-1, 16),
                                   y[:, 1:].reshape(-1))
    torch.manual_seed(0)
    ids = torch.randint(0, 16, (2, 4))
    return M(), (ids, ids)


def make_float64():
    torch.manual_seed(0)
    m, args = _make(lambda self, h: h)
    return m.double(), (args[0].double(), args[1])


def make_non_causal_mask():
    """A masked softmax whose mask hides the past instead of the future."""
    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(16, 8)
            self.qkv = nn.Linear(8, 24)
            self.out = nn.Linear(8, 16)
            self.register_buffer("bias", torch.ones(4, 4).triu())

        def forward(self, ids, y):
            q, k, v = self.qkv(self.emb(ids)).split(8, dim=-1)
            q, k, v = (t.view(2, 4, 2, 4).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * 0.5
            att = att.masked_fill(self.bias == 0, float("-inf"))
            o = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(2, 4, 8)
            return F.cross_entropy(self.out(o).view(-1, 16), y.view(-1))
    torch.manual_seed(0)
    ids = torch.randint(0, 16, (2, 4))
    return Attn(), (ids, ids)


def make_weak_mask():
    """A causal mask that adds -100 above the diagonal: its exp does not
    underflow to 0, so the softmax is not the causal one."""
    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(16, 8)
            self.qkv = nn.Linear(8, 24)
            self.out = nn.Linear(8, 16)
            self.register_buffer("mask", torch.ones(4, 4).triu(1) * -100.0)

        def forward(self, ids, y):
            q, k, v = self.qkv(self.emb(ids)).split(8, dim=-1)
            q, k, v = (t.view(2, 4, 2, 4).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * 0.5 + self.mask
            o = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(2, 4, 8)
            return F.cross_entropy(self.out(o).view(-1, 16), y.view(-1))
    torch.manual_seed(0)
    ids = torch.randint(0, 16, (2, 4))
    return Attn(), (ids, ids)


def make_shifted_rope():
    """rotate_half's rotary embedding at positions 1.. instead of 0.."""
    class Rope(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(16, 8)
            self.out = nn.Linear(8, 16)

        def forward(self, ids, y):
            x = self.emb(ids).view(2, 1, 4, 8)
            inv = 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8))
            pos = torch.arange(1, 5).float()
            emb = torch.cat([torch.outer(pos, inv)] * 2, dim=-1)
            x1, x2 = x[..., :4], x[..., 4:]
            x = x * emb.cos() + torch.cat((-x2, x1), dim=-1) * emb.sin()
            return F.cross_entropy(self.out(x.view(2, 4, 8)).view(-1, 16),
                                   y.view(-1))
    torch.manual_seed(0)
    ids = torch.randint(0, 16, (2, 4))
    return Rope(), (ids, ids)


def make_int_math():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(16, 16)

        def forward(self, ids, y):
            return F.cross_entropy(self.emb(ids + 1).view(-1, 16), y.view(-1))
    torch.manual_seed(0)
    ids = torch.randint(0, 15, (2, 4))
    return M(), (ids, ids)


def make_logits_only():
    """forward() returns the logits, not a loss."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 4)

        def forward(self, x):
            return self.fc(x)
    return M(), (torch.randn(4, 8),)


def make_not_a_pair():
    return nn.Linear(2, 2)


def make_no_grad():
    """A layer run only under torch.no_grad(): PyTorch would not train it
    (a value computed there is detached, as grpo.test's)."""
    def body(self, h):
        with torch.no_grad():
            return self.extra(h)
    return _make(body, extra=nn.Linear(8, 8))


def make_frozen():
    """A frozen parameter: a zero.param that does not train, as PyTorch
    would not train it."""
    model, args = _make(lambda self, h: h)
    model.fc.bias.requires_grad_(False)
    return model, args


def make_all_frozen():
    """Nothing trains."""
    model, args = _make(lambda self, h: h)
    model.requires_grad_(False)
    return model, args


def make_dict_output():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 4)

        def forward(self, x, y):
            return {"loss": F.cross_entropy(self.fc(x), y)}
    return M(), (torch.randn(4, 8), torch.randint(0, 4, (4,)))


def make_in_place_alias():
    """h += x while r, the same tensor, is read afterwards."""
    def body(self, h):
        r = h
        h += 1.0
        return h * r
    return _make(body)
