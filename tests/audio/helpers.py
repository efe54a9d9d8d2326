"""A small random CTranslate2 Whisper (WhisperSpec) and a matching toy tokenizer, for fast tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from mlxctl.audio.ctranslate2 import write_model

SPECIALS = ("<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|translate|>", "<|transcribe|>",
            "<|startoflm|>", "<|startofprev|>", "<|nocaptions|>", "<|notimestamps|>")
WORDS = ("a", "b", "c", "d", "e", "h", "l", "o", "t", "s", "Ġ")


def toy_dims(state: int = 64, layers: int = 2) -> dict[str, int]:
    n_vocab = len(WORDS) + len(SPECIALS) + 1501
    return {"n_mels": 80, "n_audio_ctx": 1500, "n_audio_state": state, "n_audio_head": state // 32,
            "n_audio_layer": layers, "n_vocab": n_vocab, "n_text_ctx": 448, "n_text_state": state,
            "n_text_head": state // 32, "n_text_layer": layers}


def toy_variables(dims: dict[str, int], seed: int = 0, int8: bool = False) -> dict[str, np.ndarray]:
    """Variables as CTranslate2's Whisper converter names them (fused Q/K/V, zero key bias)."""
    rng = np.random.default_rng(seed)
    s = dims["n_audio_state"]

    def w(*shape):
        return rng.standard_normal(shape).astype(np.float16) * np.float16(0.05)

    v: dict[str, np.ndarray] = {
        "encoder/num_heads": np.array(dims["n_audio_head"], dtype=np.int16),
        "decoder/num_heads": np.array(dims["n_text_head"], dtype=np.int16),
        "decoder/pre_norm": np.array(1, dtype=np.int8),
        "decoder/activation": np.array(3, dtype=np.int8),
        "encoder/conv1/weight": w(s, dims["n_mels"], 3), "encoder/conv1/bias": w(s),
        "encoder/conv2/weight": w(s, s, 3), "encoder/conv2/bias": w(s),
        "encoder/position_encodings/encodings": w(dims["n_audio_ctx"], s),
        "encoder/layer_norm/gamma": w(s), "encoder/layer_norm/beta": w(s),
        "decoder/embeddings/weight": w(dims["n_vocab"], s),
        "decoder/position_encodings/encodings": w(dims["n_text_ctx"], s),
        "decoder/layer_norm/gamma": w(s), "decoder/layer_norm/beta": w(s),
    }

    def fused(prefix: str, parts: int, key_at: int | None) -> None:
        v[f"{prefix}/weight"] = w(parts * s, s)
        bias = w(parts * s)
        if key_at is not None:
            bias[key_at * s : (key_at + 1) * s] = 0
        v[f"{prefix}/bias"] = bias

    def block(prefix: str, cross: bool) -> None:
        for norm in ("self_attention/layer_norm", "ffn/layer_norm") + (("attention/layer_norm",) if cross else ()):
            v[f"{prefix}/{norm}/gamma"], v[f"{prefix}/{norm}/beta"] = w(s), w(s)
        fused(f"{prefix}/self_attention/linear_0", 3, 1)
        v[f"{prefix}/self_attention/linear_1/weight"], v[f"{prefix}/self_attention/linear_1/bias"] = w(s, s), w(s)
        v[f"{prefix}/ffn/linear_0/weight"], v[f"{prefix}/ffn/linear_0/bias"] = w(4 * s, s), w(4 * s)
        v[f"{prefix}/ffn/linear_1/weight"], v[f"{prefix}/ffn/linear_1/bias"] = w(s, 4 * s), w(s)
        if cross:
            v[f"{prefix}/attention/linear_0/weight"], v[f"{prefix}/attention/linear_0/bias"] = w(s, s), w(s)
            fused(f"{prefix}/attention/linear_1", 2, 0)
            v[f"{prefix}/attention/linear_2/weight"], v[f"{prefix}/attention/linear_2/bias"] = w(s, s), w(s)

    for i in range(dims["n_audio_layer"]):
        block(f"encoder/layer_{i}", cross=False)
    for i in range(dims["n_text_layer"]):
        block(f"decoder/layer_{i}", cross=True)
    if int8:
        for name in [n for n, a in v.items() if n.endswith("/weight") and a.ndim == 2]:
            value = v[name].astype(np.float32)
            scale = 127.0 / np.maximum(np.abs(value).max(axis=1), 1e-8)
            v[name] = np.rint(value * scale[:, None]).astype(np.int8)
            v[f"{name}_scale"] = scale.astype(np.float32)
    return v


def toy_tokenizer() -> dict:
    """A tokenizer.json shaped like faster-whisper's: BPE vocab, specials, no timestamps."""
    vocab = {word: i for i, word in enumerate(WORDS)}
    added = [{"id": len(WORDS) + i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in enumerate(SPECIALS)]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                              "use_regex": True},
            "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": False, "vocab": vocab, "merges": []}}


def toy_faster_whisper(folder: Path, *, int8: bool = False, seed: int = 0) -> Path:
    """A faster-whisper folder (model.bin, config.json, tokenizer.json) with random weights."""
    folder.mkdir(parents=True, exist_ok=True)
    dims = toy_dims()
    write_model(folder / "model.bin", "WhisperSpec", toy_variables(dims, seed, int8),
                aliases={"decoder/projection/weight": "decoder/embeddings/weight"})
    (folder / "config.json").write_text(json.dumps({"alignment_heads": [[1, 0], [1, 1]]}))
    (folder / "tokenizer.json").write_text(json.dumps(toy_tokenizer()))
    return folder
