"""What a Gemma 2 GGUF leaves out or stores differently, put back for mlx-lm's ``gemma2``.

- Norm weights are stored as ``1 + w``, as for Gemma 3 (:func:`gguf_gemma3.undo_norm_shift`).
- The file has ``attn_logit_softcapping``, ``final_logit_softcapping`` and
  ``attention.sliding_window``; llama.cpp defaults them to 50, 30 and 4096 when absent, and
  hard-codes ``query_pre_attn_scalar`` (the head size, except for Gemma 2 27B: hidden / heads)
  and the window on every other layer (layers 0, 2, 4 ... slide).
- mlx-lm's gemma2 attends over the whole context on every layer: the sliding window is recorded
  in config.json but only llama.cpp applies it, so answers match up to the window's length.
"""

from __future__ import annotations

from collections.abc import Mapping

from mlxctl.models.gguf_config import common_config, head_counts, head_size
from mlxctl.models.gguf_gemma3 import query_pre_attn_scalar
from mlxctl.models.gguf_metadata import meta_float, meta_int

_27B_LAYERS = 46
_DEFAULT_SLIDING_WINDOW = 4096
_DEFAULT_ATTN_SOFTCAP = 50.0
_DEFAULT_FINAL_SOFTCAP = 30.0


def gemma2_config(
    metadata: Mapping[str, object], weights: Mapping[str, object], rope: Mapping | None = None
) -> dict:
    """config.json for mlx-lm's gemma2 model."""
    heads, _ = head_counts(metadata)
    head_dim = head_size(metadata)
    return {
        "architectures": ["Gemma2ForCausalLM"],
        "model_type": "gemma2",
        **common_config(metadata),
        "head_dim": head_dim,
        "attn_logit_softcapping": meta_float(
            metadata, "gemma2.attn_logit_softcapping", _DEFAULT_ATTN_SOFTCAP
        ),
        "final_logit_softcapping": meta_float(
            metadata, "gemma2.final_logit_softcapping", _DEFAULT_FINAL_SOFTCAP
        ),
        "query_pre_attn_scalar": query_pre_attn_scalar(metadata, heads, head_dim, _27B_LAYERS),
        "sliding_window": meta_int(metadata, "gemma2.attention.sliding_window")
        or _DEFAULT_SLIDING_WINDOW,
        "tie_word_embeddings": True,
    }
