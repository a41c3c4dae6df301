"""The policy of the GRPO example: a tiny Qwen3ForCausalLM (transformers' own
class, built from a config) whose forward is TRL's GRPOTrainer loss.

`zero-import policy.py:make -o policy.mlir` imports the step. Its parameters
keep the Hugging Face names (model.layers.0.self_attn.q_proj.weight, ...,
lm_head.weight), so that what engine.named_parameters() streams loads into
a plain Qwen3ForCausalLM for generate.

The forward takes what TRL's _compute_loss reads: the prompt+completion
ids [B, P + C], the completion ids [B, C] (again: the step takes integer
inputs as they are, so it cannot slice them out), the completion mask
[B, C], the group-normalised advantages [B], the old per-token
log-probabilities [B, C] (with num_iterations > 1: computed once per
generation batch, before its first step) and the reference model's [B, C]
(with beta > 0). The make_* functions are the variants: beta 0 or > 0,
num_iterations 1 or more (the step's inputs tell the loop which), loss
types dapo and grpo.
"""

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

# The characters of the prompts file, after the special tokens.
SPECIAL = ["<pad>", "<eos>"]
CHARS = "abcdefghijklmn"
VOCAB = SPECIAL + list(CHARS)
PAD, EOS = 0, 1
TARGET = VOCAB.index("a")  # the reward counts it in the completion

PROMPT_LEN, COMPLETION_LEN = 4, 8  # P and C: every prompt is P characters
PROMPTS_PER_BATCH, GROUP = 4, 4  # G completions of each prompt
ROWS = PROMPTS_PER_BATCH * GROUP

EPSILON = 0.2  # TRL's epsilon (epsilon_low = epsilon_high)
BETA = 0.04
TEMPERATURE = 1.0


def config():
    return Qwen3Config(vocab_size=len(VOCAB), hidden_size=32,
                       intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2,
                       head_dim=8, max_position_embeddings=64,
                       pad_token_id=PAD, eos_token_id=EOS, bos_token_id=None,
                       use_cache=False)


def selective_log_softmax(logits, ids):
    """TRL's: the ids' log-probabilities, logit minus logsumexp."""
    picked = torch.gather(logits, dim=-1, index=ids.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def per_token_logps(model, input_ids, completion_ids):
    """TRL's _get_per_token_logps: the completion's tokens (the last C of
    input_ids) scored by the logits one position before them
    (logits_to_keep = C + 1, the last dropped), divided by the sampling
    temperature."""
    hidden = model.model(input_ids=input_ids).last_hidden_state
    logits = model.lm_head(hidden[:, PROMPT_LEN - 1:-1, :]) / TEMPERATURE
    return selective_log_softmax(logits, completion_ids)


def grpo_loss(logps, mask, advantages, old_logps, ref_logps, beta,
              loss_type):
    """TRL's GRPOTrainer._compute_loss (importance sampling per token,
    epsilon_low = epsilon_high = EPSILON)."""
    if old_logps is None:
        old_logps = logps.detach()
    coef_1 = torch.exp(logps - old_logps)
    coef_2 = torch.clamp(coef_1, 1 - EPSILON, 1 + EPSILON)
    per_token_loss1 = coef_1 * advantages.unsqueeze(1)
    per_token_loss2 = coef_2 * advantages.unsqueeze(1)
    per_token_loss = -torch.min(per_token_loss1, per_token_loss2)
    if beta != 0.0:
        # The k3 estimator of KL(policy || reference).
        per_token_kl = torch.exp(ref_logps - logps) - (ref_logps - logps) - 1
        per_token_loss = per_token_loss + beta * per_token_kl
    if loss_type == "grpo":
        # Each sequence's mean over its tokens, then the mean over them.
        return ((per_token_loss * mask).sum(-1) /
                mask.sum(-1).clamp(min=1.0)).mean()
    if loss_type == "dapo":
        # The batch's tokens' mean. TRL divides by num_items_in_batch, the
        # global batch's count; the compiled step makes the mask's sum the
        # global batch's on any number of ranks (zero-token-mean). On one
        # rank this is TRL's bnpo too, which divides by each process's.
        return (per_token_loss * mask).sum() / mask.sum().clamp(min=1.0)
    raise ValueError("unknown loss type %r" % loss_type)


class Policy(Qwen3ForCausalLM):
    """Qwen3ForCausalLM whose forward is the GRPO loss; the class
    attributes say which (the subclasses below fix the forward's
    inputs)."""
    grpo_beta = BETA
    grpo_loss_type = "dapo"

    def loss(self, input_ids, completion_ids, completion_mask, advantages,
             old=None, ref=None):
        return grpo_loss(per_token_logps(self, input_ids, completion_ids),
                         completion_mask, advantages, old, ref,
                         self.grpo_beta, self.grpo_loss_type)


class PolicyOldRef(Policy):
    """beta > 0, num_iterations > 1."""

    def forward(self, input_ids, completion_ids, completion_mask, advantages,
                old_per_token_logps, ref_per_token_logps):
        return self.loss(input_ids, completion_ids, completion_mask,
                         advantages, old_per_token_logps, ref_per_token_logps)


class PolicyRef(Policy):
    """beta > 0, num_iterations 1: the old log-probabilities are the
    current ones, detached."""

    def forward(self, input_ids, completion_ids, completion_mask, advantages,
                ref_per_token_logps):
        return self.loss(input_ids, completion_ids, completion_mask,
                         advantages, ref=ref_per_token_logps)


class PolicyOld(Policy):
    """beta 0, num_iterations > 1."""
    grpo_beta = 0.0

    def forward(self, input_ids, completion_ids, completion_mask, advantages,
                old_per_token_logps):
        return self.loss(input_ids, completion_ids, completion_mask,
                         advantages, old_per_token_logps)


class PolicyPlain(Policy):
    """beta 0, num_iterations 1."""
    grpo_beta = 0.0

    def forward(self, input_ids, completion_ids, completion_mask, advantages):
        return self.loss(input_ids, completion_ids, completion_mask,
                         advantages)


def build(cls=Policy, seed=0):
    """A policy of class `cls` with the example's initial weights."""
    torch.manual_seed(seed)
    model = cls(config())
    model.train()
    return model


def example_inputs(cls):
    """Inputs of the shapes the step takes (their values only trace it)."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, len(VOCAB), (ROWS, PROMPT_LEN + COMPLETION_LEN),
                        generator=g)
    mask = torch.ones(ROWS, COMPLETION_LEN)
    adv = torch.randn(ROWS, generator=g)
    logps = torch.full((ROWS, COMPLETION_LEN), -2.5)
    code = cls.forward.__code__
    names = code.co_varnames[1:code.co_argcount]
    values = {"input_ids": ids, "completion_ids": ids[:, PROMPT_LEN:],
              "completion_mask": mask, "advantages": adv,
              "old_per_token_logps": logps, "ref_per_token_logps": logps}
    return tuple(values[n] for n in names)


def _make(cls, loss_type=None):
    if loss_type is not None:
        cls = type(cls.__name__ + "_" + loss_type, (cls,),
                   {"grpo_loss_type": loss_type})
    model = build(cls)
    return model, example_inputs(cls)


def make():
    """beta > 0 (BETA), num_iterations > 1, loss type dapo."""
    return _make(PolicyOldRef)


def make_grpo():
    """As make, loss type grpo."""
    return _make(PolicyOldRef, "grpo")


def make_beta0():
    """beta 0, num_iterations > 1."""
    return _make(PolicyOld)


def make_one_iteration():
    """beta > 0, num_iterations 1."""
    return _make(PolicyRef)


def make_plain():
    """beta 0, num_iterations 1."""
    return _make(PolicyPlain)
