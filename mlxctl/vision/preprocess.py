"""Pixels for the vision tower, as the model's image processor config says (CLIP-style).

Read from ``preprocessor_config.json``: resize (``size.shortest_edge`` keeps the aspect ratio,
``size.height/width`` does not) with the given resample filter, centre crop to ``crop_size``,
rescale (1/255), normalise with ``image_mean`` / ``image_std``. The result is channels-last
float32 (H, W, 3), what MLX convolutions take. This is Hugging Face's CLIPImageProcessor with
its Pillow backend, written out so that no processor class (and no torch) is needed: mlx-vlm's
LLaVA processor, under transformers 5, passes text arguments such as ``padding=`` on to the image
processor, which refuses them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


@dataclass(frozen=True)
class ImageProcessing:
    height: int  # output size
    width: int
    shortest_edge: int | None = None  # resize so the shorter side is this long (aspect kept)
    resize_to: tuple[int, int] | None = None  # or to exactly (height, width)
    resample: int = 3  # PIL's: 3 bicubic, 2 bilinear
    crop: tuple[int, int] | None = None  # centre crop (height, width)
    rescale: float | None = 1 / 255
    mean: tuple[float, ...] | None = CLIP_MEAN
    std: tuple[float, ...] | None = CLIP_STD

    @classmethod
    def from_folder(cls, path: Path, image_size: int) -> ImageProcessing:
        """From the folder's preprocessor_config.json; without one, a square resize to
        ``image_size`` with CLIP's normalisation."""
        file = Path(path) / "preprocessor_config.json"
        cfg = json.loads(file.read_text()) if file.is_file() else {}
        return cls.from_config(cfg, image_size)

    @classmethod
    def from_config(cls, cfg: dict, image_size: int) -> ImageProcessing:
        size = cfg.get("size", {"height": image_size, "width": image_size}) if cfg.get("do_resize", True) else None
        if isinstance(size, int):
            size = {"shortest_edge": size}
        shortest = size.get("shortest_edge") if size else None
        exact = (size["height"], size["width"]) if size and "height" in size else None
        crop = None
        if cfg.get("do_center_crop", False):
            c = cfg.get("crop_size", image_size)
            crop = (c, c) if isinstance(c, int) else (c["height"], c["width"])
        out = crop or exact or ((shortest, shortest) if shortest else (image_size, image_size))
        normalize = cfg.get("do_normalize", True)
        return cls(
            height=out[0], width=out[1], shortest_edge=shortest, resize_to=exact,
            resample=int(cfg.get("resample", 3)), crop=crop,
            rescale=cfg.get("rescale_factor", 1 / 255) if cfg.get("do_rescale", True) else None,
            mean=tuple(cfg.get("image_mean", CLIP_MEAN)) if normalize else None,
            std=tuple(cfg.get("image_std", CLIP_STD)) if normalize else None,
        )

    def __call__(self, image: Any) -> np.ndarray:
        """An RGB PIL image -> (H, W, 3) float32."""
        img = image
        if self.resize_to is not None:
            img = img.resize((self.resize_to[1], self.resize_to[0]), resample=self.resample)
        elif self.shortest_edge is not None:
            img = img.resize(_shortest_edge_size(img.size, self.shortest_edge), resample=self.resample)
        if self.crop is not None:
            img = _center_crop(img, *self.crop)
        pixels = np.asarray(img, dtype=np.float32)
        if self.rescale is not None:
            pixels = pixels * np.float32(self.rescale)
        if self.mean is not None and self.std is not None:
            pixels = (pixels - np.asarray(self.mean, np.float32)) / np.asarray(self.std, np.float32)
        if pixels.shape[:2] != (self.height, self.width):  # a config without crop or exact size
            raise ValueError(f"preprocessed image is {pixels.shape[1]}x{pixels.shape[0]}, "
                             f"the vision tower takes {self.width}x{self.height}")
        return pixels


def _shortest_edge_size(size: tuple[int, int], edge: int) -> tuple[int, int]:
    """(width, height) with the shorter side ``edge`` long, as Hugging Face rounds it."""
    width, height = size
    short, long = (width, height) if width <= height else (height, width)
    new_long = int(edge * long / short)
    return (edge, new_long) if width <= height else (new_long, edge)


def _center_crop(img: Any, height: int, width: int) -> Any:
    """The centre (height, width) box; an image smaller than the box is padded with black."""
    w, h = img.size
    top, left = (h - height) // 2, (w - width) // 2
    return img.crop((left, top, left + width, top + height))


def normalised(img: Any, rescale: float | None, mean: tuple[float, ...] | None,
               std: tuple[float, ...] | None) -> np.ndarray:
    """An RGB PIL image -> (H, W, 3) float32, rescaled and normalised where given."""
    pixels = np.asarray(img, dtype=np.float32)
    if rescale is not None:
        pixels = pixels * np.float32(rescale)
    if mean is not None and std is not None:
        pixels = (pixels - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    return pixels
