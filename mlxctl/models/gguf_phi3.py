"""A Phi-3 GGUF as mlx-lm's ``phi3`` model.

- ``attn_qkv`` (Q, K, V rows in that order) and ``ffn_up`` (gate rows, then up rows) stay fused:
  mlx-lm's phi3 splits them the same way llama.cpp does.
- ``rope.dimension_count`` below the head size is a partial rotary factor (Phi-4-mini: 0.75),
  nudged up by one float step where mlx-lm's ``int(head_dim * factor)`` would otherwise come out
  one short of the file's count (30 of 88: ``88 * (30 / 88)`` is 29.999...).
- LongRoPE models carry ``rope_factors_long`` / ``rope_factors_short`` tensors and
  ``rope.scaling.original_context_length``: they become ``rope_scaling`` (type longrope) and
  ``original_max_position_embeddings``. A file with only one of the two tensors is refused.
  mlx-lm applies the long factors at every length (llama.cpp: the short ones while its context
  per sequence is at most the original), and derives the attention factor from the two lengths as llama.cpp's converter does
  for LongRoPE; a file whose ``rope.scaling.attn_factor`` differs (YaRN's) is refused.
- ``attention.sliding_window`` is recorded; mlx-lm's phi3 attends over the whole context, and so
  does llama.cpp's (its phi3 loader disables the window).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import mlx.core as mx

from mlxctl.errors import ModelFormatError
from mlxctl.models.gguf_config import arch_int, common_config, head_counts
from mlxctl.models.gguf_metadata import meta_float, meta_int

ROPE_TENSORS = ("rope_factors_long.weight", "rope_factors_short.weight")


def phi3_config(
    metadata: Mapping[str, object], weights: Mapping[str, object], rope: Mapping | None = None
) -> dict:
    """config.json for mlx-lm's phi3 model."""
    heads, _ = head_counts(metadata)
    head_dim = arch_int(metadata, "embedding_length") // heads
    _check_head_size(metadata, head_dim)
    rotary = meta_int(metadata, "phi3.rope.dimension_count") or head_dim
    config = {
        "architectures": ["Phi3ForCausalLM"],
        "model_type": "phi3",
        **common_config(metadata),
        "partial_rotary_factor": _rotary_factor(rotary, head_dim),
        "tie_word_embeddings": "lm_head.weight" not in weights,
    }
    if window := meta_int(metadata, "phi3.attention.sliding_window"):
        config["sliding_window"] = window
    if scaling := _longrope(rope or {}):
        config["rope_scaling"] = scaling
        config["original_max_position_embeddings"] = arch_int(
            metadata, "rope.scaling.original_context_length"
        )
        _check_attn_factor(metadata, config)
    return config


def _rotary_factor(rotary: int, head_dim: int) -> float:
    """``rotary / head_dim``, the smallest float whose ``int(head_dim * factor)`` is ``rotary``."""
    factor = rotary / head_dim
    return factor if int(head_dim * factor) == rotary else math.nextafter(factor, math.inf)


def _check_attn_factor(metadata: Mapping[str, object], config: dict) -> None:
    """mlx-lm's LongRoPE scales attention by sqrt(1 + ln(s) / ln(original)), s = max / original."""
    original = config["original_max_position_embeddings"]
    scale = config["max_position_embeddings"] / original
    expected = math.sqrt(1 + math.log(scale) / math.log(original)) if scale > 1 else 1.0
    found = meta_float(metadata, "phi3.rope.scaling.attn_factor", expected)
    if not math.isclose(found, expected, rel_tol=1e-4):
        raise ModelFormatError(
            f"GGUF phi3 rope.scaling.attn_factor {found:g} is not LongRoPE's {expected:g}",
            hint="mlx-lm's phi3 supports LongRoPE scaling, not YaRN",
        )


def _longrope(rope: Mapping[str, mx.array]) -> dict | None:
    present = [name for name in ROPE_TENSORS if name in rope]
    if not present:
        return None
    if len(present) == 1:
        missing = next(name for name in ROPE_TENSORS if name not in rope)
        raise ModelFormatError(f"GGUF phi3 file has {present[0]!r} but lacks {missing!r}")
    long, short = (rope[name].astype(mx.float32).reshape(-1).tolist() for name in ROPE_TENSORS)
    return {"type": "longrope", "long_factor": long, "short_factor": short}


def _check_head_size(metadata: Mapping[str, object], head_dim: int) -> None:
    key_length = meta_int(metadata, "phi3.attention.key_length")
    if key_length is not None and key_length != head_dim:
        raise ModelFormatError(
            f"GGUF phi3 head size {key_length} differs from hidden / heads ({head_dim})",
            hint="mlx-lm's phi3 model derives the head size from hidden / heads",
        )
