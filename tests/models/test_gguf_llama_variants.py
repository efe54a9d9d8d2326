"""import_gguf on llama-architecture variants: a Mistral-shaped model and Llama 3 rope scaling.

Mistral GGUFs say ``general.architecture = llama`` (Q/K rows permuted); their head size
(``attention.key_length``, 32 here) need not be hidden / heads (16), rope theta is 1e6 and no
sliding window is written. Llama 3.x files carry their rope scaling as a ``rope_freqs`` tensor
of per-frequency divisors, computed here with a copy of llama.cpp's converter loop.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mlxctl.errors import ModelFormatError
from mlxctl.models.gguf import import_gguf
from tests.models.gguf_arch_writer import assert_computes, common_metadata, load_folder, random_model, u32
from tests.models.gguf_arch_writer import write_arch_gguf
from tests.models.helpers import llamacpp_permute, tiny_vocab

MISTRAL = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 96,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "rms_norm_eps": 1e-5,
           "vocab_size": len(tiny_vocab()), "rope_theta": 1000000.0, "max_position_embeddings": 512,
           "tie_word_embeddings": False}  # fmt: skip
LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 64}  # fmt: skip
LLAMA3 = {**MISTRAL, "head_dim": 16, "rope_theta": 10000.0, "rope_scaling": LLAMA3_SCALING}
BLOCK = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
         "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
         "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}  # fmt: skip


def llama_cpp_rope_freqs(c: dict) -> np.ndarray:
    """LlamaModel.generate_extra_tensors of llama.cpp's convert_hf_to_gguf.py, in numpy."""
    s, dim, base = c["rope_scaling"], c["head_dim"], c["rope_theta"]
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old = s["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            factors.append(1)
        elif wavelen > low_wavelen:
            factors.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(factors, dtype=np.float32)


def _permute(c: dict):
    heads = {"attn_q": c["num_attention_heads"], "attn_k": c["num_key_value_heads"]}

    def to_gguf(name: str, values: np.ndarray) -> np.ndarray:
        kind = name.split(".")[-2]
        return llamacpp_permute(values, heads[kind]) if kind in heads else values

    return to_gguf


def _write(root, c: dict, kind: str = "F32", extra: dict | None = None):
    from mlx_lm.models import llama

    source = random_model(llama, c)
    metadata = {**common_metadata("llama", c), "llama.attention.key_length": u32(c["head_dim"]),
                "llama.attention.value_length": u32(c["head_dim"]),
                "llama.rope.dimension_count": u32(c["head_dim"])}  # fmt: skip
    kinds = lambda name, values: kind if values.ndim == 2 else "F32"  # noqa: E731
    encoded = write_arch_gguf(root / "l.gguf", source, BLOCK, metadata, kinds, extra=extra, to_gguf=_permute(c))
    return source, encoded, root / "l.gguf"


@pytest.mark.parametrize("kind", ["F32", "Q8_0"])
def test_a_mistral_shaped_llama_imports(tmp_path, kind):
    _, encoded, path = _write(tmp_path, MISTRAL, kind)
    folder = import_gguf(path, tmp_path / "out")
    config = json.loads((folder / "config.json").read_text())
    assert (config["head_dim"], config["rope_theta"]) == (32, 1000000.0) and "sliding_window" not in config
    model, _ = load_folder(folder)
    assert_computes(model, encoded)


def test_llama3_rope_scaling_comes_back_from_rope_freqs(tmp_path):
    source, encoded, path = _write(tmp_path, LLAMA3, extra={"rope_freqs.weight": llama_cpp_rope_freqs(LLAMA3)})
    folder = import_gguf(path, tmp_path / "out")
    scaling = json.loads((folder / "config.json").read_text())["rope_scaling"]
    assert scaling["rope_type"] == "llama3" and scaling["factor"] == 8.0
    # the same rule, with the original context at llama.cpp's 8192: low and high scale with it
    assert scaling["original_max_position_embeddings"] == 8192
    assert scaling["low_freq_factor"] == pytest.approx(128.0, rel=1e-4)
    assert scaling["high_freq_factor"] == pytest.approx(512.0, rel=1e-4)
    model, _ = load_folder(folder)
    assert_computes(model, source)


def test_a_rope_freqs_tensor_that_is_not_llama3_s_is_refused(tmp_path):
    freqs = np.linspace(1.0, 3.0, 8, dtype=np.float32) ** 2
    _, _, path = _write(tmp_path, LLAMA3, extra={"rope_freqs.weight": freqs})
    with pytest.raises(ModelFormatError, match="rope_freqs.weight.*llama 3 rope scaling"):
        import_gguf(path, tmp_path / "out")
