"""import_gguf on tiny Phi-3 GGUFs, written as llama.cpp's converter writes them.

Fused ``attn_qkv`` and gate+up ``ffn_up`` tensors; a LongRoPE model's ``rope_factors_long`` /
``rope_factors_short`` tensors and ``rope.scaling.original_context_length``; a partial rotary
model (Phi-4-mini's kind) by ``rope.dimension_count`` below the head size.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mlxctl.errors import ModelFormatError
from mlxctl.models.gguf import import_gguf
from mlxctl.models.gguf_phi3 import phi3_config
from tests.models.gguf_arch_writer import assert_computes, common_metadata, f32, load_folder, random_model, u32
from tests.models.gguf_arch_writer import write_arch_gguf
from tests.models.helpers import tiny_vocab

LONG = [1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0]
SHORT = [1.0, 1.0, 1.125, 1.25, 1.5, 2.0, 2.5, 3.0]  # exact in float32
PHI3 = {"model_type": "phi3", "hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 96,
        "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-5,
        "vocab_size": len(tiny_vocab()), "rope_theta": 10000.0, "max_position_embeddings": 1024,
        "original_max_position_embeddings": 256, "tie_word_embeddings": False,
        "rope_scaling": {"type": "longrope", "long_factor": LONG, "short_factor": SHORT}}  # fmt: skip
PARTIAL = {**PHI3, "rope_scaling": None, "partial_rotary_factor": 0.5, "max_position_embeddings": 256}
BLOCK = {"self_attn.qkv_proj": "attn_qkv", "self_attn.o_proj": "attn_output", "mlp.gate_up_proj": "ffn_up",
         "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}  # fmt: skip
ROPE = {"rope_factors_long.weight": np.array(LONG), "rope_factors_short.weight": np.array(SHORT)}


def _metadata(c: dict) -> dict:
    rotary = int(16 * c.get("partial_rotary_factor", 1.0))
    metadata = {**common_metadata("phi3", c), "phi3.rope.dimension_count": u32(rotary),
                "phi3.attention.sliding_window": u32(2047)}  # fmt: skip
    if c["rope_scaling"]:
        original = c["original_max_position_embeddings"]
        metadata["phi3.rope.scaling.original_context_length"] = u32(original)
        scale = c["max_position_embeddings"] / original  # the converter's LongRoPE attn_factor
        metadata["phi3.rope.scaling.attn_factor"] = f32(math.sqrt(1 + math.log(scale) / math.log(original)))
    return metadata


def _write(root, config: dict, kind: str, rope: dict, metadata: dict | None = None):
    from mlx_lm.models import phi3

    source = random_model(phi3, config)
    kinds = lambda name, values: kind if values.ndim == 2 else "F32"  # noqa: E731
    metadata = {**_metadata(config), **(metadata or {})}
    encoded = write_arch_gguf(root / "p.gguf", source, BLOCK, metadata, kinds, extra=rope)
    return encoded, root / "p.gguf"


@pytest.mark.parametrize("kind", ["F32", "Q8_0"])
def test_a_longrope_phi3_imports_with_its_rope_factors(tmp_path, kind):
    encoded, path = _write(tmp_path, PHI3, kind, ROPE)
    folder = import_gguf(path, tmp_path / "out")
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "phi3" and config["original_max_position_embeddings"] == 256
    assert config["rope_scaling"] == {"type": "longrope", "long_factor": LONG, "short_factor": SHORT}
    assert config["sliding_window"] == 2047 and config["partial_rotary_factor"] == 1.0
    model, _ = load_folder(folder)
    assert "qkv_proj" in model.model.layers[0].self_attn and "gate_up_proj" in model.model.layers[0].mlp
    assert_computes(model, encoded)


def test_a_partial_rotary_phi3_imports(tmp_path):
    encoded, path = _write(tmp_path, PARTIAL, "F32", {})
    folder = import_gguf(path, tmp_path / "out")
    config = json.loads((folder / "config.json").read_text())
    assert config["partial_rotary_factor"] == 0.5 and "rope_scaling" not in config
    model, _ = load_folder(folder)
    assert_computes(model, encoded)


def test_the_partial_rotary_factor_gives_mlx_lm_the_file_s_rotary_dimensions():
    """mlx-lm's phi3 rotates ``int(head_dim * partial_rotary_factor)`` dimensions; 30 / 88 times
    88 is 29.999... in floats, which would rotate 29 of llama.cpp's 30."""
    c = {**PARTIAL, "hidden_size": 176, "num_attention_heads": 2, "num_key_value_heads": 2}
    metadata = {**common_metadata("phi3", c), "phi3.rope.dimension_count": u32(30),
                "phi3.vocab_size": u32(c["vocab_size"])}  # fmt: skip
    factor = phi3_config(metadata, {})["partial_rotary_factor"]
    assert int(88 * factor) == 30 and factor == pytest.approx(30 / 88)


def test_a_phi3_with_one_rope_factors_tensor_is_refused(tmp_path):
    _, path = _write(tmp_path, PHI3, "F32", {"rope_factors_long.weight": np.array(LONG)})
    with pytest.raises(ModelFormatError, match="rope_factors_long.*lacks 'rope_factors_short"):
        import_gguf(path, tmp_path / "out")


def test_a_yarn_phi3_is_refused(tmp_path):
    """YaRN's attention factor (0.1 ln s + 1) is not what mlx-lm's LongRoPE would apply."""
    yarn = {"phi3.rope.scaling.attn_factor": f32(0.1 * math.log(4) + 1)}
    _, path = _write(tmp_path, PHI3, "F32", ROPE, yarn)
    with pytest.raises(ModelFormatError, match="attn_factor 1.13863 is not LongRoPE's 1.11"):
        import_gguf(path, tmp_path / "out")
