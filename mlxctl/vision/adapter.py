"""VisionAdapter: a vision-language model's vision tower + projector, next to its text tower.

The text tower is loaded by mlx-lm like any other model (it maps ``llava`` and ``gemma3`` onto
text-only wrappers, which drop the vision weights); ``families`` loads the rest with mlx-vlm's
classes from the same folder (LLaVA, Gemma 3, Idefics3 / SmolVLM, Pixtral / Mistral 3), and this
module serves the engine:

- ``expand``: each image placeholder token of a prompt becomes ``tokens_per_image`` feature
  positions (wrapped in the family's begin/end tokens where it has them), and their spans are
  noted. A family whose images take a size-dependent block (SmolVLM's tiles, Pixtral's rows of
  patches) has a ``layout`` instead: each placeholder becomes ``layout.block(image)``, one span over
  the whole block;
- ``features_for``: the features of a request's images, encoded on the engine thread (the one
  thread that runs MLX), from a content-hash -> features LRU so a repeated image is not encoded
  again; images whose span the prefix cache already covers are not encoded at all;
- ``embed``: a prompt chunk's input embeddings: the text tower's token embeddings with the
  image features spliced in over the placeholder positions.

A video reaches it as its sampled frames, each an image (vision/video.py); ``videos`` keeps the
decoded frames of recent videos for the API layer.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

from mlxctl.errors import EngineError, ModelFormatError
from mlxctl.vision.lru import ByteLRU
from mlxctl.vision.preprocess import ImageProcessing
from mlxctl.vision.video_cache import VideoCache

log = logging.getLogger("mlxctl.vision")

SUPPORTED_TYPES = ("llava", "gemma3", "idefics3", "smolvlm", "mistral3", "pixtral", "qwen2_5_vl", "qwen3_vl")  # families.LOADERS
DEFAULT_CACHE_BYTES = 512 * 1024 * 1024


class FeatureCache(ByteLRU):
    """Image content key -> evaluated features (an mx.array), least recently used out first,
    within a byte budget. Used from the engine thread; ``stats`` may be read from any."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES):
        super().__init__(max_bytes)


class VisionAdapter:
    """``towers``: the family's vision tower and projector (``families``): ``forward(pixels)`` ->
    (images, tokens_per_image, hidden) features as the text tower takes them, ``pixel_dtype``.
    ``image_token``/``image_token_id``: the placeholder a prompt marks an image with;
    ``feature_token_id``: the token the feature positions hold (default: the placeholder);
    ``wrap``: token ids around the feature positions (Gemma 3's begin/end of image).
    ``layout``: for a family whose block depends on the image (``families``' Idefics3 and
    Pixtral): ``block(image)`` -> the token ids of one image's block, its feature positions
    holding ``feature_token_id``, and ``features(image)`` -> their (positions, hidden) features in
    order; the block's other tokens (row breaks, tile markers) are embedded as text. There
    ``tokens_per_image`` is only the count for one tile / an image the size of the tower's input
    (``stats``); ``added_positions`` counts the real blocks.
    ``grid`` (dynamic resolution): image -> (rows, cols) of its feature positions, which then
    vary per image (``tokens_per_image`` is unused); ``mrope_sections``: the text tower rotates
    by 3-D positions (vision/mrope.py; ``mrope_interleaved``: Qwen3-VL's layout), and ``rope`` is
    the context the engine sets them on; ``deepstack_levels``: the features also hold that many
    deepstack levels, added after the text tower's first layers (vision/deepstack.py)."""

    def __init__(self, towers: Any, processing: ImageProcessing, embed_tokens: Any, *,
                 image_token: str, image_token_id: int, tokens_per_image: int, feature_token_id: int | None = None,
                 wrap: tuple[Sequence[int], Sequence[int]] = ((), ()), cache_bytes: int = DEFAULT_CACHE_BYTES,
                 model_type: str = "llava", layout: Any = None, grid: Any = None,
                 mrope_sections: Sequence[int] | None = None, mrope_interleaved: bool = False,
                 deepstack_levels: int = 0):
        self.towers, self.processing = towers, processing
        self.embed_tokens = embed_tokens
        self.image_token, self.image_token_id = image_token, image_token_id
        self.feature_token_id = image_token_id if feature_token_id is None else feature_token_id
        self.tokens_per_image = tokens_per_image
        self.wrap = (list(wrap[0]), list(wrap[1]))
        self.model_type = model_type
        self.layout = layout
        self.grid, self.mrope_sections, self.mrope_interleaved = grid, mrope_sections, mrope_interleaved
        self.deepstack_levels = deepstack_levels
        self.rope = None  # mrope.RopeContext, installed in the text tower by load_vision
        self.cache = FeatureCache(cache_bytes)
        self.videos = VideoCache()  # decoded video frames, filled by the API layer (vision/fetch.py)
        self.images_encoded = 0
        self._dtype = None

    # -- caller side (any thread) ---------------------------------------------------------------

    def expand(self, tokens: Sequence[int],
               images: Sequence[Any] | int) -> tuple[list[int], tuple[tuple[int, int], ...]]:
        """The prompt with each placeholder token replaced by its image's feature positions
        (``tokens_for``, inside ``wrap``), or by its image's ``layout`` block, and the (start,
        length) span of every image's positions. The placeholders must match the images (the
        request's ImageInputs; a count will do for a family whose blocks do not depend on the
        image) one to one."""
        if isinstance(images, int) and (self.layout is not None or self.grid is not None):
            raise TypeError(f"{self.model_type} image blocks depend on the images: pass them, not a count")
        num_images = images if isinstance(images, int) else len(images)
        marks = [i for i, t in enumerate(tokens) if t == self.image_token_id]
        if len(marks) != num_images:
            from mlxctl.errors import BadInputError

            raise BadInputError(f"the prompt marks {len(marks)} image(s) with {self.image_token!r} but "
                                f"{num_images} image(s) were given")
        out: list[int] = []
        spans = []
        prev = 0
        before, after = self.wrap
        for k, mark in enumerate(marks):
            count = self.tokens_for(images[k]) if self.grid is not None else self.tokens_per_image
            out += tokens[prev:mark]
            if self.layout is not None:
                block = self.layout.block(images[k].image)
                spans.append((len(out), len(block)))
                out += block
                prev = mark + 1
                continue
            out += before
            spans.append((len(out), count))
            out += [self.feature_token_id] * count
            out += after
            prev = mark + 1
        out += tokens[prev:]
        return out, tuple(spans)

    def tokens_for(self, image: Any) -> int:
        """The feature positions of one image (``vision.images.ImageInput``)."""
        if self.grid is None:
            return self.tokens_per_image
        try:
            rows, cols = self.grid(image)
        except ValueError as exc:
            from mlxctl.vision.images import ImageError

            raise ImageError(image.where, str(exc)) from None
        return rows * cols

    def added_positions(self, images: Sequence[Any]) -> int:
        """How many positions the placeholders of ``images`` (ImageInputs) add to a prompt once
        expanded (its positions, or its layout block, and the wrap tokens, for each): what a token
        count made before ``expand`` adds."""
        if self.layout is not None:
            return sum(len(self.layout.block(img.image)) - 1 for img in images)
        wrap = len(self.wrap[0]) + len(self.wrap[1])
        return sum(self.tokens_for(img) + wrap - 1 for img in images)

    def mrope_layout(self, images: Sequence[Any], spans: Sequence[tuple[int, int]]) -> Any:
        """The mrope layout of a prompt's images (vision/mrope.py)."""
        from mlxctl.vision.mrope import ImageLayout

        return ImageLayout(tuple((s, *self.grid(img)) for img, (s, _) in zip(images, spans)))

    def stats(self) -> dict:
        per_image = self.tokens_per_image if self.grid is None else None  # None: by image size
        return {"model_type": self.model_type, "tokens_per_image": per_image,
                "images_encoded": self.images_encoded, "feature_cache": self.cache.stats(),
                "video_cache": self.videos.stats()}

    # -- engine thread ----------------------------------------------------------------------------

    def features_for(self, images: Sequence[Any], spans: Sequence[tuple[int, int]], known: list | None,
                     start: int) -> list:
        """Features for every image whose span reaches past ``start`` (what is left to prefill);
        the others stay None: their positions are already in the KV cache."""
        feats = list(known) if known else [None] * len(images)
        need = [i for i, (s, n) in enumerate(spans) if s + n > start and feats[i] is None]
        if need:
            for i, f in zip(need, self.encode([images[i] for i in need])):
                feats[i] = f
        return feats

    def encode(self, images: Sequence[Any]) -> list:
        """(tokens_per_image, hidden) features per image, from the cache or the tower (the
        images missing from the cache go through it together)."""
        import mlx.core as mx

        found = {img.key: f for img in images if (f := self.cache.get(img.key)) is not None}
        todo = list({img.key: img for img in images if img.key not in found}.values())
        if todo and self.layout is not None:
            for img in todo:
                found[img.key] = f = self._block_embeddings(img.image)
                self.cache.put(img.key, f)
            self.images_encoded += len(todo)
        elif todo:
            # evaluated per image: a cached array must hold no pending op of this thread's stream
            per_image = [mx.contiguous(f.astype(self._text_dtype())) for f in self._tower_features(todo)]
            for img, f in zip(todo, per_image):
                if f.shape[0] != self.tokens_for(img):
                    raise EngineError(f"the vision tower gave {f.shape[0]} feature positions for an image, "
                                      f"the prompt holds {self.tokens_for(img)}")
            mx.eval(per_image)
            for img, f in zip(todo, per_image):
                found[img.key] = f
                self.cache.put(img.key, f)
            self.images_encoded += len(todo)
        return [found[img.key] for img in images]

    def _block_embeddings(self, image: Any) -> Any:
        """(len(block), hidden): a layout block's token embeddings with the image's features
        over its feature positions, evaluated."""
        import mlx.core as mx
        import numpy as np

        block = self.layout.block(image)
        where = np.flatnonzero(np.asarray(block) == self.feature_token_id)
        feats = self.layout.features(image).astype(self._text_dtype())
        if feats.shape[0] != len(where):
            raise EngineError(f"the vision tower gave {feats.shape[0]} feature positions for an image, "
                              f"its block holds {len(where)}")
        out = self.embed_tokens(mx.array(block)).astype(self._text_dtype())
        out[mx.array(where)] = feats
        out = mx.contiguous(out)
        mx.eval(out)
        return out

    def _tower_features(self, images: Sequence[Any]) -> Sequence[Any]:
        """(positions, hidden) per image: a fixed-size family stacks the pixels, a dynamic one
        (``towers.encode_images``) takes the images as they are."""
        import mlx.core as mx
        import numpy as np

        if hasattr(self.towers, "encode_images"):
            return self.towers.encode_images([img.image for img in images])
        pixels = mx.array(np.stack([self.processing(img.image) for img in images]))
        feats = self.towers.forward(pixels.astype(self.towers.pixel_dtype))
        return [feats[i] for i in range(len(images))]

    def embed(self, ids: Sequence[int], start: int, spans: Sequence[tuple[int, int]], feats: Sequence[Any]) -> Any:
        """(len(ids), hidden) input embeddings of prompt positions ``start .. start+len(ids)``."""
        return self._splice(ids, start, spans, feats, self.embed_tokens, 0)

    def deepstack(self, ids: Sequence[int], start: int, spans: Sequence[tuple[int, int]],
                  feats: Sequence[Any]) -> list | None:
        """Per deepstack level (vision/deepstack.py), (len(ids), hidden): the level's features at
        the image positions of prompt positions ``start .. start+len(ids)``, zero elsewhere; None
        when no image is in them (nothing to add, and the features may not be at hand)."""
        import mlx.core as mx

        if not any(s < start + len(ids) and s + n > start for s, n in spans):
            return None

        def zeros(tokens: Any) -> Any:
            return mx.zeros((tokens.shape[0], self._hidden(feats)), dtype=self._text_dtype())

        return [self._splice(ids, start, spans, feats, zeros, level + 1) for level in range(self.deepstack_levels)]

    def _hidden(self, feats: Sequence[Any]) -> int:
        width = next(f.shape[-1] for f in feats if f is not None)
        return width // (1 + self.deepstack_levels)

    def _part(self, f: Any, level: int) -> Any:
        """Level 0 (the features spliced into the input) or a deepstack level of an image's
        features, which such a family stores side by side: (positions, (1 + levels) * hidden)."""
        if not self.deepstack_levels:
            return f
        width = f.shape[-1] // (1 + self.deepstack_levels)
        return f[:, level * width : (level + 1) * width]

    def _splice(self, ids: Sequence[int], start: int, spans: Sequence[tuple[int, int]], feats: Sequence[Any],
                text: Any, level: int) -> Any:
        """``text(token ids)`` rows for the text, the image features (``level``) over the spans."""
        import mlx.core as mx

        end = start + len(ids)
        pieces, pos = [], start
        for (s, n), f in zip(spans, feats):
            a, b = max(s, pos), min(s + n, end)
            if a >= b:
                continue
            if f is None:
                raise EngineError("image features were not computed for a span being prefilled")
            if a > pos:
                pieces.append(text(mx.array(ids[pos - start : a - start])))
            pieces.append(self._part(f, level)[a - s : b - s])
            pos = b
        if pos < end:
            pieces.append(text(mx.array(ids[pos - start :])))
        return mx.concatenate(pieces) if len(pieces) > 1 else pieces[0]

    def _text_dtype(self) -> Any:
        """What the token embeddings come out as: the features are spliced in as that."""
        if self._dtype is None:
            import mlx.core as mx

            self._dtype = self.embed_tokens(mx.array([0])).dtype
        return self._dtype

# -- loading ----------------------------------------------------------------------------------------


def load_vision(path: Path, config: dict, text_model: Any, tokenizer: Any, dtype: Any = None,
                cache_bytes: int = DEFAULT_CACHE_BYTES) -> VisionAdapter | None:
    """The adapter for a model folder whose config has a ``vision_config``; None (text only,
    logged) for a model type this module cannot run. ``dtype``: convert the vision weights to
    it (as the text tower was), or None to keep them as stored."""
    from mlxctl.vision.families import LOADERS

    model_type = config.get("model_type")
    if model_type not in LOADERS:
        log.warning("%s: the vision tower of %r models is not supported; images will be refused",
                    Path(path).name, model_type)
        return None
    from mlx_lm.utils import does_model_support_input_embeddings

    embed = _embed_tokens(text_model)
    if embed is None or not does_model_support_input_embeddings(text_model):
        log.warning("%s: the text tower takes no input embeddings; images will be refused", Path(path).name)
        return None
    try:
        parts = LOADERS[model_type](Path(path), config, tokenizer, dtype)
    except (KeyError, ValueError, TypeError) as exc:
        raise ModelFormatError(f"cannot load the vision tower of {Path(path).name}: {type(exc).__name__}: {exc}") from None
    adapter = VisionAdapter(embed_tokens=embed, cache_bytes=cache_bytes, model_type=model_type, **parts)
    if adapter.mrope_sections is not None:
        from mlxctl.vision.mrope import install

        try:
            adapter.rope = install(text_model, adapter.mrope_sections, adapter.mrope_interleaved)
        except ValueError as exc:
            raise ModelFormatError(f"cannot load the vision tower of {Path(path).name}: {exc}") from None
        if adapter.deepstack_levels:
            from mlxctl.vision.deepstack import install as install_deepstack

            install_deepstack(text_model, adapter.deepstack_levels, adapter.rope)
    return adapter


def _embed_tokens(model: Any) -> Any:
    """The text tower's token embedding layer (mlx-lm keeps it at one of these paths)."""
    for path in ("language_model.model.embed_tokens", "model.embed_tokens", "language_model.embed_tokens",
                 "model.language_model.embed_tokens"):
        obj = model
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is not None:
            return obj
    return None
