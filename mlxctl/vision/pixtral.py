"""Pixtral / Mistral 3 (``mistral3``, ``pixtral``): Pixtral's vision encoder at the image's own size.

The image keeps its aspect ratio: scaled down (never up) to fit ``size.longest_edge``, then each
side rounded up to whole token cells (``patch_size`` x ``spatial_merge_size`` pixels), bicubic,
rescaled and normalised with CLIP's mean / std, as Hugging Face's Pixtral image processor and
PixtralProcessor do it. The encoder (mlx-vlm's Pixtral VisionModel: patch convolution, 2-D rotary
positions over the patch grid) reads the whole image; Mistral 3's projector (RMSNorm, the patch
merger folding each 2x2 block of patches into one, a GELU MLP) gives one position per cell,
Pixtral's (LLaVA's MLP, merge size 1) one per patch. The prompt block is ``[IMG]`` per cell, an
``[IMG_BREAK]`` after each row, the last one ``[IMG_END]``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mlxctl.vision.preprocess import CLIP_MEAN, CLIP_STD, normalised


@dataclass(frozen=True)
class Resizing:
    cell: int  # patch_size * spatial_merge_size: the pixels of one prompt position, each way
    longest_edge: int | None
    resample: int = 3  # PIL's bicubic
    rescale: float | None = 1 / 255
    mean: tuple[float, ...] | None = CLIP_MEAN
    std: tuple[float, ...] | None = CLIP_STD

    @classmethod
    def from_config(cls, cfg: dict, cell: int, default_edge: int) -> Resizing:
        size = cfg.get("size", {"longest_edge": default_edge})
        edge = size.get("longest_edge") if isinstance(size, dict) else size
        normalize = cfg.get("do_normalize", True)
        return cls(cell=cell, longest_edge=int(edge) if cfg.get("do_resize", True) and edge else None,
                   resample=int(cfg.get("resample", 3)),
                   rescale=cfg.get("rescale_factor", 1 / 255) if cfg.get("do_rescale", True) else None,
                   mean=tuple(cfg.get("image_mean", CLIP_MEAN)) if normalize else None,
                   std=tuple(cfg.get("image_std", CLIP_STD)) if normalize else None)

    def grid(self, size: tuple[int, int]) -> tuple[int, int]:
        """(rows, cols) of prompt positions for an image of PIL ``size`` (width, height)."""
        width, height = size
        if self.longest_edge is not None:
            ratio = max(height / self.longest_edge, width / self.longest_edge)
            if ratio > 1:
                height, width = int(np.floor(height / ratio)), int(np.floor(width / ratio))
        return (height - 1) // self.cell + 1, (width - 1) // self.cell + 1

    def __call__(self, image: Any) -> np.ndarray:
        """(H, W, 3) float32, H and W whole cells."""
        rows, cols = self.grid(image.size)
        img = image.resize((cols * self.cell, rows * self.cell), resample=self.resample)
        return normalised(img, self.rescale, self.mean, self.std)


class PixtralLayout:
    """Encoder, projector and resizing of one folder: ``block`` and ``features`` per image (the
    VisionAdapter's layout)."""

    def __init__(self, tower: Any, projector: Any, resizing: Resizing, *, feature_layer: int, merges: bool,
                 tokens: tuple[int, int, int]):
        self.tower, self.projector, self.resizing = tower, projector, resizing
        self.feature_layer, self.merges = feature_layer, merges
        self.image, self.row_break, self.end = tokens

    def block(self, image: Any) -> list[int]:
        rows, cols = self.resizing.grid(image.size)
        out = ([self.image] * cols + [self.row_break]) * rows
        out[-1] = self.end
        return out

    def features(self, image: Any) -> Any:
        """(rows * cols, hidden), row by row."""
        import mlx.core as mx

        pixels = mx.array(self.resizing(image)[None])
        sizes = [pixels.shape[1:3]]
        _, hidden = self.tower(pixels.astype(self.tower.vision_model.patch_conv.weight.dtype),
                               output_hidden_states=True, image_sizes=sizes)
        chosen = hidden[self.feature_layer][0]
        return self.projector(chosen, sizes) if self.merges else self.projector(chosen)


def load_mistral3(path: Path, config: dict, tokenizer: Any, dtype: Any) -> dict:
    from mlx_vlm.models.mistral3.config import ModelConfig, TextConfig
    from mlx_vlm.models.mistral3.mistral3 import Mistral3MultiModalProjector

    model_cfg = _model_config(config, ModelConfig, TextConfig)
    return _load(path, config, tokenizer, dtype, model_cfg, Mistral3MultiModalProjector(model_cfg),
                 merge=int(model_cfg.spatial_merge_size))


def load_pixtral(path: Path, config: dict, tokenizer: Any, dtype: Any) -> dict:
    from mlx_vlm.models.pixtral.config import ModelConfig, TextConfig
    from mlx_vlm.models.pixtral.pixtral import LlavaMultiModalProjector

    model_cfg = _model_config(config, ModelConfig, TextConfig)
    return _load(path, config, tokenizer, dtype, model_cfg, LlavaMultiModalProjector(model_cfg), merge=1)


def _model_config(config: dict, model_config: Any, text_config: Any) -> Any:
    from mlx_vlm.models.pixtral.config import VisionConfig

    vision = {"model_type": "pixtral", **config["vision_config"]}
    if vision["model_type"] != "pixtral":
        raise ValueError(f"vision_config.model_type {vision['model_type']!r} is not Pixtral's encoder")
    text_cfg = text_config.from_dict({"model_type": "mistral", **config["text_config"]})
    return model_config.from_dict({**config, "text_config": text_cfg, "vision_config": VisionConfig.from_dict(vision)})


def _load(path: Path, config: dict, tokenizer: Any, dtype: Any, model_cfg: Any, projector: Any, merge: int) -> dict:
    from mlx_vlm.models.pixtral.vision import VisionModel

    from mlxctl.vision.families import _token_text
    from mlxctl.vision.weights import load_prefixed

    vision_cfg = model_cfg.vision_config
    tower = VisionModel(vision_cfg)
    load_prefixed(path, config, {"vision_tower.": tower, "multi_modal_projector.": projector}, dtype,
                  rename=_encoder_key)
    import mlx.core as mx

    mx.eval(tower.vision_model.patch_positional_embedding.inv_freq)  # a plain array, not a parameter: made
    # lazily on this thread, it would be computed on the engine thread, which has no stream of this one's
    proc = _json(path / "processor_config.json")
    tokens = {}
    for key, default in (("image_token", "[IMG]"), ("image_break_token", "[IMG_BREAK]"),
                         ("image_end_token", "[IMG_END]")):
        text = proc.get(key, default)
        ids = list(tokenizer.encode(text, add_special_tokens=False))
        if len(ids) != 1:
            raise ValueError(f"the tokenizer has no {text} token")
        tokens[key] = ids[0]
    token_id = int(config.get("image_token_index", config.get("image_token_id", tokens["image_token"])))
    image_token = _token_text(path, tokenizer, token_id)
    if token_id != tokens["image_token"]:
        raise ValueError(f"image_token_index {token_id} is not the processor's {image_token}")
    for key, value in (("patch_size", vision_cfg.patch_size), ("spatial_merge_size", merge)):
        if key in proc and int(proc[key]) != value:
            raise ValueError(f"processor_config.json's {key} {proc[key]} is not the model's {value}")
    cell = vision_cfg.patch_size * merge
    resizing = Resizing.from_config(_json(path / "preprocessor_config.json"), cell, vision_cfg.image_size)
    if resizing.longest_edge is None or resizing.longest_edge > vision_cfg.image_size:
        raise ValueError(f"size.longest_edge {resizing.longest_edge} must be set and at most the encoder's "
                         f"image_size {vision_cfg.image_size} (its 2-D rotary table ends there)")
    layer = model_cfg.vision_feature_layer
    if not isinstance(layer, int):
        raise ValueError(f"vision_feature_layer {layer!r}: only one layer is supported")
    layout = PixtralLayout(tower, projector, resizing, feature_layer=layer, merges=hasattr(projector, "patch_merger"),
                           tokens=(token_id, tokens["image_break_token"], tokens["image_end_token"]))
    side = vision_cfg.image_size // cell
    return {"towers": layout, "layout": layout, "processing": None, "image_token": image_token,
            "image_token_id": token_id, "tokens_per_image": side * side}


def _encoder_key(key: str) -> str:
    """A Hugging Face ``vision_tower.*`` key under mlx-vlm's ``vision_model.``."""
    return key if key.startswith("vision_model.") else f"vision_model.{key}"


def _json(file: Path) -> dict:
    return json.loads(file.read_text()) if file.is_file() else {}
