"""import_gguf on tiny qwen2 and gemma3 GGUFs, written the way llama.cpp's converter writes them.

The source is a seeded random mlx-lm model; its tensors get llama.cpp's names (no Q/K
permutation for these architectures; Gemma's norms stored as ``1 + w``) and the metadata keys
llama.cpp writes, nothing more: Gemma's window pattern, local rotary base and query scalar are
not in the file. mlx-lm must load the imported folder and compute the source's logits.
"""

from __future__ import annotations

import json

import mlx.core as mx
import numpy as np
import pytest
from mlx.utils import tree_flatten

from mlxctl.models.gguf import import_gguf
from tests.models.gguf_arch_writer import common_metadata, gguf_name, random_model, u32
from tests.models.gguf_arch_writer import load_folder as _load
from tests.models.gguf_arch_writer import logits as _logits
from tests.models.helpers import tiny_vocab, tokenizer_metadata

VOCAB = len(tiny_vocab())

QWEN2 = {"model_type": "qwen2", "hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 96,
         "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "vocab_size": VOCAB,
         "rope_theta": 1000000.0, "max_position_embeddings": 256, "tie_word_embeddings": False}
# 7 layers: layer 5 is the one global layer of the 6-pattern; a window of 4 bites at 10 tokens
GEMMA3 = {"model_type": "gemma3_text", "hidden_size": 64, "num_hidden_layers": 7, "intermediate_size": 96,
          "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32, "rms_norm_eps": 1e-6,
          "vocab_size": VOCAB, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
          "query_pre_attn_scalar": 32, "sliding_window": 4, "sliding_window_pattern": 6,
          "max_position_embeddings": 256}  # fmt: skip

_BLOCK = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
          "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
          "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm"}  # fmt: skip
_QWEN2_BLOCK = {**_BLOCK, "post_attention_layernorm": "ffn_norm"}
_GEMMA3_BLOCK = {**_BLOCK, "post_attention_layernorm": "post_attention_norm",
                 "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
                 "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm"}  # fmt: skip


def _write(path, model, block: dict, metadata: dict, norm_shift: float = 0.0) -> None:
    tensors = {}
    for name, value in tree_flatten(model.parameters()):
        shift = norm_shift if name.endswith("norm.weight") else 0.0
        tensors[gguf_name(name, block)] = value.astype(mx.float32) + shift
    mx.save_gguf(str(path), tensors, {**metadata, **tokenizer_metadata("qwen2")})


@pytest.fixture(scope="module")
def qwen2(tmp_path_factory):
    from mlx_lm.models import qwen2

    root = tmp_path_factory.mktemp("qwen2")
    source = random_model(qwen2, QWEN2)
    _write(root / "qwen2.gguf", source, _QWEN2_BLOCK, common_metadata("qwen2", QWEN2))
    return source, import_gguf(root / "qwen2.gguf", root / "out")


@pytest.fixture(scope="module")
def gemma3(tmp_path_factory):
    from mlx_lm.models import gemma3_text

    root = tmp_path_factory.mktemp("gemma3")
    source = random_model(gemma3_text, GEMMA3)
    metadata = {
        **common_metadata("gemma3", GEMMA3),
        "gemma3.attention.key_length": u32(GEMMA3["head_dim"]),
        "gemma3.attention.value_length": u32(GEMMA3["head_dim"]),
        "gemma3.attention.sliding_window": u32(GEMMA3["sliding_window"]),
    }
    _write(root / "gemma3.gguf", source, _GEMMA3_BLOCK, metadata, norm_shift=1.0)
    return source, import_gguf(root / "gemma3.gguf", root / "out")


def test_qwen2_imports_with_biases_and_its_own_output(qwen2):
    source, folder = qwen2
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "qwen2" and config["tie_word_embeddings"] is False
    model, _ = _load(folder)
    assert "bias" in model.model.layers[0].self_attn.q_proj
    np.testing.assert_allclose(_logits(model), _logits(source), atol=1e-4)


def test_the_recipe_names_the_architecture(qwen2, tmp_path):
    """The manifest and a conversion say which importer ran: gguf-qwen2, not gguf-llama."""
    from mlxctl.models.convert import convert_model
    from mlxctl.models.store import ModelStore

    _, folder = qwen2
    assert json.loads((folder / "manifest.json").read_text())["recipe"] == "gguf-qwen2"
    source = folder.parent / "qwen2.gguf"
    store = ModelStore(tmp_path / "store")
    assert convert_model(str(source), store=store).manifest["recipe"]["method"] == "gguf-qwen2"
    done = convert_model(str(source), dtype="float16", store=store)
    assert done.manifest["recipe"]["method"] == "gguf-qwen2+mlx-lm"


def test_qwen2_ends_on_endoftext_as_well(qwen2):
    _, folder = qwen2
    generation = json.loads((folder / "generation_config.json").read_text())
    assert generation["eos_token_id"] == [2, 0]  # <|im_end|> (the GGUF's), then <|endoftext|>
    _, tokenizer = _load(folder)
    assert tokenizer.eos_token_ids == {0, 2}


def test_gemma3_gets_the_values_llama_cpp_hard_codes(gemma3):
    _, folder = gemma3
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "gemma3_text"
    assert config["sliding_window"] == 4  # from the file
    assert config["sliding_window_pattern"] == 6 and config["rope_local_base_freq"] == 10000.0
    assert config["query_pre_attn_scalar"] == 32  # the head size


def test_gemma3_imports_to_the_sourcerandom_model(gemma3):
    """Norms back from 1 + w, every 6th layer global, the window and scalar right: same logits."""
    source, folder = gemma3
    model, _ = _load(folder)
    weights = dict(tree_flatten(model.parameters()))
    expected = dict(tree_flatten(source.parameters()))
    for name in [n for n in weights if n.endswith("norm.weight")]:
        np.testing.assert_allclose(np.array(weights[name]), np.array(expected[name]), atol=1e-6)
    np.testing.assert_allclose(_logits(model), _logits(source), atol=1e-4)
