"""Whether a model splits over N ranks, checked from its config before any weight is read.

mlx-lm's architectures that define ``Model.shard`` split attention by heads (query, key and
value projections column-wise, the output projection row-wise) and the MLP by its hidden
width; each split ends in one ``all_sum``. So the head counts and the MLP widths must divide
by N. Embeddings, norms and the output head stay whole on every rank, so every rank computes
the same logits and samples the same tokens.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from mlxctl.errors import BadInputError

# config keys whose value every rank takes an equal share of (those a config has)
SPLIT_KEYS = ("num_attention_heads", "num_key_value_heads", "intermediate_size", "moe_intermediate_size",
              "shared_expert_intermediate_size")


@dataclass(frozen=True)
class ShardPlan:
    model_type: str
    ranks: int
    per_rank: dict[str, int]  # each split dimension's share on one rank

    def describe(self) -> str:
        parts = ", ".join(f"{key} {value}" for key, value in self.per_rank.items())
        return f"{self.model_type} over {self.ranks} ranks, each with {parts}"


def shard_plan(config: dict, ranks: int) -> ShardPlan:
    """The plan for ``config`` (a model's config.json) over ``ranks``; a model that cannot be
    split that way is a :class:`BadInputError` naming the reason."""
    text = config.get("text_config") or {}
    model_type = config.get("model_type") or text.get("model_type") or "?"
    if "vision_config" in config:
        raise BadInputError(f"--tensor-parallel does not split vision models yet ({model_type!r})")
    if not supports_sharding(model_type):
        raise BadInputError(f"mlx-lm cannot shard {model_type!r} models over several ranks (it has no "
                            f"tensor-parallel plan for that architecture)",
                            hint="run it on one device, or pick a model whose architecture mlx-lm shards "
                                 "(llama, qwen2, qwen3, qwen3_moe, mistral, deepseek, gpt_oss, ...)")
    per_rank = {}
    for key in SPLIT_KEYS:
        value = config.get(key, text.get(key))
        if not isinstance(value, int):
            continue
        if value % ranks:
            raise BadInputError(f"{model_type!r} cannot be split over {ranks} ranks: its {key} ({value}) "
                                f"does not divide by {ranks}",
                                hint="pick a rank count that divides the model's head counts and MLP widths")
        per_rank[key] = value // ranks
    return ShardPlan(model_type, ranks, per_rank)


def supports_sharding(model_type: str) -> bool:
    try:
        module = importlib.import_module(f"mlx_lm.models.{model_type}")
    except Exception:  # noqa: BLE001 - an unknown or unimportable architecture cannot be sharded
        return False
    return hasattr(getattr(module, "Model", None), "shard")


def shard_model(model: Any, group: Any) -> None:
    """Split ``model``'s layers over ``group`` in place (before its weights are evaluated, so a
    rank reads only its share of a lazily loaded checkpoint into memory)."""
    try:
        model.shard(group)
    except (ValueError, AttributeError) as exc:
        raise BadInputError(f"mlx-lm could not shard the model over {group.size()} ranks: {exc}") from None
