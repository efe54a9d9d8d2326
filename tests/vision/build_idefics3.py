"""An Idefics3-layout test model: SmolLM2's real text tower, a tiny seeded random SigLIP tower and
pixel-shuffle connector (SmolVLM's text tower is SmolLM2, so this is SmolVLM with a blind eye).

Laid out as a Hugging Face Idefics3 / SmolVLM checkpoint: ``model.text_model.*``, ``lm_head.*``,
``model.vision_model.*`` (the patch convolution in PyTorch's layout) and ``model.connector.*``;
config with ``scale_factor``, ``text_config`` (llama) and ``vision_config``; the processor's
image tokens (``<image>``, ``<fake_token_around_image>``, ``<global-img>``, ``<row_r_col_c>``)
added to SmolLM2's tokenizer. Tiles are 32 pixels of 8x8 patches, shuffled 2x2: 4 positions
per tile; images are first resized to a longest edge of 64, so most are 2x2 tiles + a global one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

TILE = 32
PATCH_SIZE = 8
SCALE = 2
LONGEST_EDGE = 64
SEQ_LEN = (TILE // PATCH_SIZE) ** 2 // SCALE**2
MARKERS = ("<image>", "<fake_token_around_image>", "<global-img>",
           *(f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)))


def build_idefics3(text_folder: Path, out: Path, seed: int = 0, model_type: str = "idefics3") -> Path:
    """Write the test model to ``out`` from the SmolLM2 folder ``text_folder``; returns ``out``."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_vlm.models.idefics3.config import ModelConfig, TextConfig, VisionConfig
    from mlx_vlm.models.idefics3.idefics3 import Idefics3Connector
    from mlx_vlm.models.idefics3.vision import VisionModel

    out.mkdir(parents=True, exist_ok=True)
    ids = add_tokens(text_folder, out, MARKERS)
    text, source_config = extended_text(text_folder, len(MARKERS))
    weights = {f"model.text_model.{k.removeprefix('model.')}": v for k, v in text.items()}
    embed = weights["lm_head.weight"] = text["model.embed_tokens.weight"]  # SmolLM2 ties them; Idefics3 stores the head
    assert ids[-1] == embed.shape[0] - 1

    text_config = {k: v for k, v in source_config.items() if k not in ("quantization", "architectures")}
    text_config.update(model_type="llama", vocab_size=embed.shape[0], tie_word_embeddings=False)
    vision_config = {"model_type": "idefics3_vision", "hidden_size": 32, "intermediate_size": 64,
                     "num_hidden_layers": 2, "num_attention_heads": 2, "image_size": TILE,
                     "patch_size": PATCH_SIZE, "num_channels": 3, "layer_norm_eps": 1e-6}
    config = {"architectures": ["Idefics3ForConditionalGeneration"], "model_type": model_type,
              "image_token_id": ids[0], "scale_factor": SCALE, "tie_word_embeddings": False,
              "vocab_size": embed.shape[0], "text_config": text_config, "vision_config": vision_config}

    mx.random.seed(seed)
    vision_cfg = VisionConfig.from_dict(vision_config)
    tower = VisionModel(vision_cfg)
    connector = Idefics3Connector(ModelConfig(text_config=TextConfig.from_dict(text_config),
                                              vision_config=vision_cfg, model_type=model_type,
                                              scale_factor=SCALE))
    for k, v in tree_flatten(tower.parameters()):
        weights[f"model.vision_model.{k}"] = v.transpose(0, 3, 1, 2) if k.endswith("patch_embedding.weight") else v
    weights |= {f"model.connector.{k}": v for k, v in tree_flatten(connector.parameters())}
    mx.save_safetensors(str(out / "model.safetensors"), {k: v.astype(mx.float32) for k, v in weights.items()},
                        metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "Idefics3ImageProcessor", "processor_class": "Idefics3Processor",
        "do_convert_rgb": True, "do_resize": True, "size": {"longest_edge": LONGEST_EDGE}, "resample": 1,
        "do_image_splitting": True, "max_image_size": {"longest_edge": TILE}, "do_rescale": True,
        "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5], "do_pad": True}, indent=2))
    (out / "processor_config.json").write_text(json.dumps({"processor_class": "Idefics3Processor",
                                                           "image_seq_len": SEQ_LEN}, indent=2))
    shutil.copy(text_folder / "generation_config.json", out / "generation_config.json")
    return out


def extended_text(text_folder: Path, new_tokens: int) -> tuple[dict, dict]:
    """SmolLM2's text tower as float32 arrays under mlx-lm's names, its token embedding grown by
    ``new_tokens`` rows (each the mean row: never looked up, rarely sampled), and its config."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    from mlxctl.models.loader import load_model

    weights = dict(tree_flatten(load_model(text_folder, dtype="float32").model.parameters()))
    embed = weights["model.embed_tokens.weight"]
    extra = mx.broadcast_to(mx.mean(embed, axis=0, keepdims=True), (new_tokens, embed.shape[1]))
    weights["model.embed_tokens.weight"] = mx.concatenate([embed, extra])
    return weights, json.loads((text_folder / "config.json").read_text())


def add_tokens(text_folder: Path, out: Path, markers: tuple[str, ...]) -> list[int]:
    """Copy the tokenizer with ``markers`` added as special tokens; returns their ids."""
    from tokenizers import AddedToken, Tokenizer

    tok = Tokenizer.from_file(str(text_folder / "tokenizer.json"))
    tok.add_special_tokens([AddedToken(m, special=True, normalized=False) for m in markers])
    tok.save(str(out / "tokenizer.json"))
    cfg = json.loads((text_folder / "tokenizer_config.json").read_text())
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2))
    return [tok.token_to_id(m) for m in markers]
