"""Qwen3-VL (``qwen3_vl``): Qwen2.5-VL's image path (vision/qwen_vl.py: smart_resize, here to
multiples of 32 with 16 px patches, the 2x2 merge, the same placeholders and 3-D positions) with
a ViT that has learned position embeddings and no windows, interleaved mrope in the text tower
(mlx-lm's qwen3), and deepstack: the tower's inner layers ``deepstack_visual_indexes`` each give
a second set of merged features, added to the text tower's hidden states at the image positions
after its first layers (vision/deepstack.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mlxctl.vision.qwen_vl import QwenImageProcessing, QwenVLTowers, qwen_parts


class Qwen3VLTowers(QwenVLTowers):
    """mlx-vlm's Qwen3-VL vision tower; each image's features are its merged features and its
    deepstack levels side by side: (positions, (1 + levels) * hidden)."""

    def run(self, pixels: Any, grid_thw: Any) -> Any:
        import mlx.core as mx

        feats, deepstack = self.tower(pixels, grid_thw)
        return mx.concatenate([feats, *deepstack], axis=-1)


def load_qwen3_vl(path: Path, config: dict, tokenizer: Any, dtype: Any) -> dict:
    from mlx_vlm.models.qwen3_vl.config import VisionConfig
    from mlx_vlm.models.qwen3_vl.vision import VisionModel

    from mlxctl.vision.families import load_tower

    vision_cfg = VisionConfig.from_dict({**config["vision_config"], "model_type": "qwen3_vl"})
    tower = VisionModel(vision_cfg)
    load_tower(path, config, tower, ("vision_tower.", "visual."), dtype)
    processing = QwenImageProcessing.from_folder(path)
    if processing.merge_size != vision_cfg.spatial_merge_size or processing.patch_size != vision_cfg.patch_size:
        raise ValueError("preprocessor_config.json's patch/merge sizes differ from the vision tower's")
    return {"towers": Qwen3VLTowers(tower, processing), **qwen_parts(config, tokenizer, processing),
            "deepstack_levels": len(vision_cfg.deepstack_visual_indexes)}
