"""Tiny configs of real mlx-lm architectures whose caches cannot be cut at a block boundary:
sliding-window layers (``RotatingKVCache``), recurrent / linear-attention layers
(``ArraysCache``, ``MambaCache``) and hybrids of both with plain ``KVCache`` layers."""

from __future__ import annotations

WINDOW = 8  # sliding windows shorter than the test prompts, so they really drop positions
VOCAB = 100

CONFIGS = {
    "gemma3_text": dict(model_type="gemma3_text", hidden_size=64, num_hidden_layers=4, intermediate_size=128,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=16,
                        vocab_size=VOCAB, sliding_window=WINDOW, sliding_window_pattern=2,
                        max_position_embeddings=512),
    "gpt_oss": dict(model_type="gpt_oss", num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2,
                    vocab_size=VOCAB, hidden_size=64, intermediate_size=64, head_dim=16, num_attention_heads=4,
                    num_key_value_heads=2, sliding_window=WINDOW,
                    layer_types=["sliding_attention", "full_attention"]),
    "qwen3_next": dict(model_type="qwen3_next", hidden_size=64, num_hidden_layers=4, intermediate_size=128,
                       num_attention_heads=4, linear_num_value_heads=4, linear_num_key_heads=2,
                       linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4, num_experts=4,
                       num_experts_per_tok=2, decoder_sparse_step=1, shared_expert_intermediate_size=64,
                       mlp_only_layers=[], moe_intermediate_size=32, rms_norm_eps=1e-6, vocab_size=VOCAB,
                       num_key_value_heads=2, rope_theta=10000.0, partial_rotary_factor=0.25,
                       max_position_embeddings=512, head_dim=16, full_attention_interval=2),
    "qwen3_5": dict(model_type="qwen3_5", text_config=dict(
        model_type="qwen3_5_text", hidden_size=64, intermediate_size=128, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=VOCAB, linear_num_value_heads=4,
        linear_num_key_heads=2, linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4,
        full_attention_interval=2, max_position_embeddings=512, tie_word_embeddings=True)),
    "mamba": dict(model_type="mamba", vocab_size=VOCAB, hidden_size=64, intermediate_size=128, state_size=8,
                  num_hidden_layers=2, conv_kernel=4, use_bias=False, use_conv_bias=True, time_step_rank=8),
    "mamba2": dict(model_type="mamba2", num_heads=4, head_dim=16, vocab_size=VOCAB, hidden_size=32,
                   intermediate_size=64, state_size=8, num_hidden_layers=2, layer_norm_epsilon=1e-5,
                   conv_kernel=4, n_groups=1, use_bias=False, use_conv_bias=True, tie_word_embeddings=True,
                   time_step_limit=(0.0, float("inf")), time_step_rank=8),
    "nemotron_h": dict(model_type="nemotron_h", vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                       max_position_embeddings=512, num_attention_heads=4, num_key_value_heads=2,
                       attention_bias=False, mamba_num_heads=4, mamba_head_dim=16, mamba_proj_bias=False,
                       ssm_state_size=8, conv_kernel=4, n_groups=1, mlp_bias=False, layer_norm_epsilon=1e-5,
                       use_bias=False, use_conv_bias=True, hybrid_override_pattern=["M", "*", "-", "M"],
                       head_dim=16),
    "granitemoehybrid": dict(model_type="granitemoehybrid", vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                             num_hidden_layers=3, max_position_embeddings=512, num_attention_heads=4,
                             num_key_value_heads=2, attention_bias=False, embedding_multiplier=1.0,
                             attention_multiplier=0.25, logits_scaling=1.0, residual_multiplier=1.0,
                             layer_types=["mamba", "attention", "mamba"], rms_norm_eps=1e-6, num_local_experts=4,
                             num_experts_per_tok=2, shared_intermediate_size=64, mamba_n_heads=4, mamba_d_head=16,
                             mamba_proj_bias=False, mamba_d_state=8, mamba_d_conv=4, mamba_n_groups=1,
                             mamba_conv_bias=True),
    "lfm2": dict(model_type="lfm2", vocab_size=VOCAB, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=512, norm_eps=1e-5, conv_bias=False, conv_L_cache=3,
                 block_dim=64, block_multiple_of=16, block_ffn_dim_multiplier=1.0, block_auto_adjust_ff_dim=False,
                 block_ff_dim=128, full_attn_idxs=[1]),
    "falcon_h1": dict(model_type="falcon_h1", hidden_size=64, head_dim=16, num_attention_heads=4, num_key_value_heads=2,
                      num_hidden_layers=2, intermediate_size=128, mamba_d_conv=4, mamba_d_head=16, mamba_d_ssm=64,
                      mamba_d_state=8, mamba_n_heads=4, mamba_n_groups=1, mamba_chunk_size=16, vocab_size=VOCAB,
                      max_position_embeddings=512),
}
