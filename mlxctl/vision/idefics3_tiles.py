"""Idefics3 / SmolVLM image tiling: an image -> its tiles + global image, and its prompt block.

Hugging Face's Idefics3 / SmolVLM image processor (``image_processing_pil_smolvlm``), written out
for one image (no torch):

1. resize so the longest edge is ``size.longest_edge`` (smaller images are scaled up too), the
   other edge rounded down and then up to even, capped at 4096;
2. with ``do_image_splitting``: resize up to whole multiples of ``max_image_size.longest_edge``
   (the tower's input, "tile") on both sides, cut it into rows x cols tiles (row-major), and add
   the global image, the resized image scaled to one tile; an image that already fits one tile is
   sent alone (rows = cols = 0). Without splitting: one tile-sized resize;
3. rescale (1/255) and normalise with ``image_mean`` / ``image_std``.

Every tile then has the same size, so the processor's padding (to the largest image of a batch)
never applies to one image. The prompt block is the processor's string: per tile
``<fake_token_around_image><row_r_col_c>`` and ``image_seq_len`` ``<image>`` tokens, a ``\\n``
after each row, then ``\\n<fake_token_around_image><global-img>``, the global image's tokens
and ``<fake_token_around_image>``; an unsplit image is just the global part (no newlines).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlxctl.vision.preprocess import normalised

MAX_IMAGE_SIZE = 4096  # the processor's absolute cap on either side
FAKE, GLOBAL = "<fake_token_around_image>", "<global-img>"


@dataclass(frozen=True)
class Tiling:
    tile: int  # max_image_size.longest_edge: the vision tower's input side
    longest_edge: int | None  # size.longest_edge, None without do_resize
    split: bool = True
    resample: int = 1  # PIL's LANCZOS
    rescale: float | None = 1 / 255
    mean: tuple[float, ...] | None = (0.5, 0.5, 0.5)
    std: tuple[float, ...] | None = (0.5, 0.5, 0.5)

    @classmethod
    def from_config(cls, cfg: dict, image_size: int) -> Tiling:
        """From preprocessor_config.json (``image_size``: the tower's, when the config has no
        ``max_image_size``)."""
        resize = cfg.get("do_resize", True)
        normalize = cfg.get("do_normalize", True)
        return cls(tile=int(cfg.get("max_image_size", {}).get("longest_edge", image_size)),
                   longest_edge=int(cfg.get("size", {}).get("longest_edge", 4 * image_size)) if resize else None,
                   split=bool(cfg.get("do_image_splitting", True)), resample=int(cfg.get("resample", 1)),
                   rescale=cfg.get("rescale_factor", 1 / 255) if cfg.get("do_rescale", True) else None,
                   mean=tuple(cfg.get("image_mean", (0.5,) * 3)) if normalize else None,
                   std=tuple(cfg.get("image_std", (0.5,) * 3)) if normalize else None)

    def grid(self, size: tuple[int, int]) -> tuple[int, int]:
        """(rows, cols) of tiles for an image of PIL ``size`` (width, height); (0, 0): one tile."""
        height, width = self._split_size(size)
        if not self.split or (height <= self.tile and width <= self.tile):
            return 0, 0
        return (height - self.tile) // self.tile + 1, (width - self.tile) // self.tile + 1

    def tiles(self, image: Any) -> np.ndarray:
        """(tiles, tile, tile, 3) float32, channels last: the rows x cols tiles row-major, then
        the global image (or the one tile of an image that needs no split)."""
        height, width = self._split_size(image.size)
        img = image
        if self.longest_edge is not None:
            img = img.resize(tuple(reversed(_longest_edge_size(image.size, self.longest_edge))), resample=self.resample)
        if not self.split:
            frames = [img.resize((self.tile, self.tile), resample=self.resample)]
        else:
            img = img.resize((width, height), resample=self.resample)
            rows, cols = self.grid(image.size)
            frames = [img.crop((c * self.tile, r * self.tile, (c + 1) * self.tile, (r + 1) * self.tile))
                      for r in range(rows) for c in range(cols)]
            frames.append(img.resize((self.tile, self.tile), resample=self.resample) if frames else img)
        return np.stack([self._normalised(f) for f in frames])

    def _split_size(self, size: tuple[int, int]) -> tuple[int, int]:
        """(height, width) after the longest-edge resize and, when splitting, the resize to whole
        tiles."""
        height, width = (_longest_edge_size(size, self.longest_edge) if self.longest_edge is not None
                         else (size[1], size[0]))
        if not self.split:
            return height, width
        return _whole_tiles(height, width, self.tile)

    def _normalised(self, img: Any) -> np.ndarray:
        return normalised(img, self.rescale, self.mean, self.std)


def block_text(rows: int, cols: int, image_seq_len: int, image_token: str = "<image>") -> str:
    """The processor's prompt string for one image of rows x cols tiles."""
    tokens = image_token * image_seq_len
    glob = f"{FAKE}{GLOBAL}{tokens}{FAKE}"
    if rows == 0 and cols == 0:
        return glob
    lines = ["".join(f"{FAKE}<row_{r + 1}_col_{c + 1}>{tokens}" for c in range(cols)) + "\n" for r in range(rows)]
    return "".join(lines) + "\n" + glob


def _longest_edge_size(size: tuple[int, int], max_len: int) -> tuple[int, int]:
    """(height, width) with the longest edge ``max_len``, the other edge made even, both under
    4096 (the processor's two steps)."""
    width, height = size
    ratio = width / height
    if width >= height:
        width, height = max_len, int(max_len / ratio)
        height += height % 2
    else:
        height, width = max_len, int(max_len * ratio)
        width += width % 2
    height, width = max(height, 1), max(width, 1)
    ratio = width / height
    if width >= height and width > MAX_IMAGE_SIZE:
        width, height = MAX_IMAGE_SIZE, int(MAX_IMAGE_SIZE / ratio)
    elif height > width and height > MAX_IMAGE_SIZE:
        height, width = MAX_IMAGE_SIZE, int(MAX_IMAGE_SIZE * ratio)
    return max(height, 1), max(width, 1)


def _whole_tiles(height: int, width: int, tile: int) -> tuple[int, int]:
    """(height, width) resized up to whole tiles, as ``resize_for_vision_encoder`` rounds."""
    ratio = width / height
    if width >= height:
        width = math.ceil(width / tile) * tile
        height = math.ceil(int(width / ratio) / tile) * tile
    else:
        height = math.ceil(height / tile) * tile
        width = math.ceil(int(height * ratio) / tile) * tile
    return height, width
