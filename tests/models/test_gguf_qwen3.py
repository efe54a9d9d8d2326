"""import_gguf on tiny Qwen 3 and Qwen 3 MoE GGUFs, written as llama.cpp's converter writes them.

Qwen 3: per-head Q/K norms (``attn_q_norm``/``attn_k_norm``), no QKV bias, no Q/K permutation,
the head size in ``attention.key_length``. Qwen 3 MoE: a router (``ffn_gate_inp``) and stacked
``(experts, out, in)`` expert tensors (``ffn_{gate,up,down}_exps``), with ``expert_count``,
``expert_used_count`` and ``expert_feed_forward_length``; llama.cpp hard-codes the rest.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from mlxctl.errors import ModelFormatError
from mlxctl.models.gguf import import_gguf
from tests.models.gguf_arch_writer import common_metadata, f32, load_folder, logits, random_model, u32
from tests.models.gguf_arch_writer import assert_computes, write_arch_gguf
from tests.models.helpers import tiny_vocab

VOCAB = len(tiny_vocab())
QWEN3 = {"model_type": "qwen3", "hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 96,
         "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "rms_norm_eps": 1e-6,
         "vocab_size": VOCAB, "rope_theta": 1000000.0, "max_position_embeddings": 256,
         "tie_word_embeddings": True}  # fmt: skip
# 256 wide: Q4_K blocks hold 256 values a row
QWEN3MOE = {**QWEN3, "model_type": "qwen3_moe", "hidden_size": 256, "intermediate_size": 512,
            "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 256,
            "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": True,
            "tie_word_embeddings": False}  # fmt: skip

QWEN3_BLOCK = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
               "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
               "self_attn.k_norm": "attn_k_norm", "input_layernorm": "attn_norm",
               "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate",
               "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}  # fmt: skip
MOE_BLOCK = {**{k: v for k, v in QWEN3_BLOCK.items() if not k.startswith("mlp.")},
             "mlp.gate": "ffn_gate_inp", "mlp.switch_mlp.gate_proj": "ffn_gate_exps",
             "mlp.switch_mlp.up_proj": "ffn_up_exps", "mlp.switch_mlp.down_proj": "ffn_down_exps"}  # fmt: skip


def _qwen3_metadata(arch: str, c: dict) -> dict:
    return {**common_metadata(arch, c), f"{arch}.attention.key_length": u32(c["head_dim"]),
            f"{arch}.attention.value_length": u32(c["head_dim"])}  # fmt: skip


def _q8_matrices(name: str, values: np.ndarray) -> str:
    return "Q8_0" if values.ndim == 2 else "F32"


def _moe_kinds(name: str, values: np.ndarray) -> str:
    """Q4_K experts (3-D), a float router (as llama.cpp keeps it), Q8_0 for the other matrices."""
    if values.ndim == 3:
        return "Q4_K"
    return "F32" if values.ndim == 1 or "ffn_gate_inp" in name else "Q8_0"


@pytest.fixture(scope="module", params=["F32", "Q8_0"])
def qwen3(request, tmp_path_factory):
    from mlx_lm.models import qwen3

    root = tmp_path_factory.mktemp("qwen3")
    source = random_model(qwen3, QWEN3)
    kinds = _q8_matrices if request.param == "Q8_0" else (lambda name, values: "F32")
    encoded = write_arch_gguf(root / "q.gguf", source, QWEN3_BLOCK, _qwen3_metadata("qwen3", QWEN3), kinds)
    return request.param, source, encoded, import_gguf(root / "q.gguf", root / "out")


def _moe_metadata() -> dict:
    return {**_qwen3_metadata("qwen3moe", QWEN3MOE),
            "qwen3moe.expert_count": u32(QWEN3MOE["num_experts"]),
            "qwen3moe.expert_used_count": u32(QWEN3MOE["num_experts_per_tok"]),
            "qwen3moe.expert_feed_forward_length": u32(QWEN3MOE["moe_intermediate_size"])}  # fmt: skip


@pytest.fixture(scope="module")
def qwen3moe(tmp_path_factory):
    from mlx_lm.models import qwen3_moe

    root = tmp_path_factory.mktemp("qwen3moe")
    source = random_model(qwen3_moe, QWEN3MOE)
    encoded = write_arch_gguf(root / "moe.gguf", source, MOE_BLOCK, _moe_metadata(), _moe_kinds)
    return encoded, import_gguf(root / "moe.gguf", root / "out")


def test_qwen3_imports_with_its_q_k_norms(qwen3):
    kind, source, encoded, folder = qwen3
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "qwen3" and config["head_dim"] == 32
    assert ("quantization" in config) == (kind == "Q8_0")
    model, _ = load_folder(folder)
    assert "bias" not in model.model.layers[0].self_attn.q_proj
    assert_computes(model, encoded)
    if kind == "F32":
        np.testing.assert_allclose(logits(model), logits(source), atol=1e-4)


def test_qwen3_ends_on_im_end_and_endoftext(qwen3):
    _, _, _, folder = qwen3
    generation = json.loads((folder / "generation_config.json").read_text())
    assert set(generation["eos_token_id"]) == {0, 2}


def test_qwen3moe_gets_the_values_llama_cpp_hard_codes(qwen3moe):
    _, folder = qwen3moe
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "qwen3_moe"
    assert (config["num_experts"], config["num_experts_per_tok"], config["moe_intermediate_size"]) == (4, 2, 256)
    assert config["decoder_sparse_step"] == 1 and config["mlp_only_layers"] == [] and config["norm_topk_prob"]


def test_qwen3moe_experts_stay_quantised(qwen3moe):
    """The 3-D Q4_K expert tensors import as (experts, out, in_packed) triplets at 4 bits."""
    import mlx.core as mx

    _, folder = qwen3moe
    weights = mx.load(str(folder / "model.safetensors"))
    experts = "model.layers.0.mlp.switch_mlp.down_proj"
    assert weights[f"{experts}.weight"].shape == (4, 256, 256 * 4 // 32)
    assert weights[f"{experts}.scales"].shape == (4, 256, 256 // 32)
    assert weights[f"{experts}.scales"].dtype == mx.float32  # a K-quant file
    quantization = json.loads((folder / "config.json").read_text())["quantization"]
    assert quantization["bits"] == 8 and quantization[experts]["bits"] == 4
    model, _ = load_folder(folder)
    assert type(model.model.layers[0].mlp.switch_mlp.down_proj).__name__ == "QuantizedSwitchLinear"
    assert "scales" not in model.model.layers[0].mlp.gate  # the float router stays float


def test_qwen3moe_computes_the_model_its_blocks_encode(qwen3moe):
    encoded, folder = qwen3moe
    model, _ = load_folder(folder)
    assert_computes(model, encoded)


def test_a_qwen3moe_with_rope_scaling_is_refused(tmp_path):
    """llama.cpp applies a qwen3moe file's linear rope scaling; mlx-lm's qwen3_moe reads
    ``rope_scaling`` and ignores it, so the import refuses instead of dropping it."""
    from mlx_lm.models import qwen3_moe

    metadata = {**_moe_metadata(), "qwen3moe.rope.scaling.type": "linear",
                "qwen3moe.rope.scaling.factor": f32(4.0)}  # fmt: skip
    write_arch_gguf(tmp_path / "moe.gguf", random_model(qwen3_moe, QWEN3MOE), MOE_BLOCK, metadata)
    with pytest.raises(ModelFormatError, match="qwen3moe.rope.scaling.type 'linear'"):
        import_gguf(tmp_path / "moe.gguf", tmp_path / "out")
