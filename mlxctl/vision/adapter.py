"""VisionAdapter: a LLaVA-layout model's vision tower + projector, next to its text tower.

The text tower is loaded by mlx-lm like any other model (it maps ``llava`` onto its text-only
wrapper, which drops the vision weights); this module loads the rest with mlx-vlm's LLaVA
classes from the same folder, and serves the engine:

- ``expand``: each image placeholder token of a prompt becomes ``tokens_per_image`` of them,
  one per image feature position, and their spans are noted;
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

SUPPORTED_TYPES = ("llava",)
DEFAULT_CACHE_BYTES = 512 * 1024 * 1024
_VISION_PREFIXES = ("vision_tower.", "multi_modal_projector.")


class FeatureCache(ByteLRU):
    """Image content key -> evaluated features (an mx.array), least recently used out first,
    within a byte budget. Used from the engine thread; ``stats`` may be read from any."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES):
        super().__init__(max_bytes)


class VisionAdapter:
    def __init__(self, tower: Any, projector: Any, processing: ImageProcessing, embed_tokens: Any, *,
                 image_token: str, image_token_id: int, tokens_per_image: int, feature_layer: Any = -2,
                 strategy: str = "default", cache_bytes: int = DEFAULT_CACHE_BYTES, model_type: str = "llava"):
        self.tower, self.projector, self.processing = tower, projector, processing
        self.embed_tokens = embed_tokens
        self.image_token, self.image_token_id = image_token, image_token_id
        self.tokens_per_image = tokens_per_image
        self.feature_layer, self.strategy = feature_layer, strategy
        self.model_type = model_type
        self.cache = FeatureCache(cache_bytes)
        self.videos = VideoCache()  # decoded video frames, filled by the API layer (vision/fetch.py)
        self.images_encoded = 0
        self._dtype = None

    # -- caller side (any thread) ---------------------------------------------------------------

    def expand(self, tokens: Sequence[int], num_images: int) -> tuple[list[int], tuple[tuple[int, int], ...]]:
        """The prompt with each placeholder token repeated ``tokens_per_image`` times, and the
        (start, length) span of every image. The placeholders must match the images one to one."""
        marks = [i for i, t in enumerate(tokens) if t == self.image_token_id]
        if len(marks) != num_images:
            from mlxctl.errors import BadInputError

            raise BadInputError(f"the prompt marks {len(marks)} image(s) with {self.image_token!r} but "
                                f"{num_images} image(s) were given")
        out: list[int] = []
        spans = []
        prev = 0
        for mark in marks:
            out += tokens[prev:mark]
            spans.append((len(out), self.tokens_per_image))
            out += [self.image_token_id] * self.tokens_per_image
            prev = mark + 1
        out += tokens[prev:]
        return out, tuple(spans)

    def stats(self) -> dict:
        return {"model_type": self.model_type, "tokens_per_image": self.tokens_per_image,
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
        import numpy as np

        found = {img.key: f for img in images if (f := self.cache.get(img.key)) is not None}
        todo = list({img.key: img for img in images if img.key not in found}.values())
        if todo:
            pixels = mx.array(np.stack([self.processing(img.image) for img in todo]))
            feats = self._forward(pixels.astype(self._pixel_dtype())).astype(self._text_dtype())
            if feats.shape[1] != self.tokens_per_image:
                raise EngineError(f"the vision tower gave {feats.shape[1]} feature positions per image, "
                                  f"the prompt holds {self.tokens_per_image}")
            # evaluated per image: a cached array must hold no pending op of this thread's stream
            per_image = [mx.contiguous(feats[i]) for i in range(len(todo))]
            mx.eval(per_image)
            for img, f in zip(todo, per_image):
                found[img.key] = f
                self.cache.put(img.key, f)
            self.images_encoded += len(todo)
        return [found[img.key] for img in images]

    def embed(self, ids: Sequence[int], start: int, spans: Sequence[tuple[int, int]], feats: Sequence[Any]) -> Any:
        """(len(ids), hidden) input embeddings of prompt positions ``start .. start+len(ids)``."""
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
                pieces.append(self.embed_tokens(mx.array(ids[pos - start : a - start])))
            pieces.append(f[a - s : b - s])
            pos = b
        if pos < end:
            pieces.append(self.embed_tokens(mx.array(ids[pos - start :])))
        return mx.concatenate(pieces) if len(pieces) > 1 else pieces[0]

    def _forward(self, pixels: Any) -> Any:
        """LLaVA's image features: the chosen hidden layer(s) of the tower, CLS dropped for the
        "default" strategy, through the projector (mlx-vlm's llava.Model does the same)."""
        import mlx.core as mx

        *_, hidden = self.tower(pixels, output_hidden_states=True)
        layers = self.feature_layer if isinstance(self.feature_layer, (list, tuple)) else [self.feature_layer]
        chosen = [hidden[i] for i in layers]
        if self.strategy == "default":
            chosen = [h[:, 1:] for h in chosen]
        return self.projector(mx.concatenate(chosen, axis=-1) if len(chosen) > 1 else chosen[0])

    def _text_dtype(self) -> Any:
        """What the token embeddings come out as: the features are spliced in as that."""
        if self._dtype is None:
            import mlx.core as mx

            self._dtype = self.embed_tokens(mx.array([0])).dtype
        return self._dtype

    def _pixel_dtype(self) -> Any:
        return self.tower.vision_model.embeddings.patch_embedding.weight.dtype


# -- loading ----------------------------------------------------------------------------------------


def load_vision(path: Path, config: dict, text_model: Any, tokenizer: Any, dtype: Any = None,
                cache_bytes: int = DEFAULT_CACHE_BYTES) -> VisionAdapter | None:
    """The adapter for a model folder whose config has a ``vision_config``; None (text only,
    logged) for a model type this module cannot run. ``dtype``: convert the vision weights to
    it (as the text tower was), or None to keep them as stored."""
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_TYPES:
        log.warning("%s: the vision tower of %r models is not supported; images will be refused",
                    Path(path).name, model_type)
        return None
    from mlx_lm.utils import does_model_support_input_embeddings

    embed = _embed_tokens(text_model)
    if embed is None or not does_model_support_input_embeddings(text_model):
        log.warning("%s: the text tower takes no input embeddings; images will be refused", Path(path).name)
        return None
    try:
        return _load_llava(Path(path), config, embed, tokenizer, dtype, cache_bytes)
    except (KeyError, ValueError, TypeError) as exc:
        raise ModelFormatError(f"cannot load the vision tower of {Path(path).name}: {type(exc).__name__}: {exc}") from None


def _load_llava(path: Path, config: dict, embed: Any, tokenizer: Any, dtype: Any, cache_bytes: int) -> VisionAdapter:
    import mlx.core as mx
    from mlx_vlm.models.llava.config import ModelConfig, TextConfig, VisionConfig
    from mlx_vlm.models.llava.llava import LlavaMultiModalProjector
    from mlx_vlm.models.llava.vision import VisionModel

    vision_cfg = VisionConfig.from_dict({"model_type": "clip_vision_model", **config["vision_config"]})
    text_cfg = TextConfig.from_dict({"model_type": "llama", **config.get("text_config", {})})
    model_cfg = ModelConfig.from_dict({**config, "text_config": text_cfg, "vision_config": vision_cfg})
    tower, projector = VisionModel(vision_cfg), LlavaMultiModalProjector(model_cfg)
    weights = _vision_weights(path)
    tower_w = tower.sanitize({k.removeprefix("vision_tower."): v for k, v in weights.items()
                              if k.startswith("vision_tower.")})
    proj_w = {k.removeprefix("multi_modal_projector."): v for k, v in weights.items()
              if k.startswith("multi_modal_projector.")}
    if not tower_w or not proj_w:
        raise KeyError("the folder has no vision_tower.* / multi_modal_projector.* weights")
    for module, w in ((tower, tower_w), (projector, proj_w)):
        _quantize_like(module, w, config.get("quantization"))
        module.load_weights(list(w.items()), strict=True)
        if dtype is not None:
            from mlxctl.models.dequantize import dequantize_model

            dequantize_model(module, dtype)
            module.set_dtype(dtype)
        module.eval()
        mx.eval(module.parameters())

    token_id = config.get("image_token_index", config.get("image_token_id"))
    if token_id is None:
        raise KeyError("image_token_index")
    token = _token_text(path, tokenizer, int(token_id))
    return VisionAdapter(tower, projector, ImageProcessing.from_folder(path, vision_cfg.image_size), embed,
                         image_token=token, image_token_id=int(token_id),
                         tokens_per_image=_tokens_per_image(vision_cfg, model_cfg.vision_feature_select_strategy),
                         feature_layer=model_cfg.vision_feature_layer,
                         strategy=model_cfg.vision_feature_select_strategy, cache_bytes=cache_bytes,
                         model_type=config.get("model_type", "llava"))


def _vision_weights(path: Path) -> dict:
    import mlx.core as mx

    out = {}
    for file in sorted(path.glob("*.safetensors")):
        for key, value in mx.load(str(file)).items():
            key = key.removeprefix("model.")  # transformers 5 checkpoints nest everything under model.
            if key.startswith(_VISION_PREFIXES):
                out[key] = value
    return out


def _quantize_like(module: Any, weights: dict, quantization: dict | None) -> None:
    """Quantise the layers the checkpoint stores quantised (their ``.scales`` are present)."""
    if not quantization or not any(k.endswith(".scales") for k in weights):
        return
    import mlx.nn as nn

    nn.quantize(module, group_size=quantization.get("group_size", 64), bits=quantization.get("bits", 4),
                class_predicate=lambda p, m: hasattr(m, "to_quantized") and f"{p}.scales" in weights)


def _tokens_per_image(vision_cfg: Any, strategy: str) -> int:
    """Feature positions per image: one per patch, plus CLIP's class token, less the first
    position under the "default" strategy (mlx-vlm's and transformers' LLaVA agree)."""
    positions = (vision_cfg.image_size // vision_cfg.patch_size) ** 2
    positions += vision_cfg.model_type == "clip_vision_model"
    return positions - (strategy == "default")


def _token_text(path: Path, tokenizer: Any, token_id: int) -> str:
    """The image placeholder's text, checked to encode back to that one token."""
    import json

    proc = path / "processor_config.json"
    text = json.loads(proc.read_text()).get("image_token") if proc.is_file() else None
    text = text or tokenizer.decode([token_id], skip_special_tokens=False)
    if list(tokenizer.encode(text, add_special_tokens=False)) != [token_id]:
        raise ValueError(f"the image token {text!r} does not encode to the single token {token_id}")
    return text


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
