"""The vision towers of each supported family, loaded with mlx-vlm's classes.

Each loader reads a model folder (Hugging Face / mlx-community layout: ``vision_tower.*`` and
``multi_modal_projector.*`` weights next to the text tower's) and returns what
:class:`~mlxctl.vision.adapter.VisionAdapter` needs: the towers, the image preprocessing, the
placeholder token and how it expands.

- **LLaVA** (``llava``): CLIP or SigLIP tower, the chosen hidden layer(s), an MLP projector; each
  ``<image>`` becomes one position per patch.
- **Gemma 3** (``gemma3``): SigLIP tower, average-pooled to ``mm_tokens_per_image`` (256) and
  projected; each ``<start_of_image>`` becomes ``\\n\\n<start_of_image>``, the soft-token
  positions and ``<end_of_image>\\n\\n``, as Gemma 3's processor writes it. The features are
  divided by sqrt(hidden): the text tower scales every input embedding by it. (Gemma 3 was
  trained with bidirectional attention inside an image; the text tower here is causal
  throughout, as in mlx-vlm.)
- **Idefics3 / SmolVLM** (``idefics3``, ``smolvlm``): tiles + a global image through SigLIP,
  pixel shuffle, a linear projector (vision/idefics3.py).
- **Pixtral / Mistral 3** (``pixtral``, ``mistral3``): Pixtral's encoder at the image's own size,
  Mistral 3's 2x2 patch merger + projector (Pixtral: LLaVA's projector), ``[IMG_BREAK]`` per row
  (vision/pixtral.py).
- **Qwen2.5-VL** (``qwen2_5_vl``): dynamic resolution and 3-D rotary positions (vision/qwen_vl.py);
  **Qwen3-VL** (``qwen3_vl``): the same with interleaved mrope and deepstack (vision/qwen3_vl.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mlxctl.vision.idefics3 import load_idefics3
from mlxctl.vision.pixtral import load_mistral3, load_pixtral
from mlxctl.vision.preprocess import ImageProcessing
from mlxctl.vision.qwen3_vl import load_qwen3_vl
from mlxctl.vision.qwen_vl import load_qwen2_5_vl

_VISION_PREFIXES = ("vision_tower.", "multi_modal_projector.")


class LlavaTowers:
    def __init__(self, tower: Any, projector: Any, feature_layer: Any, strategy: str):
        self.tower, self.projector = tower, projector
        self.feature_layer, self.strategy = feature_layer, strategy

    @property
    def pixel_dtype(self) -> Any:
        return self.tower.vision_model.embeddings.patch_embedding.weight.dtype

    def forward(self, pixels: Any) -> Any:
        """The chosen hidden layer(s) of the tower, CLS dropped for the "default" strategy,
        through the projector (mlx-vlm's llava.Model does the same)."""
        import mlx.core as mx

        *_, hidden = self.tower(pixels, output_hidden_states=True)
        layers = self.feature_layer if isinstance(self.feature_layer, (list, tuple)) else [self.feature_layer]
        chosen = [hidden[i] for i in layers]
        if self.strategy == "default":
            chosen = [h[:, 1:] for h in chosen]
        return self.projector(mx.concatenate(chosen, axis=-1) if len(chosen) > 1 else chosen[0])


class Gemma3Towers:
    def __init__(self, tower: Any, projector: Any, text_hidden: int):
        self.tower, self.projector = tower, projector
        self.scale = text_hidden ** -0.5

    @property
    def pixel_dtype(self) -> Any:
        return self.tower.vision_model.embeddings.patch_embedding.weight.dtype

    def forward(self, pixels: Any) -> Any:
        hidden, *_ = self.tower(pixels, output_hidden_states=True)
        return self.projector(hidden) * self.scale


def load_llava(path: Path, config: dict, tokenizer: Any, dtype: Any) -> dict:
    from mlx_vlm.models.llava.config import ModelConfig, TextConfig, VisionConfig
    from mlx_vlm.models.llava.llava import LlavaMultiModalProjector
    from mlx_vlm.models.llava.vision import VisionModel

    vision_cfg = VisionConfig.from_dict({"model_type": "clip_vision_model", **config["vision_config"]})
    text_cfg = TextConfig.from_dict({"model_type": "llama", **config.get("text_config", {})})
    model_cfg = ModelConfig.from_dict({**config, "text_config": text_cfg, "vision_config": vision_cfg})
    tower, projector = VisionModel(vision_cfg), LlavaMultiModalProjector(model_cfg)
    _load_modules(path, config, tower, projector, dtype)
    token_id = config.get("image_token_index", config.get("image_token_id"))
    if token_id is None:
        raise KeyError("image_token_index")
    strategy = model_cfg.vision_feature_select_strategy
    return {"towers": LlavaTowers(tower, projector, model_cfg.vision_feature_layer, strategy),
            "processing": ImageProcessing.from_folder(path, vision_cfg.image_size),
            "image_token": _token_text(path, tokenizer, int(token_id)), "image_token_id": int(token_id),
            "tokens_per_image": _llava_positions(vision_cfg, strategy)}


def load_gemma3(path: Path, config: dict, tokenizer: Any, dtype: Any) -> dict:
    from mlx_vlm.models.gemma3.config import ModelConfig, TextConfig, VisionConfig
    from mlx_vlm.models.gemma3.gemma3 import Gemma3MultiModalProjector
    from mlx_vlm.models.gemma3.vision import VisionModel

    text = {"model_type": "gemma3_text", "hidden_size": 2560, "num_hidden_layers": 34, "intermediate_size": 10240,
            **config.get("text_config", {})}
    text_cfg = TextConfig.from_dict(text)
    vision_cfg = VisionConfig.from_dict({"model_type": "siglip_vision_model", **config["vision_config"]})
    model_cfg = ModelConfig.from_dict({**config, "text_config": text_cfg, "vision_config": vision_cfg})
    tower, projector = VisionModel(vision_cfg), Gemma3MultiModalProjector(model_cfg)
    _load_modules(path, config, tower, projector, dtype)
    soft = int(config.get("image_token_index", 262144))
    begin, end = int(config.get("boi_token_index", 255999)), int(config.get("eoi_token_index", 256000))
    gap = list(tokenizer.encode("\n\n", add_special_tokens=False))
    return {"towers": Gemma3Towers(tower, projector, text_cfg.hidden_size),
            "processing": ImageProcessing.from_folder(path, vision_cfg.image_size),
            "image_token": _token_text(path, tokenizer, begin, key="boi_token"), "image_token_id": begin,
            "feature_token_id": soft, "tokens_per_image": text_cfg.mm_tokens_per_image,
            "wrap": ([*gap, begin], [end, *gap])}


LOADERS = {"llava": load_llava, "gemma3": load_gemma3}
LOADERS.update(idefics3=load_idefics3, smolvlm=load_idefics3)  # vision/idefics3.py
LOADERS.update(mistral3=load_mistral3, pixtral=load_pixtral)  # vision/pixtral.py
LOADERS.update(qwen2_5_vl=load_qwen2_5_vl, qwen3_vl=load_qwen3_vl)  # vision/qwen_vl.py, qwen3_vl.py


def _load_modules(path: Path, config: dict, tower: Any, projector: Any, dtype: Any) -> None:
    """Both modules' weights from the folder (quantised where the checkpoint is), converted to
    ``dtype`` when given, evaluated."""
    weights = _vision_weights(path)
    tower_w = tower.sanitize({k.removeprefix("vision_tower."): v for k, v in weights.items()
                              if k.startswith("vision_tower.")})
    proj_w = {k.removeprefix("multi_modal_projector."): v for k, v in weights.items()
              if k.startswith("multi_modal_projector.")}
    if not tower_w or not proj_w:
        raise KeyError("the folder has no vision_tower.* / multi_modal_projector.* weights")
    for module, w in ((tower, tower_w), (projector, proj_w)):
        load_module(module, w, config, dtype)


def load_module(module: Any, weights: dict, config: dict, dtype: Any) -> None:
    """One module's weights (quantised where the checkpoint is), converted to ``dtype`` when
    given, evaluated."""
    import mlx.core as mx

    _quantize_like(module, weights, config.get("quantization"))
    module.load_weights(list(weights.items()), strict=True)
    if dtype is not None:
        from mlxctl.models.dequantize import dequantize_model

        dequantize_model(module, dtype)
        module.set_dtype(dtype)
    module.eval()
    mx.eval(module.parameters())


def _vision_weights(path: Path, prefixes: tuple[str, ...] = _VISION_PREFIXES) -> dict:
    import mlx.core as mx

    out = {}
    for file in sorted(path.glob("*.safetensors")):
        for key, value in mx.load(str(file)).items():
            key = key.removeprefix("model.")  # transformers 5 checkpoints nest everything under model.
            if key.startswith(prefixes):
                out[key] = value
    return out


def load_tower(path: Path, config: dict, tower: Any, prefixes: tuple[str, ...], dtype: Any) -> None:
    """A tower with no separate projector (its weights under one of ``prefixes``)."""
    weights = _vision_weights(path, prefixes)
    found = {k.removeprefix(p): v for k, v in weights.items() for p in prefixes if k.startswith(p)}
    if not found:
        raise KeyError(f"the folder has no {' / '.join(p + '*' for p in prefixes)} weights")
    load_module(tower, tower.sanitize(found), config, dtype)


def _quantize_like(module: Any, weights: dict, quantization: dict | None) -> None:
    """Quantise the layers the checkpoint stores quantised (their ``.scales`` are present)."""
    if not quantization or not any(k.endswith(".scales") for k in weights):
        return
    import mlx.nn as nn

    nn.quantize(module, group_size=quantization.get("group_size", 64), bits=quantization.get("bits", 4),
                class_predicate=lambda p, m: hasattr(m, "to_quantized") and f"{p}.scales" in weights)


def _llava_positions(vision_cfg: Any, strategy: str) -> int:
    """Feature positions per image: one per patch, plus CLIP's class token, less the first
    position under the "default" strategy (mlx-vlm's and transformers' LLaVA agree)."""
    positions = (vision_cfg.image_size // vision_cfg.patch_size) ** 2
    positions += vision_cfg.model_type == "clip_vision_model"
    return positions - (strategy == "default")


def _token_text(path: Path, tokenizer: Any, token_id: int, key: str = "image_token") -> str:
    """The image placeholder's text (``key`` of processor_config.json, else the token decoded),
    checked to encode back to that one token."""
    proc = path / "processor_config.json"
    text = json.loads(proc.read_text()).get(key) if proc.is_file() else None
    text = text or tokenizer.decode([token_id], skip_special_tokens=False)
    if list(tokenizer.encode(text, add_special_tokens=False)) != [token_id]:
        raise ValueError(f"the image token {text!r} does not encode to the single token {token_id}")
    return text
