"""The text tower of an Idefics3 / SmolVLM folder, as an mlx-lm model (mlx-lm has no such type).

SmolVLM's text tower is a llama (SmolLM2's). Its weights are ``model.text_model.*`` and
``lm_head.*`` in a Hugging Face checkpoint, ``language_model.*`` in an mlx-vlm (mlx-community)
one; the vision weights (``vision_model.*``, ``connector.*``) are dropped here and loaded by
``vision/idefics3.py``. The output head is tied only where the config says so (Idefics3's
default is untied).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models import llama
from mlx_lm.models.base import BaseModelArgs

_VISION = ("vision_model.", "connector.")


@dataclass
class ModelArgs(BaseModelArgs):
    model_type: str
    text_config: dict
    tie_word_embeddings: bool = False

    def __post_init__(self):
        self.text_config = {"tie_word_embeddings": self.tie_word_embeddings, **self.text_config,
                            "model_type": "llama"}


class Model(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.model_type = args.model_type
        self.language_model = llama.Model(llama.ModelArgs.from_dict(args.text_config))

    def __call__(self, inputs: mx.array, cache=None, input_embeddings: Optional[mx.array] = None):
        return self.language_model(inputs, cache=cache, input_embeddings=input_embeddings)

    def sanitize(self, weights: dict) -> dict:
        text = {}
        for key, value in weights.items():
            name = _text_name(key)
            if name is not None:
                text[name] = value
        return {f"language_model.{k}": v for k, v in self.language_model.sanitize(text).items()}

    @property
    def layers(self):
        return self.language_model.model.layers


def _text_name(key: str) -> str | None:
    """A checkpoint key as mlx-lm's llama names it (``model.*``, ``lm_head.*``); None for a
    vision weight."""
    if key.startswith("language_model.model.") or key.startswith("language_model.lm_head."):
        return key.removeprefix("language_model.")  # saved from this class
    if key.startswith("language_model."):
        return "model." + key.removeprefix("language_model.")  # mlx-vlm's layout
    key = key.removeprefix("model.")
    if key.startswith(_VISION):
        return None
    if key.startswith("text_model."):
        return "model." + key.removeprefix("text_model.")
    return key  # lm_head.*
