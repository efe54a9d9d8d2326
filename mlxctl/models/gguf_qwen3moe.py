"""A Qwen 3 MoE GGUF as mlx-lm's ``qwen3_moe`` model.

The file gives ``expert_count``, ``expert_used_count`` and ``expert_feed_forward_length``;
llama.cpp hard-codes the rest: every layer is a MoE layer (``decoder_sparse_step`` 1, no
``mlp_only_layers``) and the chosen experts' softmax weights are renormalised
(``norm_topk_prob``). The stacked expert tensors stay quantised (:mod:`gguf_decode`).
"""

from __future__ import annotations

from collections.abc import Mapping

from mlxctl.models.gguf_config import arch_int, llama_config


def qwen3moe_config(
    metadata: Mapping[str, object], weights: Mapping[str, object], rope: Mapping | None = None
) -> dict:
    """config.json for mlx-lm's qwen3_moe model."""
    return {
        **llama_config(metadata, weights, rope),
        "num_experts": arch_int(metadata, "expert_count"),
        "num_experts_per_tok": arch_int(metadata, "expert_used_count"),
        "moe_intermediate_size": arch_int(metadata, "expert_feed_forward_length"),
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "norm_topk_prob": True,
    }
