"""A Mistral-3-layout test model: SmolLM2's real text tower (a llama, as Mistral 3's is), a tiny
seeded random Pixtral encoder and Mistral 3 projector (patch merger, spatial_merge_size 2).

Laid out as an mlx-community Mistral 3 checkpoint (``language_model.*``,
``vision_tower.vision_model.*``, ``multi_modal_projector.*``; ``text_config`` and a ``pixtral``
``vision_config``; PixtralProcessor's ``[IMG]``, ``[IMG_BREAK]``, ``[IMG_END]`` added to SmolLM2's
tokenizer). Patches are 8 pixels, merged 2x2: one prompt position per 16x16 pixels; images are
scaled down to fit 64 pixels. ``model_type="pixtral"`` writes Pixtral's layout instead (LLaVA's
projector, no merging).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.vision.build_idefics3 import add_tokens, extended_text

PATCH_SIZE = 8
LONGEST_EDGE = 64
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
MARKERS = ("[IMG]", "[IMG_BREAK]", "[IMG_END]")


def build_mistral3(text_folder: Path, out: Path, seed: int = 0, model_type: str = "mistral3") -> Path:
    """Write the test model to ``out`` from the SmolLM2 folder ``text_folder``; returns ``out``."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_vlm.models.mistral3.config import ModelConfig, TextConfig
    from mlx_vlm.models.mistral3.mistral3 import Mistral3MultiModalProjector
    from mlx_vlm.models.pixtral.config import ModelConfig as PixtralConfig
    from mlx_vlm.models.pixtral.config import TextConfig as PixtralText
    from mlx_vlm.models.pixtral.config import VisionConfig
    from mlx_vlm.models.pixtral.pixtral import LlavaMultiModalProjector
    from mlx_vlm.models.pixtral.vision import VisionModel

    merge = 2 if model_type == "mistral3" else 1
    out.mkdir(parents=True, exist_ok=True)
    ids = add_tokens(text_folder, out, MARKERS)
    text, source_config = extended_text(text_folder, len(MARKERS))
    weights = {f"language_model.{k}": v for k, v in text.items()}
    embed = weights["language_model.lm_head.weight"] = text["model.embed_tokens.weight"]  # SmolLM2 ties them

    text_config = {k: v for k, v in source_config.items() if k not in ("quantization", "architectures")}
    text_config.update(model_type="mistral", vocab_size=embed.shape[0], tie_word_embeddings=False)
    vision_config = {"model_type": "pixtral", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 2, "head_dim": 16, "image_size": LONGEST_EDGE, "patch_size": PATCH_SIZE,
                     "num_channels": 3, "rope_theta": 10000.0}
    config = {"architectures": ["Mistral3ForConditionalGeneration"], "model_type": model_type,
              "image_token_index": ids[0], "spatial_merge_size": merge, "vision_feature_layer": -1,
              "multimodal_projector_bias": False, "projector_hidden_act": "gelu", "vocab_size": embed.shape[0],
              "text_config": text_config, "vision_config": vision_config}

    mx.random.seed(seed)
    vision_cfg = VisionConfig.from_dict(vision_config)
    tower = VisionModel(vision_cfg)
    if merge > 1:
        projector = Mistral3MultiModalProjector(ModelConfig(text_config=TextConfig.from_dict(text_config),
                                                            vision_config=vision_cfg, model_type=model_type))
    else:
        projector = LlavaMultiModalProjector(PixtralConfig(text_config=PixtralText.from_dict(text_config),
                                                           vision_config=vision_cfg, model_type=model_type))
    weights |= {f"vision_tower.{k}": v for k, v in tree_flatten(tower.parameters())}
    weights |= {f"multi_modal_projector.{k}": v for k, v in tree_flatten(projector.parameters())}
    mx.save_safetensors(str(out / "model.safetensors"), {k: v.astype(mx.float32) for k, v in weights.items()},
                        metadata={"format": "mlx"})
    (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "PixtralImageProcessor", "processor_class": "PixtralProcessor",
        "do_convert_rgb": True, "do_resize": True, "size": {"longest_edge": LONGEST_EDGE}, "resample": 3,
        "patch_size": PATCH_SIZE, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
        "image_mean": CLIP_MEAN, "image_std": CLIP_STD}, indent=2))
    (out / "processor_config.json").write_text(json.dumps({
        "processor_class": "PixtralProcessor", "image_token": MARKERS[0], "image_break_token": MARKERS[1],
        "image_end_token": MARKERS[2], "patch_size": PATCH_SIZE, "spatial_merge_size": merge}, indent=2))
    shutil.copy(text_folder / "generation_config.json", out / "generation_config.json")
    return out
