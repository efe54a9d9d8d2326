"""import_gguf on GGUF files with Q4_0, Q4_1 and Q8_0 tensors, written byte by byte here.

``mx.save_gguf`` only writes float tensors, so these tests write the file with their own GGUF
v3 writer (tests/models/gguf_writer.py) and pack the quantised blocks themselves, following the GGUF spec and llama.cpp's reference quantisers
(``quantize_row_q4_0_ref`` and friends in ggml-quants.c):

- Q4_0, 18 bytes per 32 values: f16 scale ``d``, then 16 bytes of 4-bit values ``q`` (value j in
  the low nibble of byte j, value j + 16 in the high nibble); ``x = (q - 8) * d``.
- Q4_1, 20 bytes: f16 ``d``, f16 minimum ``m``, 16 bytes of nibbles as above; ``x = q * d + m``.
- Q8_0, 34 bytes: f16 ``d``, 32 signed bytes ``q``; ``x = q * d``.

Each test quantises a known float model, imports the file, and checks every imported weight
against the values the blocks encode (exactly) and against the float source (within the
quantisation error of its block).
"""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

from mlxctl.models.gguf import import_gguf
from mlxctl.models.gguf_header import read_header
from tests.models.gguf_writer import write_gguf
from tests.models.helpers import (
    TINY_CONFIG,
    build_tiny_llama,
    gguf_tensors,
    llama_metadata,
    llamacpp_permute,
    tiny_vocab,
    tokenizer_metadata,
)

BLOCK = 32
TOKENS = mx.array([[1, 40, 70, 90, 2, 120, 200, 5]])


# -- quantisers (llama.cpp's reference ones, in numpy) --------------------------------------


def _f16(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float16)


def quantize_q4_0(x: np.ndarray) -> tuple[bytes, np.ndarray, np.ndarray]:
    """(block bytes, the values they decode to, the per-value error bound) of rows ``x``."""
    blocks = x.reshape(-1, BLOCK).astype(np.float32)
    picked = np.take_along_axis(blocks, np.abs(blocks).argmax(axis=1)[:, None], axis=1)[:, 0]
    d = picked / np.float32(-8)  # the signed value of largest magnitude maps to q = 0
    inv = np.divide(1, d, out=np.zeros_like(d), where=d != 0)
    q = np.minimum(15, (blocks * inv[:, None] + np.float32(8.5)).astype(np.int8)).astype(np.uint8)
    d16 = _f16(d)
    data = b"".join(d16[i].tobytes() + _nibbles(q[i]) for i in range(len(q)))
    decoded = (q.astype(np.float32) - 8) * d16.astype(np.float32)[:, None]
    # a half step of rounding, or one step where +8 is clipped to 7, plus the f16 rounding of d
    bound = np.abs(d)[:, None] * 1.01 + 1e-7
    return data, decoded.reshape(x.shape), np.broadcast_to(bound, blocks.shape).reshape(x.shape)


def quantize_q4_1(x: np.ndarray) -> tuple[bytes, np.ndarray, np.ndarray]:
    blocks = x.reshape(-1, BLOCK).astype(np.float32)
    lo, hi = blocks.min(axis=1), blocks.max(axis=1)
    d = (hi - lo) / np.float32(15)
    inv = np.divide(1, d, out=np.zeros_like(d), where=d != 0)
    q = np.minimum(15, ((blocks - lo[:, None]) * inv[:, None] + np.float32(0.5)).astype(np.int8)).astype(np.uint8)
    d16, m16 = _f16(d), _f16(lo)
    data = b"".join(d16[i].tobytes() + m16[i].tobytes() + _nibbles(q[i]) for i in range(len(q)))
    decoded = q.astype(np.float32) * d16.astype(np.float32)[:, None] + m16.astype(np.float32)[:, None]
    # half a step, plus the f16 rounding of d (times up to 15) and of the minimum
    bound = d[:, None] * 0.51 + 15 * np.abs(d - d16)[:, None] + np.abs(lo - m16)[:, None] + 1e-6
    return data, decoded.reshape(x.shape), np.broadcast_to(bound, blocks.shape).reshape(x.shape)


def quantize_q8_0(x: np.ndarray) -> tuple[bytes, np.ndarray, np.ndarray]:
    blocks = x.reshape(-1, BLOCK).astype(np.float32)
    d = np.abs(blocks).max(axis=1) / np.float32(127)
    inv = np.divide(1, d, out=np.zeros_like(d), where=d != 0)
    q = np.round(blocks * inv[:, None]).astype(np.int8)
    d16 = _f16(d)
    data = b"".join(d16[i].tobytes() + q[i].tobytes() for i in range(len(q)))
    decoded = q.astype(np.float32) * d16.astype(np.float32)[:, None]
    bound = d[:, None] * 0.51 + 127 * np.abs(d - d16)[:, None] + 1e-7
    return data, decoded.reshape(x.shape), np.broadcast_to(bound, blocks.shape).reshape(x.shape)


QUANTIZERS = {"Q4_0": (quantize_q4_0, 4), "Q4_1": (quantize_q4_1, 4), "Q8_0": (quantize_q8_0, 8)}


def _nibbles(q: np.ndarray) -> bytes:
    """32 values of 4 bits: value j low and value j + 16 high in byte j."""
    return (q[:16] | (q[16:] << 4)).astype(np.uint8).tobytes()


# -- the tiny model, quantised --------------------------------------------------------------


def write_quantized_gguf(path: Path, kind: str):
    """A tiny llama GGUF whose 2-D weights are ``kind`` blocks (norms stay F32).

    Returns (path, source model, config, {GGUF name: (decoded values, error bound)}), the
    decoded values and bounds in GGUF (permuted) row order."""
    config = {**TINY_CONFIG, "vocab_size": len(tiny_vocab())}
    model = build_tiny_llama(config)
    quantize = QUANTIZERS[kind][0]
    tensors, expected = [], {}
    for name, array in gguf_tensors(model, config).items():
        values = np.array(array, dtype=np.float32)
        if values.ndim == 2:
            data, decoded, bound = quantize(values)
            tensors.append((name, values.shape, kind, data))
            expected[name] = (decoded, bound)
        else:
            tensors.append((name, values.shape, "F32", values.tobytes()))
    write_gguf(path, {**llama_metadata(config), **tokenizer_metadata()}, tensors)
    return path, model, config, expected


def _hf_order(gguf_name: str, a: np.ndarray, config: dict) -> np.ndarray:
    """Rows of a GGUF Q or K tensor put back in Hugging Face order (others as they are)."""
    heads = {"attn_q": config["num_attention_heads"], "attn_k": config["num_key_value_heads"]}
    kind = gguf_name.split(".")[-2]
    if kind not in heads:
        return a
    hf_row_of = llamacpp_permute(np.arange(a.shape[0])[:, None], heads[kind])[:, 0]
    out = np.empty_like(a)
    out[hf_row_of] = a
    return out


def _hf_name(gguf_name: str) -> str:
    """Independent of mlxctl's own table: the names mlx-lm's llama uses."""
    names = {"token_embd": "model.embed_tokens", "output": "lm_head", "attn_q": "self_attn.q_proj",
             "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
             "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    parts = gguf_name.split(".")
    if parts[0] == "blk":
        return f"model.layers.{parts[1]}.{names[parts[2]]}"
    return names[parts[0]]


@pytest.mark.parametrize("kind", ["Q4_0", "Q4_1", "Q8_0"])
def test_quantized_tensors_import_to_the_values_their_blocks_hold(tmp_path, kind):
    path, source, config, expected = write_quantized_gguf(tmp_path / f"tiny-{kind}.gguf", kind)
    types = read_header(path).tensor_types
    assert types["blk.0.attn_q.weight"] == kind and types["blk.0.attn_norm.weight"] == "F32"

    out = import_gguf(path, tmp_path / "out")
    bits = QUANTIZERS[kind][1]
    quantization = json.loads((out / "config.json").read_text())["quantization"]
    assert quantization == {"group_size": 32, "bits": bits, "mode": "affine"}
    weights = mx.load(str(out / "model.safetensors"))
    source_weights = dict(_flat(source))
    assert len(expected) == 1 + 7 * config["num_hidden_layers"]  # tied: no output.weight

    for gguf_name, (decoded, bound) in expected.items():
        module = _hf_name(gguf_name)
        w, scales, biases = (weights[f"{module}.{p}"] for p in ("weight", "scales", "biases"))
        assert w.dtype == mx.uint32 and w.shape[-1] * 32 // bits == decoded.shape[-1], module
        got = np.array(mx.dequantize(w, scales.astype(mx.float32), biases.astype(mx.float32),
                                     group_size=32, bits=bits))
        want = _hf_order(gguf_name, decoded, config)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=module)
        # and the float weights they stand for, within each block's quantisation error
        err = np.abs(got - np.array(source_weights[f"{module}.weight"]))
        assert (err <= _hf_order(gguf_name, bound, config)).all(), (module, float(err.max()))
        assert err.max() > 0  # really quantised: the test would see a lossless import as wrong

    norms = [n for n in weights if n.endswith("norm.weight")]
    assert norms and all(weights[n].dtype == mx.float32 for n in norms)
    for n in norms:
        assert mx.array_equal(weights[n], source_weights[n]).item(), n


@pytest.mark.parametrize("kind", ["Q4_0", "Q4_1", "Q8_0"])
def test_quantized_import_runs_as_the_model_its_blocks_encode(tmp_path, kind):
    """mlx-lm loads the folder as a quantised model whose logits are those of a float model
    holding the decoded block values."""
    from mlx_lm import load

    path, source, config, expected = write_quantized_gguf(tmp_path / f"tiny-{kind}.gguf", kind)
    model, _ = load(str(import_gguf(path, tmp_path / "out")))
    assert type(model.model.layers[0].self_attn.q_proj).__name__ == "QuantizedLinear"

    reference = build_tiny_llama(config)
    reference.load_weights([(f"{_hf_name(n)}.weight", mx.array(_hf_order(n, d, config)))
                            for n, (d, _) in expected.items()], strict=False)
    got, want = model(TOKENS).astype(mx.float32), reference(TOKENS).astype(mx.float32)
    assert mx.allclose(got, want, atol=2e-3, rtol=1e-3).item(), mx.abs(got - want).max().item()
    assert not mx.allclose(got, source(TOKENS), atol=1e-4).item()  # the blocks, not the source


def test_a_q4_0_block_by_hand():
    """The packing itself: d = max / -8, value j low and j + 16 high in byte j."""
    x = np.zeros(32, dtype=np.float32)
    x[0], x[1], x[16], x[17] = -8.0, 4.0, 1.0, 7.9  # max |x| is -8: d = 1
    data, decoded, _ = quantize_q4_0(x)
    assert len(data) == 18 and np.frombuffer(data[:2], np.float16)[0] == 1.0
    assert data[2] == 0 | (9 << 4)  # q[0] = -8 + 8 = 0; q[16] = 1 + 8 = 9
    assert data[3] == 12 | (15 << 4)  # q[1] = 12; q[17] = round(15.9) = 16, clipped to 15
    assert decoded[[0, 1, 16, 17]].tolist() == [-8.0, 4.0, 1.0, 7.0]


def _flat(model):
    from mlx.utils import tree_flatten

    return tree_flatten(model.parameters())


def test_mixed_5_and_8_bit_blocks_run_in_mlx_lm(tmp_path):
    """Q5_0 attention and Q8_0 feed-forward blocks (random bytes, llama.cpp's values as the
    reference): config.json's per-module bits let mlx-lm load the mix and compute as a float
    model of those values."""
    from mlx_lm import load

    from tests.models.test_gguf_block_types import LAYOUTS, REFERENCE

    config = {**TINY_CONFIG, "vocab_size": len(tiny_vocab())}
    rng = np.random.default_rng(3)
    tensors, reference = [], {}
    for name, array in gguf_tensors(build_tiny_llama(config), config).items():
        shape = tuple(array.shape)
        if len(shape) == 1:
            tensors.append((name, shape, "F32", np.array(array, dtype=np.float32).tobytes()))
            continue
        kind = "Q5_0" if ".attn_" in name else "Q8_0"
        per_block, size, halves = LAYOUTS[kind]
        blocks = []
        for _ in range(int(np.prod(shape)) // per_block):
            raw = bytearray(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
            for at in halves:
                raw[at : at + 2] = np.float16(rng.uniform(-0.01, 0.01)).tobytes()
            blocks.append(bytes(raw))
        values = np.array([v for b in blocks for v in REFERENCE[kind](b)], np.float32).reshape(shape)
        tensors.append((name, shape, kind, b"".join(blocks)))
        reference[f"{_hf_name(name)}.weight"] = mx.array(_hf_order(name, values, config))
    write_gguf(tmp_path / "mixed.gguf", {**llama_metadata(config), **tokenizer_metadata()}, tensors)

    out = import_gguf(tmp_path / "mixed.gguf", tmp_path / "out")
    quantization = json.loads((out / "config.json").read_text())["quantization"]
    assert quantization["bits"] == 5 and quantization["model.layers.0.mlp.up_proj"]["bits"] == 8
    model, _ = load(str(out))
    float_model = build_tiny_llama(config)
    float_model.load_weights(list(reference.items()), strict=False)
    got, want = model(TOKENS).astype(mx.float32), float_model(TOKENS).astype(mx.float32)
    assert weights_dtype(out) == mx.float16  # no K-quant in the file: float16 scales, as stored
    assert mx.allclose(got, want, atol=2e-3, rtol=1e-3).item(), mx.abs(got - want).max().item()


def weights_dtype(folder):
    return mx.load(str(folder / "model.safetensors"))["model.layers.0.mlp.up_proj.scales"].dtype
