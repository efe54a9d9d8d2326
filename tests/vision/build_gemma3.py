"""A Gemma-3-layout test model: a tiny seeded random Gemma 3 text tower and SigLIP vision tower.

Laid out as an mlx-community Gemma 3 checkpoint (``language_model.*``, ``vision_tower.*``,
``multi_modal_projector.*``; ``text_config`` and ``vision_config``; ``<start_of_image>``,
``<image_soft_token>`` and ``<end_of_image>`` in the tokenizer, here SmolLM2's with those added).
It goes through the whole Gemma 3 image path; it cannot see or speak (every weight is random).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

IMAGE_SIZE = 64
PATCH_SIZE = 8
TOKENS_PER_IMAGE = 16  # the 8x8 patches average-pooled 2x2
MARKERS = ("<start_of_image>", "<image_soft_token>", "<end_of_image>")


def build_gemma3(text_folder: Path, out: Path, seed: int = 0) -> Path:
    """Write the test model to ``out``, with the tokenizer of the SmolLM2 folder ``text_folder``."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models import gemma3 as lm_gemma3
    from mlx_vlm.models.gemma3.config import ModelConfig, TextConfig, VisionConfig
    from mlx_vlm.models.gemma3.gemma3 import Gemma3MultiModalProjector
    from mlx_vlm.models.gemma3.vision import VisionModel

    out.mkdir(parents=True, exist_ok=True)
    begin, soft, end = _add_tokens(text_folder, out)
    vocab = end + 1
    text_config = {"model_type": "gemma3_text", "hidden_size": 64, "num_hidden_layers": 2,
                   "intermediate_size": 128, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
                   "query_pre_attn_scalar": 32, "sliding_window": 512, "sliding_window_pattern": 2,
                   "rms_norm_eps": 1e-6, "mm_tokens_per_image": TOKENS_PER_IMAGE, "max_position_embeddings": 4096,
                   "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0}
    vision_config = {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64,
                     "num_hidden_layers": 2, "num_attention_heads": 2, "image_size": IMAGE_SIZE,
                     "patch_size": PATCH_SIZE, "num_channels": 3, "layer_norm_eps": 1e-6}
    config = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "vocab_size": vocab,
              "image_token_index": soft, "boi_token_index": begin, "eoi_token_index": end,
              "mm_tokens_per_image": TOKENS_PER_IMAGE, "text_config": text_config, "vision_config": vision_config}

    mx.random.seed(seed)
    text = lm_gemma3.Model(lm_gemma3.ModelArgs.from_dict(json.loads(json.dumps(config))))
    vision = VisionModel(VisionConfig.from_dict(vision_config))
    model_config = ModelConfig(text_config=TextConfig.from_dict(text_config),
                               vision_config=VisionConfig.from_dict(vision_config), model_type="gemma3")
    projector = Gemma3MultiModalProjector(model_config)
    projector.mm_input_projection_weight = mx.random.normal(projector.mm_input_projection_weight.shape) * 0.1
    weights = dict(tree_flatten(text.parameters()))
    weights |= {f"vision_tower.{k}": v for k, v in tree_flatten(vision.parameters())}
    weights |= {f"multi_modal_projector.{k}": v for k, v in tree_flatten(projector.parameters())}
    mx.save_safetensors(str(out / "model.safetensors"), {k: v.astype(mx.float32) for k, v in weights.items()},
                        metadata={"format": "mlx"})
    (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "Gemma3ImageProcessor", "processor_class": "Gemma3Processor",
        "do_resize": True, "size": {"height": IMAGE_SIZE, "width": IMAGE_SIZE}, "resample": 2,
        "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
        "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "do_convert_rgb": True,
        "do_pan_and_scan": False}, indent=2))
    (out / "processor_config.json").write_text(json.dumps({
        "processor_class": "Gemma3Processor", "image_seq_length": TOKENS_PER_IMAGE,
        "boi_token": MARKERS[0], "image_token": MARKERS[1], "eoi_token": MARKERS[2]}, indent=2))
    shutil.copy(text_folder / "generation_config.json", out / "generation_config.json")
    return out


def _add_tokens(text_folder: Path, out: Path) -> tuple[int, int, int]:
    """Copy the tokenizer with Gemma 3's three image markers added; returns their ids."""
    from tokenizers import AddedToken, Tokenizer

    tok = Tokenizer.from_file(str(text_folder / "tokenizer.json"))
    tok.add_special_tokens([AddedToken(m, special=True, normalized=False) for m in MARKERS])
    tok.save(str(out / "tokenizer.json"))
    cfg = json.loads((text_folder / "tokenizer_config.json").read_text())
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2))
    return tuple(tok.token_to_id(m) for m in MARKERS)
