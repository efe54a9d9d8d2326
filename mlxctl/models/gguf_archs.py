"""Every GGUF architecture mlxctl imports: its config.json builder, the rope tensors it takes
(llama.cpp's converter writes rope scaling as tensors, not metadata) and its weight fix-up."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import mlx.core as mx

from mlxctl.models.gguf_config import llama_config
from mlxctl.models.gguf_gemma2 import gemma2_config
from mlxctl.models.gguf_gemma3 import gemma3_config, undo_norm_shift
from mlxctl.models.gguf_phi3 import ROPE_TENSORS as PHI3_ROPE
from mlxctl.models.gguf_phi3 import phi3_config
from mlxctl.models.gguf_qwen3moe import qwen3moe_config


def _as_is(weights: dict[str, mx.array]) -> dict[str, mx.array]:
    return weights


@dataclass(frozen=True)
class Architecture:
    config: Callable[[Mapping, Mapping, Mapping], dict]
    rope_tensors: tuple[str, ...] = ()
    fix_weights: Callable[[dict[str, mx.array]], dict[str, mx.array]] = _as_is


ARCHITECTURES = {
    "llama": Architecture(llama_config, ("rope_freqs.weight",)),
    "qwen2": Architecture(llama_config),
    "qwen3": Architecture(llama_config),
    "qwen3moe": Architecture(qwen3moe_config),
    "gemma2": Architecture(gemma2_config, fix_weights=undo_norm_shift),
    "gemma3": Architecture(gemma3_config, fix_weights=undo_norm_shift),
    "phi3": Architecture(phi3_config, PHI3_ROPE),
}
