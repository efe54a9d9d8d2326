import mlx.core as mx
import numpy as np
import pytest

from mlxctl.errors import ModelFormatError
from mlxctl.models.gguf_weights import convert_weights, hf_name, quantization_config, unpermute_rows
from tests.models.helpers import llamacpp_permute


@pytest.mark.parametrize("n_heads,rows,cols", [(1, 4, 3), (2, 8, 5), (3, 12, 2), (9, 576, 8)])
def test_unpermute_inverts_llamacpp_permute(n_heads, rows, cols):
    hf = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    gguf = llamacpp_permute(hf, n_heads)
    assert not np.array_equal(gguf, hf) or rows // n_heads == 2
    np.testing.assert_array_equal(np.array(unpermute_rows(mx.array(gguf), n_heads)), hf)


def test_unpermute_small_case_by_hand():
    # one head of 4 rows: HF rows [r0 r1 | r2 r3] (two rotary halves) are stored interleaved
    # by llama.cpp as [r0 r2 r1 r3]; unpermuting restores the halves.
    gguf = mx.array([[0.0], [2.0], [1.0], [3.0]])
    assert unpermute_rows(gguf, 1).reshape(-1).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_unpermute_1d_bias():
    hf = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(
        np.array(unpermute_rows(mx.array(llamacpp_permute(hf, 2)), 2)), hf
    )


def test_unpermute_quantized_triplet_rows_consistently():
    mx.random.seed(1)
    n_heads, rows = 3, 24
    hf = mx.random.normal((rows, 64))
    gguf_float = mx.array(llamacpp_permute(np.array(hf), n_heads))
    w, scales, biases = mx.quantize(gguf_float, group_size=32, bits=4)
    fixed = [unpermute_rows(a, n_heads) for a in (w, scales, biases)]
    restored = mx.dequantize(*fixed, group_size=32, bits=4)
    expected = mx.dequantize(*mx.quantize(hf, group_size=32, bits=4), group_size=32, bits=4)
    assert mx.allclose(restored, expected).item()


def test_unpermute_rejects_rows_not_divisible():
    with pytest.raises(ModelFormatError, match="10 rows into 3"):
        unpermute_rows(mx.zeros((10, 2)), 3)


@pytest.mark.parametrize(
    "gguf,hf",
    [
        ("token_embd.weight", "model.embed_tokens.weight"),
        ("token_embd.scales", "model.embed_tokens.scales"),
        ("output_norm.weight", "model.norm.weight"),
        ("output.weight", "lm_head.weight"),
        ("blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"),
        ("blk.12.ffn_norm.weight", "model.layers.12.post_attention_layernorm.weight"),
        ("blk.3.attn_q.biases", "model.layers.3.self_attn.q_proj.biases"),
        ("blk.3.attn_k.weight", "model.layers.3.self_attn.k_proj.weight"),
        ("blk.3.attn_v.weight", "model.layers.3.self_attn.v_proj.weight"),
        ("blk.3.attn_output.weight", "model.layers.3.self_attn.o_proj.weight"),
        ("blk.3.ffn_gate.weight", "model.layers.3.mlp.gate_proj.weight"),
        ("blk.3.ffn_up.weight", "model.layers.3.mlp.up_proj.weight"),
        ("blk.3.ffn_down.weight", "model.layers.3.mlp.down_proj.weight"),
    ],
)
def test_hf_names(gguf, hf):
    assert hf_name(gguf) == hf


@pytest.mark.parametrize(
    "name", ["rope_freqs.weight", "blk.0.attn_qkv.weight", "blk.x.attn_q.weight", "output"]
)
def test_unknown_tensor_names(name):
    with pytest.raises(ModelFormatError, match="has no place in a llama model"):
        hf_name(name)


def test_convert_permutes_q_and_k_only():
    rows = np.arange(8, dtype=np.float32).reshape(8, 1)
    tensors = {f"blk.0.attn_{p}.weight": mx.array(llamacpp_permute(rows, 2)) for p in "qkv"}
    out = convert_weights(tensors, n_heads=2, n_kv_heads=2)
    for p in "qk":
        assert out[f"model.layers.0.self_attn.{p}_proj.weight"].reshape(-1).tolist() == list(
            range(8)
        )
    assert out["model.layers.0.self_attn.v_proj.weight"].reshape(-1).tolist() != list(range(8))


def _triplet(name: str, rows: int, cols: int, bits: int) -> dict:
    return {
        f"{name}.weight": mx.zeros((rows, cols * bits // 32), dtype=mx.uint32),
        f"{name}.scales": mx.zeros((rows, cols // 32), dtype=mx.float16),
        f"{name}.biases": mx.zeros((rows, cols // 32), dtype=mx.float16),
    }


def test_quantization_config_mixed_bits():
    weights = {
        **_triplet("model.embed_tokens", 100, 64, 8),
        **_triplet("model.layers.0.self_attn.q_proj", 64, 64, 4),
        **_triplet("model.layers.0.mlp.up_proj", 96, 64, 4),
        "model.norm.weight": mx.zeros((64,)),
    }
    assert quantization_config(weights) == {
        "group_size": 32,
        "bits": 4,
        "mode": "affine",
        "model.embed_tokens": {"group_size": 32, "bits": 8, "mode": "affine"},
    }


def test_quantization_config_none_for_float_weights():
    assert quantization_config({"model.norm.weight": mx.zeros((4,))}) is None
