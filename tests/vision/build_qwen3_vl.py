"""A Qwen3-VL-layout test model: a tiny seeded random qwen3 text tower (interleaved mrope) and
Qwen3-VL vision tower (two deepstack levels), with SmolLM2's tokenizer and Qwen's vision markers.

Laid out as an mlx-community Qwen3-VL checkpoint (``text_config`` and ``vision_config``,
``language_model.*`` and ``vision_tower.*`` weights, a Qwen2VLImageProcessor config with 16 px
patches and a ``size`` of shortest/longest edge in pixels). Every weight is random: no Qwen3
text tower is available here (SmolLM2's cannot stand in: qwen3 normalises q and k per head).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.vision.build_qwen_vl import MARKERS, _add_tokens

MAX_PIXELS = 32 * 32 * 16
VISION = {"model_type": "qwen3_vl", "depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
          "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2, "in_channels": 3,
          "num_position_embeddings": 64, "deepstack_visual_indexes": [0, 1], "hidden_act": "gelu_pytorch_tanh"}


def build_qwen3_vl(text_folder: Path, out: Path, seed: int = 0) -> Path:
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models import qwen3_vl
    from mlx_vlm.models.qwen3_vl.config import VisionConfig
    from mlx_vlm.models.qwen3_vl.vision import VisionModel

    out.mkdir(parents=True, exist_ok=True)
    ids = _add_tokens(text_folder, out)
    text = {"model_type": "qwen3_vl_text", "hidden_size": 64, "num_hidden_layers": 3, "intermediate_size": 128,
            "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32, "rms_norm_eps": 1e-6,
            "vocab_size": max(ids.values()) + 1, "max_position_embeddings": 4096, "rope_theta": 5000000.0,
            "tie_word_embeddings": True,
            "rope_scaling": {"rope_type": "default", "mrope_section": [6, 5, 5], "mrope_interleaved": True}}
    config = {"architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl",
              "vision_start_token_id": ids["<|vision_start|>"], "vision_end_token_id": ids["<|vision_end|>"],
              "image_token_id": ids["<|image_pad|>"], "video_token_id": ids["<|video_pad|>"],
              "tie_word_embeddings": True, "text_config": text,
              "vision_config": {**VISION, "out_hidden_size": text["hidden_size"]}}
    assert len(MARKERS) == 4
    mx.random.seed(seed)
    model = qwen3_vl.Model(qwen3_vl.ModelArgs.from_dict(json.loads(json.dumps(config))))
    vision = VisionModel(VisionConfig.from_dict(config["vision_config"]))
    weights = dict(tree_flatten(model.parameters()))
    weights |= {f"vision_tower.{k}": v for k, v in tree_flatten(vision.parameters())}
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "Qwen2VLImageProcessorFast", "processor_class": "Qwen3VLProcessor",
        "size": {"shortest_edge": 32 * 32 * 2, "longest_edge": MAX_PIXELS}, "patch_size": 16,
        "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]},
        indent=2))
    shutil.copy(text_folder / "generation_config.json", out / "generation_config.json")
    return out
