"""Idefics3 / SmolVLM (``idefics3``, ``smolvlm``): SigLIP tower, pixel-shuffle connector, tiles.

An image is cut into tiles plus a global image (``idefics3_tiles``); each tile goes through the
SigLIP tower (mlx-vlm's Idefics3 VisionModel), its patch grid is pixel-shuffled by
``scale_factor`` (each s x s block of patches becomes one position, s^2 times wider) and
projected to the text tower's width (mlx-vlm's Idefics3Connector): ``image_seq_len`` =
(image_size / patch_size)^2 / s^2 positions per tile. The prompt block is the processor's
(``idefics3_tiles.block_text``); its ``<image>`` positions take the features, tile by tile.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mlxctl.vision.idefics3_tiles import FAKE, GLOBAL, Tiling, block_text

_PREFIXES = ("vision_model.", "connector.")


class Idefics3Layout:
    """The tower, connector and tiling of one folder: ``block`` and ``features`` per image (the
    VisionAdapter's layout)."""

    def __init__(self, tower: Any, connector: Any, tiling: Tiling, *, patch_size: int, image_seq_len: int,
                 image_token: str, tokenizer: Any):
        self.tower, self.connector, self.tiling = tower, connector, tiling
        self.patch_size, self.image_seq_len = patch_size, image_seq_len
        self.image_token, self.tokenizer = image_token, tokenizer
        self._blocks: dict[tuple[int, int], list[int]] = {}

    def block(self, image: Any) -> list[int]:
        grid = self.tiling.grid(image.size)
        if grid not in self._blocks:
            text = block_text(*grid, self.image_seq_len, self.image_token)
            self._blocks[grid] = list(self.tokenizer.encode(text, add_special_tokens=False))
        return self._blocks[grid]

    def features(self, image: Any) -> Any:
        """(tiles * image_seq_len, hidden): the tiles' features in block order."""
        import mlx.core as mx

        dtype = self.tower.embeddings.patch_embedding.weight.dtype
        pixels = mx.array(self.tiling.tiles(image)).astype(dtype)
        side = self.tiling.tile // self.patch_size
        patches = mx.ones((pixels.shape[0], side, side), dtype=mx.bool_)  # one image: no padded tile
        hidden, *_ = self.tower(pixels, patch_attention_mask=patches, output_hidden_states=True)
        feats = self.connector(hidden)
        return feats.reshape(-1, feats.shape[-1])


def load_idefics3(path: Path, config: dict, tokenizer: Any, dtype: Any) -> dict:
    from mlx_vlm.models.smolvlm.config import ModelConfig, TextConfig, VisionConfig  # Idefics3's, with defaults
    from mlx_vlm.models.idefics3.idefics3 import Idefics3Connector
    from mlx_vlm.models.idefics3.vision import VisionModel

    from mlxctl.vision.families import _token_text
    from mlxctl.vision.weights import load_prefixed

    vision = {"model_type": "idefics3_vision", **config["vision_config"]}
    if vision["model_type"] not in ("siglip_vision_model", "idefics3", "idefics3_vision", "smolvlm_vision"):
        raise ValueError(f"vision_config.model_type {vision['model_type']!r} is not a SigLIP tower")
    vision_cfg = VisionConfig.from_dict(vision)
    text_cfg = TextConfig.from_dict({"model_type": "llama", **config["text_config"]})
    model_cfg = ModelConfig.from_dict({**config, "text_config": text_cfg, "vision_config": vision_cfg})
    tower, connector = VisionModel(vision_cfg), Idefics3Connector(model_cfg)
    load_prefixed(path, config, {"vision_model.": tower, "connector.": connector}, dtype)
    token_id = int(config.get("image_token_id", config.get("image_token_index", 49190)))
    image_token = _token_text(path, tokenizer, token_id)
    for marker in (FAKE, GLOBAL):
        if len(tokenizer.encode(marker, add_special_tokens=False)) != 1:
            raise ValueError(f"the tokenizer has no {marker} token")
    scale = int(model_cfg.scale_factor)
    seq_len = (vision_cfg.image_size // vision_cfg.patch_size) ** 2 // scale**2
    _check_seq_len(path, seq_len)
    tiling = Tiling.from_config(_preprocessor_config(path), vision_cfg.image_size)
    if tiling.tile != vision_cfg.image_size:
        raise ValueError(f"max_image_size.longest_edge {tiling.tile} is not the tower's image_size "
                         f"{vision_cfg.image_size}")
    layout = Idefics3Layout(tower, connector, tiling, patch_size=vision_cfg.patch_size, image_seq_len=seq_len,
                            image_token=image_token, tokenizer=tokenizer)
    return {"towers": layout, "layout": layout, "processing": None, "image_token": image_token,
            "image_token_id": token_id, "tokens_per_image": seq_len}


def _preprocessor_config(path: Path) -> dict:
    file = path / "preprocessor_config.json"
    return json.loads(file.read_text()) if file.is_file() else {}


def _check_seq_len(path: Path, seq_len: int) -> None:
    """processor_config.json's image_seq_len, where given, must be what the tower makes."""
    file = path / "processor_config.json"
    given = json.loads(file.read_text()).get("image_seq_len") if file.is_file() else None
    if given is not None and int(given) != seq_len:
        raise ValueError(f"processor_config.json's image_seq_len {given} is not the {seq_len} positions the "
                         f"tower and scale_factor make per tile")
