"""Tiny Hugging Face models in directories, as users have them: built by
transformers' own classes with default settings and written by
save_pretrained (safetensors), or their config.json alone: Llama, Mistral,
Qwen2, Qwen3, GPT-2, Gemma, with partial rotary embeddings GPT-NeoX, StableLM
and Phi, with interleaved ones GPT-J and GLM, with sliding windows and
soft-capping Mistral and Gemma 2, with ALiBi MPT and BLOOM, with masks
that are causal in effect openai-gpt and CodeGen, the mixtures of experts
Mixtral, Qwen3-MoE, OLMoE, Qwen2-MoE (a shared expert), Granite-MoE and
DeepSeek-V3 (Mixtral, Qwen2-MoE and Granite-MoE also with the
load-balancing loss; to be refused, DeepSeek-V3's nonzero correction
bias, Llama 4's block, Mixtral's router jitter and encoder-decoder
ones), DeepSeek-V3 with dense layers only (its multi-head latent
attention), Gemma 4 with layer_scalar buffers other than 1,
BigBird as a decoder (its pooler unused).

  hf_models.py save KIND DIR [--shard-size N] [--config-only] [--tokenizer]
  hf_models.py big-config DIR      (Llama-3-70B's published numbers)
  hf_models.py break DIR HOW       (a copy made unreadable for a test)
  hf_models.py batches IDS LABELS --rows N --seq T
                                   (token ids and labels with -100, .npy)
"""

import argparse
import json
import os
import sys

import torch


def config(kind):
    import transformers as tf
    small = dict(vocab_size=256, hidden_size=64, intermediate_size=172,
                 num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=128)
    if kind == "llama":
        return tf.LlamaConfig(**small)
    if kind == "llama_mqa":
        return tf.LlamaConfig(**dict(small, num_key_value_heads=1))
    if kind == "llama_tied":
        return tf.LlamaConfig(**small, tie_word_embeddings=True)
    if kind == "mistral":
        return tf.MistralConfig(**small)
    if kind == "qwen2":
        return tf.Qwen2Config(**small)
    if kind == "qwen3":
        # Its RMS norms of each query and key head (q_norm, k_norm).
        return tf.Qwen3Config(**small, head_dim=16)
    if kind == "mixtral":
        return tf.MixtralConfig(**small, num_local_experts=4,
                                num_experts_per_tok=2)
    if kind == "mixtral_aux":
        # The load-balancing loss added to the step's (output_router_logits
        # in config.json), with a coefficient that shows in the loss.
        return tf.MixtralConfig(**small, num_local_experts=4,
                                num_experts_per_tok=2,
                                output_router_logits=True,
                                router_aux_loss_coef=0.05)
    if kind == "mixtral_jitter":
        # Multiplicative noise on the router's input in training: random.
        return tf.MixtralConfig(**small, num_local_experts=4,
                                num_experts_per_tok=2,
                                router_jitter_noise=0.1)
    if kind == "qwen3_moe":
        return tf.Qwen3MoeConfig(**small, moe_intermediate_size=32,
                                 num_experts=4, num_experts_per_tok=2,
                                 norm_topk_prob=True)
    if kind == "olmoe":
        return tf.OlmoeConfig(**small, num_experts=4, num_experts_per_tok=2,
                              pad_token_id=1, eos_token_id=2)
    if kind in ("qwen3_moe_aux", "olmoe_aux"):
        # The load-balancing loss of the family's own model (each passes
        # the call's attention mask, None here, to load_balancing_loss_func).
        cfg = config(kind[:-len("_aux")])
        cfg.output_router_logits = True
        cfg.router_aux_loss_coef = 0.05
        return cfg
    if kind == "qwen2_moe":
        return tf.Qwen2MoeConfig(**small, moe_intermediate_size=32,
                                 shared_expert_intermediate_size=64,
                                 num_experts=4, num_experts_per_tok=2)
    if kind in ("deepseek_v3", "deepseek_v3_bias"):
        # Its second layer sparse: a shared expert beside a sigmoid router
        # (top 2 of 8 experts in the best 2 of 4 groups, renormalised,
        # times 2.5) with a correction bias (zero, or nonzero as trained
        # checkpoints have it: saved by save()).
        return tf.DeepseekV3Config(**dict(small, num_key_value_heads=4),
                                   moe_intermediate_size=32,
                                   n_routed_experts=8, num_experts_per_tok=2,
                                   n_group=4, topk_group=2,
                                   routed_scaling_factor=2.5,
                                   first_k_dense_replace=1,
                                   q_lora_rank=None, kv_lora_rank=16,
                                   qk_rope_head_dim=8, qk_nope_head_dim=8,
                                   v_head_dim=16)
    if kind == "llama4_text":
        # Llama 4's block: a sigmoid of the top logit scales each expert's
        # input, beside a shared expert (refused).
        return tf.Llama4TextConfig(**dict(small, intermediate_size=32),
                                   intermediate_size_mlp=128, head_dim=16,
                                   num_local_experts=4)
    if kind == "deepseek_v3_dense":
        # Its multi-head latent attention alone: every layer dense, the
        # query through its low-rank projection, the values narrower than
        # the queries and keys (16 against 16 + 8).
        return tf.DeepseekV3Config(**dict(small, num_key_value_heads=4),
                                   first_k_dense_replace=2, q_lora_rank=24,
                                   kv_lora_rank=16, qk_rope_head_dim=8,
                                   qk_nope_head_dim=16, v_head_dim=16)
    if kind == "granitemoe":
        # Granite's multipliers other than 1 (as Granite 3.0's: the
        # embeddings scaled up, the residual branches and the logits
        # down, the attention's own scale instead of 1 / sqrt(head_dim)).
        return tf.GraniteMoeConfig(**small, num_local_experts=4,
                                   num_experts_per_tok=2,
                                   embedding_multiplier=12.0,
                                   residual_multiplier=0.22,
                                   attention_multiplier=0.0625,
                                   logits_scaling=6.0)
    if kind in ("qwen2_moe_aux", "granitemoe_aux"):
        # The load-balancing loss added to the step's.
        cfg = config(kind[:-len("_aux")])
        cfg.output_router_logits = True
        cfg.router_aux_loss_coef = 0.05
        return cfg
    if kind == "gpt_oss":
        # Layer 0 slides a window of 8 keys (layer 1 is full), over YaRN's
        # rope; a SwiGLU limit that clamps some of the tiny model's gate
        # and up values.
        return tf.GptOssConfig(**dict(small, max_position_embeddings=131072),
                               head_dim=16, num_local_experts=4,
                               num_experts_per_tok=2, sliding_window=8,
                               swiglu_limit=0.2)
    if kind == "gpt_oss_bf16":
        # transformers' bf16 grouped_mm takes rows of a multiple of 16
        # bytes: an intermediate size of 176 bf16, not 172.
        cfg = config("gpt_oss")
        cfg.intermediate_size = 176
        return cfg
    if kind == "gpt_oss_aux":
        cfg = config("gpt_oss")
        cfg.output_router_logits = True
        cfg.router_aux_loss_coef = 0.05
        return cfg
    if kind == "t5":
        return tf.T5Config(vocab_size=256, d_model=64, d_kv=16, d_ff=128,
                           num_layers=2, num_heads=4)
    if kind == "bart":
        return tf.BartConfig(vocab_size=256, d_model=64, encoder_layers=2,
                             decoder_layers=2, encoder_attention_heads=4,
                             decoder_attention_heads=4, encoder_ffn_dim=128,
                             decoder_ffn_dim=128, max_position_embeddings=64)
    if kind == "gpt2":
        # A position table longer than the sequences the tests train (48
        # rows, --seq 32); bos/eos within the tiny vocabulary; dropout 0
        # (GPT-2's default 0.1 is refused: the step has no dropout).
        return tf.GPT2Config(vocab_size=256, n_positions=48, n_embd=64,
                             n_layer=2, n_head=4, bos_token_id=0,
                             eos_token_id=0, embd_pdrop=0.0,
                             resid_pdrop=0.0, attn_pdrop=0.0)
    if kind == "gpt2-dropout":
        return tf.GPT2Config(vocab_size=256, n_positions=48, n_embd=64,
                             n_layer=2, n_head=4, bos_token_id=0,
                             eos_token_id=0)
    if kind == "gemma":
        # Grouped-query (4 query heads, 2 key/value heads), head_dim 24 of a
        # 48-wide model (Gemma's head_dim is not hidden / heads) and the
        # embedding scale sqrt(48), which is not a float32 exactly.
        return tf.GemmaConfig(vocab_size=256, hidden_size=48,
                              intermediate_size=128, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=2,
                              head_dim=24, max_position_embeddings=128)
    if kind == "gpt_neox":
        # Pythia's layout: the head is embed_out in the checkpoint (the
        # model's lm_head), a quarter of each head's 16 dimensions rotated
        # (rotary_pct 0.25, as Pythia's), attention and MLP in parallel
        # (use_parallel_residual), LayerNorms with biases, exact GELU.
        return tf.GPTNeoXConfig(vocab_size=256, hidden_size=64,
                                intermediate_size=172, num_hidden_layers=2,
                                num_attention_heads=4,
                                max_position_embeddings=128,
                                rotary_pct=0.25)
    if kind == "gpt_neox_sequential":
        return tf.GPTNeoXConfig(vocab_size=256, hidden_size=64,
                                intermediate_size=172, num_hidden_layers=2,
                                num_attention_heads=4,
                                max_position_embeddings=128, rotary_pct=0.5,
                                use_parallel_residual=False,
                                tie_word_embeddings=True)
    if kind == "stablelm":
        # A quarter of each head rotated (StableLM's default), grouped-query.
        return tf.StableLmConfig(**small)
    if kind == "phi":
        # Half of each head rotated (Phi's default), attention and MLP in
        # parallel, gelu_new, a head with a bias.
        return tf.PhiConfig(vocab_size=256, hidden_size=64,
                            intermediate_size=172, num_hidden_layers=2,
                            num_attention_heads=4,
                            max_position_embeddings=128)
    if kind == "gptj":
        # GPT-J's interleaved rotary embedding (rotate_every_two) on a
        # quarter of each head's 16 dimensions (as its 64 of 256), applied
        # in the [batch, seq, heads, head_dim] layout; attention and MLP in
        # parallel.
        return tf.GPTJConfig(vocab_size=256, n_embd=64, n_inner=172,
                             n_layer=2, n_head=4, n_positions=128,
                             rotary_dim=4, bos_token_id=0, eos_token_id=0)
    if kind == "glm":
        # GLM's interleaved rotary embedding on half of each head (its
        # default partial_rotary_factor 0.5), grouped-query.
        return tf.GlmConfig(**small, head_dim=16, pad_token_id=0,
                            bos_token_id=0, eos_token_id=0)
    if kind == "mistral_window":
        # A sliding window of 8 of the tests' 32 tokens.
        return tf.MistralConfig(**small, sliding_window=8)
    if kind == "gemma2":
        # Sliding-window layers (8 tokens) alternating with full ones, and
        # caps small enough to bite on a tiny model's small logits: the
        # attention's (attn_logit_softcapping) and the head's
        # (final_logit_softcapping).
        return tf.Gemma2Config(vocab_size=256, hidden_size=48,
                               intermediate_size=128, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=2,
                               head_dim=24, max_position_embeddings=128,
                               sliding_window=8, attn_logit_softcapping=0.05,
                               final_logit_softcapping=0.5)
    if kind == "ministral3_yarn":
        # YaRN's rotary table (inv_freq blended between interpolation and
        # extrapolation, and cos and sin scaled by its attention_factor
        # 0.1 ln(4) + 1) and Llama 4's query scale, which is 1 at positions
        # below original_max_position_embeddings.
        return tf.Ministral3Config(**small, head_dim=16, rope_parameters={
            "rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0,
            "original_max_position_embeddings": 32,
            "llama_4_scaling_beta": 0.1})
    if kind == "big_bird":
        # BigBird as a decoder (full attention at this length): its
        # checkpoint holds a pooler that the causal LM never uses.
        return tf.BigBirdConfig(vocab_size=256, hidden_size=64,
                                num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=128,
                                max_position_embeddings=128, is_decoder=True,
                                attention_type="original_full",
                                hidden_dropout_prob=0.0,
                                attention_probs_dropout_prob=0.0)
    if kind in ("gemma4_text", "gemma4_scaled"):
        # Gemma 4: sliding layers with the default rotary table alternating
        # with full ones of a wider head (global_head_dim 32) rotated by
        # proportional rope (a quarter of the pairs turn, the others' inverse
        # frequencies are zeros), in the [batch, seq, heads, head_dim]
        # layout; each layer's output times its layer_scalar buffer. Its
        # per-layer inputs from a table of the tiny vocabulary.
        return tf.Gemma4TextConfig(
            vocab_size=256, hidden_size=64, intermediate_size=128,
            num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, global_head_dim=32,
            max_position_embeddings=128, sliding_window=8,
            layer_types=["sliding_attention", "full_attention"],
            vocab_size_per_layer_input=256, hidden_size_per_layer_input=16)
    if kind == "mpt":
        # ALiBi (MPT's slopes, alibi_bias_max 8) over 6 heads, not a power
        # of two: the slopes of 8 heads, odd ones first.
        return tf.MptConfig(vocab_size=256, d_model=48, n_heads=6,
                            n_layers=2, expansion_ratio=2, max_seq_len=128)
    if kind == "bloom":
        # ALiBi (BLOOM's slopes) over 6 heads: 4 of one base and 2 of
        # another; BLOOM's GELU.
        return tf.BloomConfig(vocab_size=256, hidden_size=48, n_layer=2,
                              n_head=6)
    if kind == "openai-gpt":
        # Its causal mask w * b + -1e4 * (1 - b); dropout 0 (its default
        # 0.1 is refused).
        return tf.OpenAIGPTConfig(vocab_size=256, n_embd=64, n_layer=2,
                                  n_head=4, n_positions=128, resid_pdrop=0.0,
                                  embd_pdrop=0.0, attn_pdrop=0.0)
    if kind == "codegen":
        # Its causal mask added before the scores are scaled; rotary on a
        # quarter of each head.
        return tf.CodeGenConfig(vocab_size=256, n_embd=64, n_layer=2,
                                n_head=4, n_positions=128, rotary_dim=4,
                                bos_token_id=0, eos_token_id=0)
    sys.exit("unknown kind " + kind)


MODEL_CLASSES = {"t5": "T5ForConditionalGeneration",
                 "bart": "BartForConditionalGeneration"}


def bytes_to_unicode():
    """GPT-2's printable character for each byte, which byte-level BPE
    vocabularies are written in."""
    bs = (list(range(ord("!"), ord("~") + 1)) +
          list(range(ord("\xa1"), ord("\xac") + 1)) +
          list(range(ord("\xae"), ord("\xff") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def save_tokenizer(directory):
    """A byte-level tokenizer whose 256 tokens are the bytes (no merges):
    every text is tokenized, into ids below a tiny model's vocabulary of
    256, and AutoTokenizer.from_pretrained loads it."""
    import transformers as tf
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    char = bytes_to_unicode()
    tok = Tokenizer(models.BPE(vocab={char[b]: b for b in range(256)},
                               merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tf.PreTrainedTokenizerFast(tokenizer_object=tok).save_pretrained(
        directory)


def save(args):
    import transformers as tf
    cfg = config(args.kind)
    if args.tokenizer:
        save_tokenizer(args.dir)
    if args.config_only:
        if args.kind in MODEL_CLASSES:
            cfg.architectures = [MODEL_CLASSES[args.kind]]
        cfg.save_pretrained(args.dir)
        return
    torch.manual_seed(0)
    if args.kind in MODEL_CLASSES:
        model = getattr(tf, MODEL_CLASSES[args.kind])(cfg)
    else:
        model = tf.AutoModelForCausalLM.from_config(cfg)
    if args.kind == "gemma4_scaled":
        # As a trained Gemma 4 has them: layer_scalar buffers other than 1.
        with torch.no_grad():
            for i, layer in enumerate(model.model.layers):
                layer.layer_scalar.fill_(0.5 + 0.25 * i)
    if args.kind == "deepseek_v3_bias":
        with torch.no_grad():
            model.model.layers[1].mlp.gate.e_score_correction_bias.copy_(
                torch.linspace(-0.01, 0.01, 8))
    if args.dtype:
        # As the hub ships most checkpoints: the tensors saved in bf16.
        model = model.to(getattr(torch, args.dtype))
    kwargs = {}
    if args.shard_size:
        kwargs["max_shard_size"] = args.shard_size
    model.save_pretrained(args.dir, **kwargs)


def big_config(args):
    """Llama-3-70B's config.json as Meta published it."""
    os.makedirs(args.dir, exist_ok=True)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
           "hidden_size": 8192, "intermediate_size": 28672,
           "num_hidden_layers": 80, "num_attention_heads": 64,
           "num_key_value_heads": 8, "vocab_size": 128256,
           "max_position_embeddings": 8192, "rope_theta": 500000.0,
           "rms_norm_eps": 1e-05, "hidden_act": "silu",
           "tie_word_embeddings": False, "bos_token_id": 128000,
           "eos_token_id": 128001, "torch_dtype": "bfloat16"}
    with open(os.path.join(args.dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


def rewrite(path, fn):
    """Rewrites a safetensors file's tensors through fn(dict)."""
    from safetensors.torch import load_file, save_file
    tensors = fn(load_file(path))
    save_file(tensors, path, metadata={"format": "pt"})


def break_dir(args):
    d = args.dir
    single = os.path.join(d, "model.safetensors")
    if args.how == "drop-tensor":
        rewrite(single, lambda t: {k: v for k, v in t.items()
                                   if k != "model.norm.weight"})
    elif args.how == "drop-head":
        rewrite(single, lambda t: {k: v for k, v in t.items()
                                   if k != "embed_out.weight"})
    elif args.how == "wrong-shape":
        def grow(t):
            t["model.layers.1.mlp.up_proj.weight"] = torch.zeros(8, 64)
            return t
        rewrite(single, grow)
    elif args.how == "int-tensor":
        def to_int(t):
            w = t["model.norm.weight"]
            t["model.norm.weight"] = torch.ones(w.shape, dtype=torch.int32)
            return t
        rewrite(single, to_int)
    elif args.how == "layer-scalar":
        def rescale(t):
            t["model.layers.1.layer_scalar"] = torch.tensor([0.8])
            return t
        rewrite(single, rescale)
    elif args.how == "extra-tensor":
        def extra(t):
            t["extra.weight"] = torch.zeros(2)
            return t
        rewrite(single, extra)
    elif args.how == "drop-shard":
        index = json.load(open(os.path.join(d,
                                            "model.safetensors.index.json")))
        os.remove(os.path.join(d, sorted(set(
            index["weight_map"].values()))[-1]))
    elif args.how == "model-type":
        path = os.path.join(d, "config.json")
        cfg = json.load(open(path))
        cfg["model_type"] = "llama-but-not"
        json.dump(cfg, open(path, "w"))
    elif args.how == "bin":
        os.remove(single)
        open(os.path.join(d, "pytorch_model.bin"), "wb").close()
    else:
        sys.exit("unknown way to break: " + args.how)


def batches(args):
    """Random token ids and labels [rows, seq] (int64, vocabulary 256) for
    --inputs/--labels: about a third of the labels -100, row 3 all -100, so
    that the batches' valid-label counts differ. The labels are not derived
    from the ids: they are whatever the step's loss takes as its labels."""
    import numpy as np
    rng = np.random.default_rng(0)
    shape = (args.rows, args.seq)
    ids = rng.integers(0, 256, shape, dtype=np.int64)
    labels = rng.integers(0, 256, shape, dtype=np.int64)
    labels[rng.random(shape) < 1 / 3] = -100
    labels[3] = -100
    np.save(args.ids, ids)
    np.save(args.labels, labels)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("save")
    s.add_argument("kind")
    s.add_argument("dir")
    s.add_argument("--shard-size")
    s.add_argument("--dtype", choices=["bfloat16"],
                   help="save the weights in this dtype")
    s.add_argument("--config-only", action="store_true")
    s.add_argument("--tokenizer", action="store_true",
                   help="also a byte-level tokenizer (256 tokens)")
    b = sub.add_parser("big-config")
    b.add_argument("dir")
    k = sub.add_parser("break")
    k.add_argument("dir")
    k.add_argument("how")
    t = sub.add_parser("batches")
    t.add_argument("ids")
    t.add_argument("labels")
    t.add_argument("--rows", type=int, required=True)
    t.add_argument("--seq", type=int, required=True)
    args = p.parse_args()
    {"save": save, "big-config": big_config, "break": break_dir,
     "batches": batches}[args.cmd](args)


if __name__ == "__main__":
    main()
