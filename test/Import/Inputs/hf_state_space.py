"""Writes tiny state-space models with save_pretrained into the current
directory: Mamba, Jamba (Mamba layers with MoE layers between) and RWKV,
for hf-state-space.test."""

import torch
import transformers as tf

torch.manual_seed(0)
tf.MambaForCausalLM(tf.MambaConfig(
    vocab_size=256, hidden_size=64, num_hidden_layers=2,
    state_size=8)).save_pretrained("mamba")
tf.JambaForCausalLM(tf.JambaConfig(
    vocab_size=256, hidden_size=64, intermediate_size=128,
    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    num_experts=4, num_experts_per_tok=2, attn_layer_period=2,
    attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1,
    mamba_d_state=8, mamba_d_conv=4, mamba_expand=2)).save_pretrained("jamba")
tf.RwkvForCausalLM(tf.RwkvConfig(
    vocab_size=256, hidden_size=64, num_hidden_layers=2,
    attention_hidden_size=64, intermediate_size=128,
    context_length=64)).save_pretrained("rwkv")
