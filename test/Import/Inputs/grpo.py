"""A GRPO loss as TRL's GRPOTrainer computes it (num_iterations 1, so the old
log-probabilities are the detached current ones; beta > 0) over a tiny
"policy": an embedding and a linear head on the completion ids. forward
takes the completion ids and, as float step inputs, the completion mask,
the advantages and the reference model's per-token log-probabilities.

make() is the step zero-import imports; the variants (make_where,
make_no_grad) spell the same loss with torch.where and torch.maximum (as
DAPO's and Dr. GRPO's code paths do) and with the old log-probabilities
computed under torch.no_grad(); the refused ones name what the importer
does not take."""

import torch
import torch.nn as nn

VOCAB, DIM, B, T = 16, 8, 4, 6
EPS, BETA = 0.2, 0.04


def selective_log_softmax(logits, ids):
    """TRL's: the ids' log-probabilities, logit minus logsumexp."""
    picked = torch.gather(logits, dim=-1, index=ids.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


class GRPOPolicy(nn.Module):
    def __init__(self, variant="trl"):
        super().__init__()
        self.variant = variant
        self.emb = nn.Embedding(VOCAB, DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, ids, mask, adv, ref_logps):
        logits = self.head(torch.tanh(self.emb(ids)))
        logps = selective_log_softmax(logits, ids)
        if self.variant == "no_grad":
            with torch.no_grad():
                old = logps * 1.0
        else:
            old = logps.detach()
        ratio = torch.exp(logps - old)
        clipped = torch.clamp(ratio, 1 - EPS, 1 + EPS)
        if self.variant == "where":
            # -min(a, b) as max(-a, -b), the clip as where's choice.
            a, b = -ratio * adv[:, None], -clipped * adv[:, None]
            per_token = torch.maximum(a, b)
            per_token = torch.where(mask.bool(), per_token, 0.0)
        else:
            per_token = -torch.min(ratio * adv[:, None],
                                   clipped * adv[:, None])
        kl = torch.exp(ref_logps - logps) - (ref_logps - logps) - 1
        per_token = per_token + BETA * kl
        return (per_token * mask).sum() / mask.sum().clamp(min=1.0)


def batch(seed=0):
    """One step's inputs: ids, a 0/1 mask, advantages, reference logps."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (B, T), generator=g)
    mask = (torch.rand(B, T, generator=g) > 0.3).float()
    adv = torch.randn(B, generator=g)
    ref = torch.randn(B, T, generator=g) * 0.3 - 2.5
    return ids, mask, adv, ref


def _make(variant):
    torch.manual_seed(0)
    return GRPOPolicy(variant), batch()


def make():
    return _make("trl")


def make_where():
    return _make("where")


def make_no_grad():
    return _make("no_grad")


class Refused(GRPOPolicy):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, ids, mask, adv, ref_logps):
        return self.fn(self.head(self.emb(ids)), ids, mask)


def _refused(fn):
    torch.manual_seed(0)
    return Refused(fn), batch()


def make_take_flat():
    return _refused(lambda z, ids, m: torch.take_along_dim(z, ids).sum())


def make_clamp_tensor():
    return _refused(lambda z, ids, m: torch.clamp(z, min=m[..., None]).sum())
