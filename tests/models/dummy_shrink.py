"""Architecture presets shrunk to run on a CPU: the same keys, the same layer-type pattern (the
fewest layers that hold it once), small widths and few experts; vocabularies and sliding
windows stay real."""

from __future__ import annotations

import copy

SMALL = {"hidden_size": 128, "intermediate_size": 128, "moe_intermediate_size": 64,
         "shared_expert_intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
         "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 32,
         "linear_value_head_dim": 32, "block_dim": 128, "block_ff_dim": 128}
EXPERT_COUNTS = ("num_experts", "num_local_experts")


def shrunk(config: dict) -> dict:
    """A copy of a preset (its ``text_config`` when nested) cut down as the module doc says."""
    config = copy.deepcopy(config)
    text = config.get("text_config", config)
    layers = pattern_length(text)
    text.update({key: value for key, value in SMALL.items() if key in text}, num_hidden_layers=layers)
    if "layer_types" in text:
        text["layer_types"] = text["layer_types"][:layers]
    for key in EXPERT_COUNTS:
        if key in text:
            text[key] = text["num_experts_per_tok"] + 2
    return config


def pattern_length(config: dict) -> int:
    """Layers in one period of the model's attention pattern (1: every layer alike)."""
    for key in ("full_attention_interval", "sliding_window_pattern"):
        if key in config:
            return config[key]
    types = config.get("layer_types") or ["attention"]
    return next(p for p in range(1, len(types) + 1) if all(t == types[i % p] for i, t in enumerate(types)))
