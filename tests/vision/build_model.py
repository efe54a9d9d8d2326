"""The LLaVA-layout test model: SmolLM2's real text tower, a tiny seeded random vision tower.

No vision-language model ships in a wheel we can install (see ../shared/MODELS.md), so the tests
build one: a folder laid out as a Hugging Face/mlx-community LLaVA checkpoint (``language_model.*``,
``vision_tower.*``, ``multi_modal_projector.*``; config with ``text_config`` and
``vision_config``; a CLIP image processor config; an ``<image>`` token added to the tokenizer).
It goes through the whole image path, but cannot see: the vision weights are random.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

IMAGE_SIZE = 56
PATCH_SIZE = 14
TOKENS_PER_IMAGE = (IMAGE_SIZE // PATCH_SIZE) ** 2  # CLS dropped ("default" feature strategy)
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


def build_llava(text_folder: Path, out: Path, seed: int = 0) -> Path:
    """Write the test model to ``out`` from the SmolLM2 folder ``text_folder``; returns ``out``."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_vlm.models.llava.config import ModelConfig, TextConfig, VisionConfig
    from mlx_vlm.models.llava.llava import LlavaMultiModalProjector
    from mlx_vlm.models.llava.vision import VisionModel

    from mlxctl.models.loader import load_model

    out.mkdir(parents=True, exist_ok=True)
    text = load_model(text_folder, dtype="float32")  # dequantised: the tower is saved as floats
    source_config = json.loads((text_folder / "config.json").read_text())
    image_token = _add_image_token(text_folder, out)

    weights = {f"language_model.{k}": v for k, v in tree_flatten(text.model.parameters())}
    embed = weights["language_model.model.embed_tokens.weight"]
    extra = mx.mean(embed, axis=0, keepdims=True)  # the <image> row: never looked up, rarely sampled
    weights["language_model.model.embed_tokens.weight"] = mx.concatenate([embed, extra])
    vocab = embed.shape[0] + 1
    assert image_token == vocab - 1

    text_config = {k: v for k, v in source_config.items() if k not in ("quantization", "architectures")}
    text_config.update(vocab_size=vocab, tie_word_embeddings=True)
    vision_config = {"model_type": "clip_vision_model", "hidden_size": 64, "intermediate_size": 128,
                     "num_hidden_layers": 2, "num_attention_heads": 4, "image_size": IMAGE_SIZE,
                     "patch_size": PATCH_SIZE, "projection_dim": 64, "num_channels": 3, "layer_norm_eps": 1e-5}
    config = {"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava",
              "image_token_index": image_token, "vision_feature_layer": -2,
              "vision_feature_select_strategy": "default", "projector_hidden_act": "gelu",
              "text_config": text_config, "vision_config": vision_config}

    mx.random.seed(seed)
    vision = VisionModel(VisionConfig.from_dict(vision_config))
    model_config = ModelConfig(text_config=TextConfig.from_dict(text_config),
                               vision_config=VisionConfig.from_dict(vision_config), model_type="llava")
    projector = LlavaMultiModalProjector(model_config)
    weights |= {f"vision_tower.{k}": v for k, v in tree_flatten(vision.parameters())}
    weights |= {f"multi_modal_projector.{k}": v for k, v in tree_flatten(projector.parameters())}
    mx.save_safetensors(str(out / "model.safetensors"), {k: v.astype(mx.float16) for k, v in weights.items()},
                        metadata={"format": "mlx"})

    (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "CLIPImageProcessor", "processor_class": "LlavaProcessor",
        "do_resize": True, "size": {"shortest_edge": IMAGE_SIZE}, "resample": 3,
        "do_center_crop": True, "crop_size": {"height": IMAGE_SIZE, "width": IMAGE_SIZE},
        "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
        "image_mean": CLIP_MEAN, "image_std": CLIP_STD, "do_convert_rgb": True}, indent=2))
    (out / "processor_config.json").write_text(json.dumps({
        "processor_class": "LlavaProcessor", "image_token": "<image>", "patch_size": PATCH_SIZE,
        "vision_feature_select_strategy": "default", "num_additional_image_tokens": 1}, indent=2))
    shutil.copy(text_folder / "generation_config.json", out / "generation_config.json")
    return out


def _add_image_token(text_folder: Path, out: Path) -> int:
    """Copy the tokenizer with ``<image>`` added as a special token; returns its id."""
    from tokenizers import AddedToken, Tokenizer

    tok = Tokenizer.from_file(str(text_folder / "tokenizer.json"))
    tok.add_special_tokens([AddedToken("<image>", special=True, normalized=False)])
    tok.save(str(out / "tokenizer.json"))
    cfg = json.loads((text_folder / "tokenizer_config.json").read_text())
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2))
    return tok.token_to_id("<image>")
