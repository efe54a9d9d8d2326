"""Text towers of vision-language folders that mlx-lm has no model type for: model_type ->
(Model, ModelArgs) classes that mlx-lm's loader builds the text tower with."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _idefics3() -> tuple:
    from mlxctl.vision.idefics3_text import Model, ModelArgs

    return Model, ModelArgs


TEXT_TOWERS = {"idefics3": _idefics3, "smolvlm": _idefics3}


def load_text_tower(path: Path, config: dict, lazy: bool) -> tuple[Any, Any, dict] | None:
    """(model, tokenizer, config) for a folder whose model_type is in TEXT_TOWERS, loaded as
    mlx-lm's ``load`` would; None for any other folder (mlx-lm loads it)."""
    classes = TEXT_TOWERS.get(config.get("model_type"))
    if classes is None:
        return None
    from mlx_lm.utils import load_model, load_tokenizer

    model, config = load_model(path, lazy, get_model_classes=lambda config: classes())
    return model, load_tokenizer(path, eos_token_ids=config.get("eos_token_id")), config
