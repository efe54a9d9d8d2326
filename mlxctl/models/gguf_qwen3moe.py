"""A Qwen 3 MoE GGUF as mlx-lm's ``qwen3_moe`` model.

The file gives ``expert_count``, ``expert_used_count`` and ``expert_feed_forward_length``;
llama.cpp hard-codes the rest: every layer is a MoE layer (``decoder_sparse_step`` 1, no
``mlp_only_layers``) and the chosen experts' softmax weights are renormalised
(``norm_topk_prob``). The stacked expert tensors stay quantised (:mod:`gguf_decode`).
mlx-lm's qwen3_moe applies no rope scaling (it reads ``rope_scaling`` and ignores it), so a file
with ``rope.scaling.type`` is refused rather than run without the scaling llama.cpp applies.
"""

from __future__ import annotations

from collections.abc import Mapping

from mlxctl.errors import ModelFormatError
from mlxctl.models.gguf_config import arch_int, llama_config


def qwen3moe_config(
    metadata: Mapping[str, object], weights: Mapping[str, object], rope: Mapping | None = None
) -> dict:
    """config.json for mlx-lm's qwen3_moe model."""
    config = llama_config(metadata, weights, rope)
    if "rope_scaling" in config:
        kind = metadata.get("qwen3moe.rope.scaling.type")
        raise ModelFormatError(
            f"GGUF qwen3moe.rope.scaling.type {kind!r} cannot be imported",
            hint="mlx-lm's qwen3_moe model applies no rope scaling",
        )
    return {
        **config,
        "num_experts": arch_int(metadata, "expert_count"),
        "num_experts_per_tok": arch_int(metadata, "expert_used_count"),
        "moe_intermediate_size": arch_int(metadata, "expert_feed_forward_length"),
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "norm_topk_prob": True,
    }
