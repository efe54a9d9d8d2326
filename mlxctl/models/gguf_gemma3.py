"""What a Gemma 3 GGUF leaves out or stores differently, put back for mlx-lm's ``gemma3_text``.

- llama.cpp's converter stores every RMSNorm weight as ``1 + w``; mlx-lm's Gemma adds the 1
  itself, so it is taken off here.
- The GGUF lacks ``sliding_window_pattern`` (every 6th layer is global), ``rope_local_base_freq``
  (10000, the sliding layers' rotary base) and ``query_pre_attn_scalar`` (the head size, except
  for Gemma 3 27B): llama.cpp hard-codes them, and so does this module.
"""

from __future__ import annotations

from collections.abc import Mapping

import mlx.core as mx

from mlxctl.models.gguf_config import arch_int, common_config, head_counts
from mlxctl.models.gguf_metadata import meta_float, meta_int

SLIDING_WINDOW_PATTERN = 6
ROPE_LOCAL_BASE_FREQ = 10000.0
_27B_LAYERS = 62  # Gemma 3 27B: query_pre_attn_scalar = hidden / heads, not the head size
_DEFAULT_SLIDING_WINDOW = 512


def gemma3_config(
    metadata: Mapping[str, object], weights: Mapping[str, object], rope: Mapping | None = None
) -> dict:
    """config.json for mlx-lm's gemma3_text model."""
    heads, _ = head_counts(metadata)
    head_dim = meta_int(metadata, "gemma3.attention.key_length") or 256
    config = {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        **common_config(metadata),
        "head_dim": head_dim,
        "rope_local_base_freq": ROPE_LOCAL_BASE_FREQ,
        "query_pre_attn_scalar": query_pre_attn_scalar(metadata, heads, head_dim, _27B_LAYERS),
        "sliding_window": meta_int(metadata, "gemma3.attention.sliding_window")
        or _DEFAULT_SLIDING_WINDOW,
        "sliding_window_pattern": SLIDING_WINDOW_PATTERN,
        "tie_word_embeddings": "lm_head.weight" not in weights,
    }
    if (factor := meta_float(metadata, "gemma3.rope.scaling.factor", 1.0)) != 1.0:
        config["rope_scaling"] = {"rope_type": "linear", "factor": factor}
    return config


def undo_norm_shift(weights: dict[str, mx.array]) -> dict[str, mx.array]:
    """Every ``*norm.weight`` as mlx-lm's Gemma keeps it: ``w``, not ``1 + w``."""
    return {
        name: (array.astype(mx.float32) - 1).astype(array.dtype)
        if name.endswith("norm.weight")
        else array
        for name, array in weights.items()
    }


def query_pre_attn_scalar(
    metadata: Mapping[str, object], heads: int, head_dim: int, layers_of_27b: int
) -> int:
    """The head size, or hidden / heads for the 27B model (llama.cpp knows it by its layers)."""
    if arch_int(metadata, "block_count") == layers_of_27b:
        return arch_int(metadata, "embedding_length") // heads
    return head_dim
