"""A Llama written as Hugging Face's modeling_llama writes it: RMS norms
(LlamaRMSNorm with its float cast, and the two other usual ways of writing
one), rotary embeddings from an inv_freq buffer with rotate_half and
apply_rotary_pos_emb, grouped-query attention with repeat_kv and an added
causal mask, the SiLU-gated MLP, linears without bias, an untied head."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(
            variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class PlainRMSNorm(nn.Module):
    """weight * x * rsqrt(mean(x^2) + eps), as many repositories write it."""

    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(
            x.pow(2).mean(-1, keepdim=True) + self.eps)


class NormThenScale(nn.Module):
    """x * rsqrt(mean(x * x) + eps) * weight."""

    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) \
            * self.weight


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim, base):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(
            0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(
            position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @
                 position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype=x.dtype), emb.sin().to(dtype=x.dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


# repeat_interleave(n, dim=1) in place of repeat_kv (make_interleave).
INTERLEAVE = False


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(
        batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen,
                                 head_dim)


class LlamaAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.head_dim = c["hidden"] // c["heads"]
        self.num_key_value_groups = c["heads"] // c["kv_heads"]
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(c["hidden"], c["heads"] * self.head_dim,
                                bias=False)
        self.k_proj = nn.Linear(c["hidden"], c["kv_heads"] * self.head_dim,
                                bias=False)
        self.v_proj = nn.Linear(c["hidden"], c["kv_heads"] * self.head_dim,
                                bias=False)
        self.o_proj = nn.Linear(c["heads"] * self.head_dim, c["hidden"],
                                bias=False)

    def forward(self, hidden_states, position_embeddings, attention_mask):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(
            hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(
            hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(
            hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(
            query_states, key_states, cos, sin)
        if INTERLEAVE:
            key_states = key_states.repeat_interleave(
                self.num_key_value_groups, dim=1)
            value_states = torch.repeat_interleave(
                value_states, self.num_key_value_groups, dim=1)
        else:
            key_states = repeat_kv(key_states, self.num_key_value_groups)
            value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) \
            * self.scaling
        attn_weights = attn_weights + attention_mask
        attn_weights = F.softmax(attn_weights, dim=-1,
                                 dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        return self.o_proj(attn_output)


class LlamaMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c["hidden"], c["ffn"], bias=False)
        self.up_proj = nn.Linear(c["hidden"], c["ffn"], bias=False)
        self.down_proj = nn.Linear(c["ffn"], c["hidden"], bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = LlamaAttention(c)
        self.mlp = LlamaMLP(c)
        self.input_layernorm = LlamaRMSNorm(c["hidden"], eps=c["eps"])
        self.post_attention_layernorm = PlainRMSNorm(c["hidden"], c["eps"])

    def forward(self, hidden_states, position_embeddings, attention_mask):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states, position_embeddings,
                                       attention_mask)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        return residual + hidden_states


class LlamaModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab"], c["hidden"])
        self.layers = nn.ModuleList(
            [LlamaDecoderLayer(c) for _ in range(c["layers"])])
        self.norm = NormThenScale(c["hidden"], c["eps"])
        self.rotary_emb = LlamaRotaryEmbedding(c["hidden"] // c["heads"],
                                               c["theta"])

    def forward(self, input_ids):
        inputs_embeds = self.embed_tokens(input_ids)
        seq = input_ids.shape[1]
        position_ids = torch.arange(seq, device=input_ids.device).unsqueeze(0)
        mask = torch.full((seq, seq), torch.finfo(inputs_embeds.dtype).min,
                          device=input_ids.device).triu(1)[None, None]
        hidden_states = inputs_embeds
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for layer in self.layers:
            hidden_states = layer(hidden_states, position_embeddings, mask)
        return self.norm(hidden_states)


class LlamaForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.model = LlamaModel(c)
        self.lm_head = nn.Linear(c["hidden"], c["vocab"], bias=False)

    def forward(self, input_ids, labels):
        logits = self.lm_head(self.model(input_ids))
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]),
                               labels.view(-1))
        return logits, loss


def make(kv_heads=2):
    torch.manual_seed(0)
    c = dict(layers=2, hidden=64, heads=4, kv_heads=kv_heads, ffn=172,
             vocab=256, eps=1e-5, theta=10000.0)
    model = LlamaForCausalLM(c)
    # Weights well away from an initializer's, so that RoPE, the grouping,
    # the norms and the mask move the loss.
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(0.0, 0.2)
            if "norm" in name:
                p.add_(1.0)
    ids = torch.randint(0, c["vocab"], (8, 32))
    return model, (ids, ids)


def make_mqa():
    return make(kv_heads=1)


def make_torch_rmsnorm():
    """The same Llama with torch.nn.RMSNorm (PyTorch 2.4 and later) for each
    norm."""
    model, args = make()
    with torch.no_grad():
        for layer in model.model.layers:
            for name in ("input_layernorm", "post_attention_layernorm"):
                old = getattr(layer, name)
                new = nn.RMSNorm(old.weight.shape[0], eps=1e-5)
                new.weight.copy_(old.weight)
                setattr(layer, name, new)
    return model, args


def make_interleave():
    """Key/value heads repeated with repeat_interleave instead."""
    global INTERLEAVE
    INTERLEAVE = True
    return make()
