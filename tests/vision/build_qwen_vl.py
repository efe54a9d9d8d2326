"""A Qwen2.5-VL-layout test model: a text tower and a tiny seeded random Qwen2.5-VL vision tower.

Laid out as an mlx-community Qwen2.5-VL checkpoint: a flat config (the text tower's fields at the
top, ``rope_scaling`` of type ``mrope``, a ``vision_config``), ``language_model.*`` and
``vision_tower.*`` weights, a Qwen2VLImageProcessor config and Qwen's ``<|vision_start|>``,
``<|image_pad|>`` and ``<|vision_end|>`` tokens. ``build_qwen_vl`` gives it SmolLM2's real
text tower as a qwen2 one and SmolLM2's tokenizer (those tokens added); ``build_qwen_vl_on`` the
real text tower and tokenizer of an imported Qwen2.5 folder (its tokenizer has them). The vision
tower is random either way: it goes through the whole image path but cannot see.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

MARKERS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")
MAX_PIXELS = 28 * 28 * 16  # at most 16 positions an image: small prompts
VISION = {"model_type": "qwen2_5_vl", "depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
          "patch_size": 14, "spatial_patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
          "window_size": 56, "fullatt_block_indexes": [1], "in_channels": 3, "tokens_per_second": 2}


def build_qwen_vl(text_folder: Path, out: Path, seed: int = 0) -> Path:
    """The SmolLM2 folder ``text_folder``'s real text tower as a qwen2 one (Llama's layout plus
    q/k/v biases, here zero: the same function) and its tokenizer with Qwen's markers added."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    from mlxctl.models.loader import load_model

    out.mkdir(parents=True, exist_ok=True)
    ids = _add_tokens(text_folder, out)
    text = load_model(text_folder, dtype="float32")  # dequantised: the tower is saved as floats
    weights = {f"language_model.{k}": v for k, v in tree_flatten(text.model.parameters())}
    for key in [k for k in weights if k.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight"))]:
        weights[key.removesuffix("weight") + "bias"] = mx.zeros((weights[key].shape[0],))
    embed = weights["language_model.model.embed_tokens.weight"]
    extra = mx.broadcast_to(mx.mean(embed, axis=0, keepdims=True), (len(MARKERS), embed.shape[1]))
    weights["language_model.model.embed_tokens.weight"] = mx.concatenate([embed, extra])  # the markers' rows
    assert max(ids.values()) == embed.shape[0] + len(MARKERS) - 1
    source = json.loads((text_folder / "config.json").read_text())
    config = {k: v for k, v in source.items() if k not in ("quantization", "architectures", "model_type")}
    config.update(vocab_size=embed.shape[0] + len(MARKERS), tie_word_embeddings=True)
    half = config["hidden_size"] // config["num_attention_heads"] // 2
    config["rope_scaling"] = {"type": "mrope", "mrope_section": [half // 4, 3 * half // 8, 3 * half // 8]}
    _write(out, _config(config, ids), {k: v.astype(mx.float16) for k, v in weights.items()}, seed)
    shutil.copy(text_folder / "generation_config.json", out / "generation_config.json")
    return out


def build_qwen_vl_on(qwen_folder: Path, out: Path, seed: int = 0) -> Path:
    """The real qwen2 text tower and tokenizer of ``qwen_folder`` (an mlx-lm folder, e.g. an
    imported Qwen2.5 GGUF) with the random vision tower."""
    import mlx.core as mx

    out.mkdir(parents=True, exist_ok=True)
    text = json.loads((qwen_folder / "config.json").read_text())
    text.pop("architectures", None)
    half = text["hidden_size"] // text["num_attention_heads"] // 2
    text["rope_scaling"] = {"type": "mrope", "mrope_section": [half // 4, 3 * half // 8, 3 * half // 8]}
    if "quantization" in text:  # its per-layer entries, by the layers' paths under language_model
        text["quantization"] = {k if k in ("group_size", "bits", "mode") else f"language_model.{k}": v
                                for k, v in text["quantization"].items()}
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"):
        if (qwen_folder / name).is_file():
            shutil.copy(qwen_folder / name, out / name)
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    config = _config(text, {m: tok.token_to_id(m) for m in MARKERS})
    weights = {}
    for file in sorted(qwen_folder.glob("*.safetensors")):
        weights |= {f"language_model.{k}": v for k, v in mx.load(str(file)).items()}
    _write(out, config, weights, seed)
    return out


def _config(text: dict, ids: dict) -> dict:
    """The flat config; mrope's sections split a head's frequencies 1/4 t, 3/8 h, 3/8 w (Qwen2.5-VL's
    16/24/24 of 64)."""
    return {**text, "architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
            "vision_start_token_id": ids["<|vision_start|>"], "vision_end_token_id": ids["<|vision_end|>"],
            "image_token_id": ids["<|image_pad|>"], "video_token_id": ids["<|video_pad|>"],
            "vision_config": {**VISION, "out_hidden_size": text["hidden_size"]}}


def _write(out: Path, config: dict, text_weights: dict, seed: int) -> None:
    """The config, the processor config and the weights: the text tower's as given, the vision
    tower's seeded random."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_vlm.models.qwen2_5_vl.config import VisionConfig
    from mlx_vlm.models.qwen2_5_vl.vision import VisionModel

    mx.random.seed(seed + 1)
    vision = VisionModel(VisionConfig.from_dict(config["vision_config"]))
    weights = dict(text_weights)
    weights |= {f"vision_tower.{k}": v for k, v in tree_flatten(vision.parameters())}
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen2_5_VLProcessor",
        "min_pixels": 56 * 56, "max_pixels": MAX_PIXELS, "patch_size": 14, "temporal_patch_size": 2,
        "merge_size": 2, "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711]}, indent=2))


def _add_tokens(text_folder: Path, out: Path) -> dict[str, int]:
    """Copy the tokenizer with Qwen's vision markers added; returns their ids."""
    from tokenizers import AddedToken, Tokenizer

    tok = Tokenizer.from_file(str(text_folder / "tokenizer.json"))
    tok.add_special_tokens([AddedToken(m, special=True, normalized=False) for m in MARKERS])
    tok.save(str(out / "tokenizer.json"))
    cfg = json.loads((text_folder / "tokenizer_config.json").read_text())
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2))
    return {m: tok.token_to_id(m) for m in MARKERS}
