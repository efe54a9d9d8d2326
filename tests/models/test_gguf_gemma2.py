"""import_gguf on a tiny Gemma 2 GGUF, written as llama.cpp's converter writes it.

Norms stored as ``1 + w``; the soft-capping values and the window in the file; the query scalar
(the head size, here 32, not hidden / heads = 16) hard-coded, as llama.cpp does.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from mlxctl.models.gguf import import_gguf
from mlxctl.models.gguf_gemma2 import gemma2_config
from tests.models.gguf_arch_writer import common_metadata, f32, load_folder, logits, random_model, u32
from tests.models.gguf_arch_writer import assert_computes, write_arch_gguf
from tests.models.helpers import tiny_vocab

GEMMA2 = {"model_type": "gemma2", "hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 96,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "rms_norm_eps": 1e-6,
          "vocab_size": len(tiny_vocab()), "rope_theta": 10000.0, "attn_logit_softcapping": 40.0,
          "final_logit_softcapping": 20.0, "query_pre_attn_scalar": 32, "max_position_embeddings": 256}  # fmt: skip
BLOCK = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
         "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
         "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
         "post_attention_layernorm": "post_attention_norm", "pre_feedforward_layernorm": "ffn_norm",
         "post_feedforward_layernorm": "post_ffw_norm"}  # fmt: skip


def _metadata(c: dict) -> dict:
    return {**common_metadata("gemma2", c), "gemma2.attention.key_length": u32(c["head_dim"]),
            "gemma2.attention.value_length": u32(c["head_dim"]),
            "gemma2.attention.sliding_window": u32(8),
            "gemma2.attn_logit_softcapping": f32(c["attn_logit_softcapping"]),
            "gemma2.final_logit_softcapping": f32(c["final_logit_softcapping"])}  # fmt: skip


@pytest.fixture(scope="module", params=["F32", "Q8_0"])
def gemma2(request, tmp_path_factory):
    from mlx_lm.models import gemma2

    root = tmp_path_factory.mktemp("gemma2")
    source = random_model(gemma2, GEMMA2)
    kind = request.param
    kinds = lambda name, values: kind if values.ndim == 2 else "F32"  # noqa: E731
    encoded = write_arch_gguf(root / "g.gguf", source, BLOCK, _metadata(GEMMA2), kinds, norm_shift=1.0)
    return kind, source, encoded, import_gguf(root / "g.gguf", root / "out")


def test_gemma2_gets_the_file_s_values_and_those_llama_cpp_hard_codes(gemma2):
    _, _, _, folder = gemma2
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "gemma2" and config["head_dim"] == 32
    assert (config["attn_logit_softcapping"], config["final_logit_softcapping"]) == (40.0, 20.0)
    assert config["query_pre_attn_scalar"] == 32 and config["sliding_window"] == 8
    generation = json.loads((folder / "generation_config.json").read_text())
    assert generation["eos_token_id"] == [2]  # the tiny vocab has no <end_of_turn>


def test_gemma2_imports_to_the_model_its_tensors_encode(gemma2):
    """Norms back from 1 + w, soft-capping and scalar right: the same logits."""
    kind, source, encoded, folder = gemma2
    model, _ = load_folder(folder)
    assert_computes(model, encoded)
    if kind == "F32":
        np.testing.assert_allclose(logits(model), logits(source), atol=1e-4)


def test_gemma2_27b_scales_queries_by_hidden_over_heads():
    metadata = {**common_metadata("gemma2", {**GEMMA2, "num_hidden_layers": 46, "hidden_size": 4608,
                                             "num_attention_heads": 32}),
                "gemma2.attention.key_length": u32(128), "tokenizer.ggml.tokens": ["a"]}  # fmt: skip
    config = gemma2_config(metadata, {})
    assert config["query_pre_attn_scalar"] == 144 and config["head_dim"] == 128
    assert (config["attn_logit_softcapping"], config["final_logit_softcapping"]) == (50.0, 30.0)
    assert config["sliding_window"] == 4096  # llama.cpp's defaults where the file has none
