"""Tiny GGUFs of any architecture, from seeded random mlx-lm models, with llama.cpp's names.

The tests give the GGUF name of each mlx-lm module (their own tables, not mlxctl's), the
metadata keys llama.cpp writes, and which tensor type each weight gets: F32, F16, Q8_0 (quantised
from the source with llama.cpp's reference quantiser) or Q4_K (random blocks, decoded with
llama.cpp's loops). ``write_arch_gguf`` returns the float model the blocks encode, which the
imported folder must compute.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten, tree_unflatten

from tests.models.gguf_writer import write_gguf
from tests.models.helpers import tokenizer_metadata
from tests.models.test_gguf_block_types import LAYOUTS, REFERENCE
from tests.models.test_gguf_quantized import quantize_q8_0

TOP = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}
TOKENS = mx.array([[1, 40, 70, 90, 2, 120, 200, 5, 77, 31]])


def random_model(module, config: dict, seed: int = 0):
    mx.random.seed(seed)
    model = module.Model(module.ModelArgs.from_dict(config))
    params = tree_flatten(model.parameters())
    model.update(tree_unflatten([(k, mx.random.normal(v.shape) * 0.2) for k, v in params]))
    mx.eval(model.parameters())
    return model


def gguf_name(name: str, block: dict) -> str:
    module, suffix = name.rsplit(".", 1)
    if module.startswith("model.layers."):
        _, _, index, rest = module.split(".", 3)
        return f"blk.{index}.{block[rest]}.{suffix}"
    return f"{TOP[module]}.{suffix}"


def u32(v: int) -> mx.array:
    return mx.array(v, dtype=mx.uint32)


def f32(v: float) -> mx.array:
    return mx.array(v, dtype=mx.float32)


def common_metadata(arch: str, c: dict) -> dict:
    return {
        "general.architecture": arch,
        f"{arch}.embedding_length": u32(c["hidden_size"]),
        f"{arch}.feed_forward_length": u32(c["intermediate_size"]),
        f"{arch}.block_count": u32(c["num_hidden_layers"]),
        f"{arch}.attention.head_count": u32(c["num_attention_heads"]),
        f"{arch}.attention.head_count_kv": u32(c["num_key_value_heads"]),
        f"{arch}.context_length": u32(c["max_position_embeddings"]),
        f"{arch}.rope.freq_base": f32(c["rope_theta"]),
        f"{arch}.attention.layer_norm_rms_epsilon": f32(c["rms_norm_eps"]),
    }


def random_q4_k(shape: tuple[int, ...], seed: int) -> tuple[bytes, np.ndarray]:
    """Random Q4_K blocks of small scales (values within about +-0.5), and their values."""
    per_block, size, halves = LAYOUTS["Q4_K"]
    rng = np.random.default_rng(seed)
    blocks = []
    for _ in range(int(np.prod(shape)) // per_block):
        raw = bytearray(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        for at in halves:
            raw[at : at + 2] = np.float16(rng.uniform(-5e-4, 5e-4)).tobytes()
        blocks.append(bytes(raw))
    values = [v for b in blocks for v in REFERENCE["Q4_K"](b)]
    return b"".join(blocks), np.array(values, dtype=np.float32).reshape(shape)


def _encode(name: str, values: np.ndarray, kind: str, seed: int) -> tuple[bytes, np.ndarray]:
    if kind == "Q8_0":
        data, decoded, _ = quantize_q8_0(values)
        return data, decoded
    if kind == "Q4_K":
        return random_q4_k(values.shape, seed)
    if kind == "F16":
        half = values.astype(np.float16)
        return half.tobytes(), half.astype(np.float32)
    return values.astype(np.float32).tobytes(), values


def write_arch_gguf(
    path: Path,
    model,
    block: dict,
    metadata: dict,
    kind_of: Callable[[str, np.ndarray], str] = lambda name, values: "F32",
    norm_shift: float = 0.0,
    extra: dict | None = None,
    to_gguf: Callable[[str, np.ndarray], np.ndarray] = lambda name, values: values,
):
    """Write ``model`` as a GGUF; returns a copy of it holding the values the file encodes.

    ``kind_of(gguf name, values)`` picks each tensor's type; ``to_gguf`` reorders rows the way
    the converter does (llama's Q/K permutation) and must be undone by the importer;
    ``extra`` adds F32 tensors (rope factors) under their GGUF names."""
    tensors, encoded = [], []
    for seed, (name, value) in enumerate(tree_flatten(model.parameters())):
        target = gguf_name(name, block)
        values = np.array(value.astype(mx.float32))
        values = values + norm_shift if name.endswith("norm.weight") else values
        kind = kind_of(target, values)
        data, decoded = _encode(target, to_gguf(target, values), kind, seed)
        tensors.append((target, values.shape, kind, data))
        decoded = _restore(target, decoded, values, to_gguf)
        shift = norm_shift if name.endswith("norm.weight") else 0.0
        encoded.append((name, mx.array(decoded - shift)))
    for name, values in (extra or {}).items():
        tensors.append((name, values.shape, "F32", values.astype(np.float32).tobytes()))
    write_gguf(path, {**metadata, **tokenizer_metadata("qwen2")}, tensors)
    reference = copy.deepcopy(model)
    reference.load_weights(encoded)
    return reference


def _restore(name: str, decoded: np.ndarray, values: np.ndarray, to_gguf) -> np.ndarray:
    """Decoded values in the source's row order (``to_gguf`` applied to row indices, undone)."""
    rows = np.arange(values.shape[0], dtype=np.float64).reshape(-1, *([1] * (values.ndim - 1)))
    order = to_gguf(name, np.broadcast_to(rows, values.shape).copy())
    index = order.reshape(values.shape[0], -1)[:, 0].astype(int)
    out = np.empty_like(decoded)
    out[index] = decoded
    return out


def logits(model) -> np.ndarray:
    return np.array(model(TOKENS).astype(mx.float32))


def load_folder(folder):
    from mlx_lm import load

    return load(str(folder))


def assert_computes(model, reference, atol: float = 1e-4) -> None:
    """``model`` (imported) computes ``reference``'s logits: first as loaded, within float16
    rounding where its quantisation scales are float16 (mlx then computes parts in float16),
    then exactly with those scales widened to float32 (the values themselves are exact)."""
    from mlx.utils import tree_map

    widened = tree_map(lambda a: a.astype(mx.float32) if a.dtype == mx.float16 else a, model.parameters())
    loose = 3e-2 if any(a.dtype == mx.float16 for _, a in tree_flatten(model.parameters())) else atol
    np.testing.assert_allclose(logits(model), logits(reference), atol=loose, rtol=loose)
    model.update(widened)
    np.testing.assert_allclose(logits(model), logits(reference), atol=atol, rtol=1e-4)
