"""Qwen2.5-VL (``qwen2_5_vl``): dynamic resolution, a windowed ViT with a 2x2 patch merger, and
3-D rotary positions in the text tower.

- **Pixels**: each image is resized (bicubic) to the nearest size whose sides are multiples of
  patch x merge (28) with its pixel count within ``min_pixels .. max_pixels`` (Hugging Face's
  ``smart_resize``), rescaled and normalised, then cut into 14x14 patches, each repeated twice
  along time (``temporal_patch_size`` 2: a still image is a two-frame clip), ordered so that
  every 2x2 block of patches is contiguous: the (patches, 3 * 2 * 14 * 14) rows the tower takes
  (Qwen2VLImageProcessor's layout).
- **Placeholders**: each ``<|image_pad|>`` of a prompt becomes ``<|vision_start|>``, one
  ``<|image_pad|>`` per merged patch ((h/28) x (w/28) of the resized image) and
  ``<|vision_end|>``, as Qwen's processor writes it, so the count differs per image.
- **Positions**: the text tower is mlx-lm's qwen2 with its RoPE layers replaced by mrope's
  (vision/mrope.py), which the engine feeds each request's image layout.

A video reaches it as sampled frames, each encoded as a still image (Qwen's own video path pairs
frames along time; this one does not).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mlxctl.vision.preprocess import CLIP_MEAN, CLIP_STD

MAX_ASPECT = 200  # Qwen's processor refuses a longer side more than this many times the shorter


@dataclass(frozen=True)
class QwenImageProcessing:
    min_pixels: int = 56 * 56
    max_pixels: int = 28 * 28 * 1280
    patch_size: int = 14
    merge_size: int = 2
    temporal_patch_size: int = 2
    resample: int = 3
    rescale: float = 1 / 255
    mean: tuple[float, ...] = CLIP_MEAN
    std: tuple[float, ...] = CLIP_STD

    @classmethod
    def from_folder(cls, path: Path) -> QwenImageProcessing:
        file = Path(path) / "preprocessor_config.json"
        cfg = json.loads(file.read_text()) if file.is_file() else {}
        size = cfg.get("size") or {}
        return cls(min_pixels=int(cfg.get("min_pixels", size.get("shortest_edge", cls.min_pixels))),
                   max_pixels=int(cfg.get("max_pixels", size.get("longest_edge", cls.max_pixels))),
                   patch_size=int(cfg.get("patch_size", 14)), merge_size=int(cfg.get("merge_size", 2)),
                   temporal_patch_size=int(cfg.get("temporal_patch_size", 2)), resample=int(cfg.get("resample", 3)),
                   rescale=float(cfg.get("rescale_factor", 1 / 255)),
                   mean=tuple(cfg.get("image_mean", CLIP_MEAN)), std=tuple(cfg.get("image_std", CLIP_STD)))

    @property
    def factor(self) -> int:
        return self.patch_size * self.merge_size

    def resized(self, width: int, height: int) -> tuple[int, int]:
        """(height, width) the image is resized to: Hugging Face's smart_resize."""
        if max(width, height) / min(width, height) > MAX_ASPECT:
            raise ValueError(f"a {width}x{height} image is more than {MAX_ASPECT} times as long as it is wide")
        f = self.factor
        h, w = round(height / f) * f, round(width / f) * f
        if h * w > self.max_pixels:
            beta = math.sqrt(height * width / self.max_pixels)
            h, w = max(f, math.floor(height / beta / f) * f), max(f, math.floor(width / beta / f) * f)
        elif h * w < self.min_pixels:
            beta = math.sqrt(self.min_pixels / (height * width))
            h, w = math.ceil(height * beta / f) * f, math.ceil(width * beta / f) * f
        return h, w

    def grid(self, size: tuple[int, int]) -> tuple[int, int]:
        """(rows, cols) of merged patches for an image of ``size`` (width, height): the
        positions it takes in the prompt, rows x cols."""
        h, w = self.resized(*size)
        return h // self.factor, w // self.factor

    def __call__(self, image: Any) -> np.ndarray:
        """An RGB PIL image -> (patches, 3 * T * P * P) float32, 2x2 merge blocks contiguous."""
        h, w = self.resized(*image.size)
        pixels = np.asarray(image.resize((w, h), resample=self.resample), dtype=np.float32) * np.float32(self.rescale)
        pixels = (pixels - np.asarray(self.mean, np.float32)) / np.asarray(self.std, np.float32)
        p, m, t = self.patch_size, self.merge_size, self.temporal_patch_size
        gh, gw = h // p, w // p
        x = pixels.transpose(2, 0, 1).reshape(3, gh // m, m, p, gw // m, m, p)
        x = x.transpose(1, 4, 2, 5, 0, 3, 6)  # (gh/m, gw/m, m, m, C, P, P)
        x = np.broadcast_to(x[:, :, :, :, :, None], (*x.shape[:5], t, p, p))
        return np.ascontiguousarray(x).reshape(gh * gw, 3 * t * p * p)


class QwenVLTowers:
    """mlx-vlm's Qwen2.5-VL vision tower (its merger is the projector)."""

    def __init__(self, tower: Any, processing: QwenImageProcessing):
        self.tower, self.processing = tower, processing

    @property
    def pixel_dtype(self) -> Any:
        return self.tower.patch_embed.proj.weight.dtype

    def encode_images(self, images: list[Any]) -> list[Any]:
        """(rows * cols, hidden) features per PIL image, all through the tower in one pass (its
        full-attention blocks keep each image to itself)."""
        import mlx.core as mx

        grids = [self.processing.grid(img.size) for img in images]
        pixels = mx.array(np.concatenate([self.processing(img) for img in images]))
        m = self.processing.merge_size
        thw = mx.array([[1, r * m, c * m] for r, c in grids])
        feats = self.run(pixels.astype(self.pixel_dtype), thw)
        bounds = np.cumsum([r * c for r, c in grids])[:-1].tolist()
        return mx.split(feats, bounds) if bounds else [feats]

    def run(self, pixels: Any, grid_thw: Any) -> Any:
        """(all images' positions, hidden) features."""
        return self.tower(pixels, grid_thw)


def load_qwen2_5_vl(path: Path, config: dict, tokenizer: Any, dtype: Any) -> dict:
    from mlx_vlm.models.qwen2_5_vl.config import VisionConfig
    from mlx_vlm.models.qwen2_5_vl.vision import VisionModel

    from mlxctl.vision.families import load_tower

    vision_cfg = VisionConfig.from_dict({**config["vision_config"], "model_type": "qwen2_5_vl"})
    tower = VisionModel(vision_cfg)
    load_tower(path, config, tower, ("vision_tower.", "visual."), dtype)
    processing = QwenImageProcessing.from_folder(path)
    if processing.merge_size != vision_cfg.spatial_merge_size or processing.patch_size != vision_cfg.patch_size:
        raise ValueError("preprocessor_config.json's patch/merge sizes differ from the vision tower's")
    return {"towers": QwenVLTowers(tower, processing), **qwen_parts(config, tokenizer, processing)}


def qwen_parts(config: dict, tokenizer: Any, processing: QwenImageProcessing) -> dict:
    """What Qwen's VL families share: the markers, the per-image grid and mrope's sections."""
    pad = _token(tokenizer, config, "image_token_id", "<|image_pad|>")
    begin = _token(tokenizer, config, "vision_start_token_id", "<|vision_start|>")
    end = _token(tokenizer, config, "vision_end_token_id", "<|vision_end|>")
    text = config.get("text_config", {})
    rope = config.get("rope_scaling") or text.get("rope_scaling") or text.get("rope_parameters") or {}
    sections = rope.get("mrope_section")
    if not sections or len(sections) != 3:
        raise ValueError("rope_scaling.mrope_section (three sections) is missing from config.json")
    return {"processing": processing, "image_token": "<|image_pad|>", "image_token_id": pad, "tokens_per_image": 0,
            "wrap": ([begin], [end]), "grid": lambda image: processing.grid(image.size),
            "mrope_sections": tuple(sections), "mrope_interleaved": bool(rope.get("mrope_interleaved", False))}


def _token(tokenizer: Any, config: dict, key: str, text: str) -> int:
    """The id of one of the markers: config.json's, checked against the tokenizer."""
    ids = list(tokenizer.encode(text, add_special_tokens=False))
    if len(ids) != 1:
        raise ValueError(f"the tokenizer has no single token {text!r}")
    if key in config and int(config[key]) != ids[0]:
        raise ValueError(f"config.json's {key} is {config[key]}, the tokenizer's {text!r} is {ids[0]}")
    return ids[0]
