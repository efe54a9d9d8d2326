"""Convert a faster-whisper (CTranslate2) Whisper folder into one mlx-audio loads.

A faster-whisper folder holds ``model.bin`` (a CTranslate2 ``WhisperSpec``), ``config.json``
(alignment heads, suppressed ids) and ``tokenizer.json``. The converted folder holds:

- ``weights.safetensors``: the weights under mlx-audio's Whisper parameter names. CTranslate2
  fuses the self-attention Q/K/V projections (``self_attention/linear_0``) and the
  cross-attention K/V projections (``attention/linear_1``); they are split here. Whisper's key
  projection has no bias: CTranslate2 stores zeros there, and a key bias could not change the
  attention weights anyway (it adds the same ``q . b`` to every key of a query), so it is dropped.
  Conv1d kernels go from (out, in, width) to MLX's (out, width, in); int8/int16 weights are
  dequantised with their scales. float16 weights stay float16 (the loader widens them to
  float32 on the CPU); everything else is stored as float32.
- ``config.json``: mlx-audio's Whisper dimensions (``model_type: whisper``);
- ``tokenizer.json``: the shipped tokenizer plus the 1501 timestamp tokens ``<|0.00|>`` ...
  ``<|30.00|>`` it lacks (without them mlx-audio's timestamp rules break and the transcript
  comes out as ".") and ``tokenizer_config.json`` / ``preprocessor_config.json`` so that
  transformers' ``WhisperProcessor`` loads the folder;
- ``generation_config.json``: the alignment heads (for word timestamps), when known.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mlxctl.audio.ctranslate2 import Ct2Model, dequantized, read_model
from mlxctl.errors import ModelFormatError

RECIPE = "ctranslate2-whisper"
WEIGHTS = "weights.safetensors"
N_TIMESTAMPS = 1501  # <|0.00|> ... <|30.00|> in steps of 0.02 s
_GELU = 3  # CTranslate2's ActivationType::GELU
_LAYER = re.compile(r"^(encoder|decoder)/layer_(\d+)/")
_IGNORED = ("encoder/position_encodings/encodings",)  # sinusoids: mlx-audio computes them

Progress = Callable[[str], None] | None


def is_faster_whisper(folder: Path) -> bool:
    """Whether ``folder`` holds a CTranslate2 Whisper model (reads only the file's header)."""
    path = Path(folder) / "model.bin"
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return False
    if len(head) < 8:
        return False
    size = int.from_bytes(head[4:6], "little")
    return head[6 : 6 + size].rstrip(b"\0") == b"WhisperSpec"


def is_mlx_whisper(folder: Path) -> bool:
    """Whether ``folder`` is an mlx-audio Whisper folder (config.json + safetensors)."""
    try:
        config = json.loads((Path(folder) / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return (
        isinstance(config, dict)
        and config.get("model_type") == "whisper"
        and "n_mels" in config
        and any(Path(folder).glob("*.safetensors"))
    )


# --- weights --------------------------------------------------------------------------------


class _Mapper:
    """Pulls CTranslate2 variables into mlx-audio names, remembering which were used."""

    def __init__(self, model: Ct2Model):
        self.vars = model.variables
        self.used: set[str] = set()
        self.out: dict[str, np.ndarray] = {}

    def get(self, name: str) -> np.ndarray:
        if name not in self.vars:
            raise ModelFormatError(f"the Whisper model.bin has no variable {name}")
        self.used.update((name, f"{name}_scale"))
        return np.asarray(dequantized(self.vars, name))

    def put(self, name: str, value: np.ndarray) -> None:
        self.out[name] = value

    def linear(self, src: str, dst: str) -> None:
        self.put(f"{dst}.weight", self.get(f"{src}/weight"))
        if f"{src}/bias" in self.vars:
            self.put(f"{dst}.bias", self.get(f"{src}/bias"))

    def fused(self, src: str, parts: tuple[str, ...]) -> None:
        """A projection CTranslate2 fused from several: split its rows evenly."""
        weight = self.get(f"{src}/weight")
        bias = self.get(f"{src}/bias") if f"{src}/bias" in self.vars else None
        if weight.shape[0] % len(parts):
            raise ModelFormatError(f"{src} has {weight.shape[0]} rows, not {len(parts)} equal parts")
        for i, (dst, w) in enumerate(zip(parts, np.split(weight, len(parts)))):
            self.put(f"{dst}.weight", w)
            if bias is not None and not dst.endswith(".key"):  # Whisper's key has no bias
                self.put(f"{dst}.bias", np.split(bias, len(parts))[i])

    def norm(self, src: str, dst: str) -> None:
        self.put(f"{dst}.weight", self.get(f"{src}/gamma"))
        self.put(f"{dst}.bias", self.get(f"{src}/beta"))

    def conv(self, src: str, dst: str) -> None:
        self.put(f"{dst}.weight", np.ascontiguousarray(self.get(f"{src}/weight").transpose(0, 2, 1)))
        self.put(f"{dst}.bias", self.get(f"{src}/bias"))


def layer_count(model: Ct2Model, side: str) -> int:
    found = {int(m.group(2)) for name in model.variables if (m := _LAYER.match(name)) and m.group(1) == side}
    if not found:
        raise ModelFormatError(f"the Whisper model.bin has no {side} layers")
    if found != set(range(len(found))):
        raise ModelFormatError(f"the Whisper model.bin's {side} layers are not numbered 0..{len(found) - 1}")
    return len(found)


def dimensions(model: Ct2Model) -> dict[str, int]:
    """mlx-audio's ``ModelDimensions`` of the model, read from the variables' shapes."""
    v = model.variables
    try:
        conv1, embed = v["encoder/conv1/weight"], v["decoder/embeddings/weight"]
    except KeyError as exc:
        raise ModelFormatError(f"the Whisper model.bin has no variable {exc.args[0]}") from None
    audio_state, text_state = int(conv1.shape[0]), int(embed.shape[1])
    audio_pos = v.get("encoder/position_encodings/encodings")
    text_pos = v.get("decoder/position_encodings/encodings")
    return {
        "n_mels": int(conv1.shape[1]),
        "n_audio_ctx": int(audio_pos.shape[0]) if audio_pos is not None else 1500,
        "n_audio_state": audio_state,
        "n_audio_head": model.scalar("encoder/num_heads") or audio_state // 64,
        "n_audio_layer": layer_count(model, "encoder"),
        "n_vocab": int(embed.shape[0]),
        "n_text_ctx": int(text_pos.shape[0]) if text_pos is not None else 448,
        "n_text_state": text_state,
        "n_text_head": model.scalar("decoder/num_heads") or text_state // 64,
        "n_text_layer": layer_count(model, "decoder"),
    }


def whisper_weights(model: Ct2Model) -> dict[str, np.ndarray]:
    """The model's weights by mlx-audio Whisper parameter name (float16 or float32 arrays)."""
    _check_spec(model)
    dims = dimensions(model)
    m = _Mapper(model)
    m.conv("encoder/conv1", "encoder.conv1")
    m.conv("encoder/conv2", "encoder.conv2")
    for i in range(dims["n_audio_layer"]):
        src, dst = f"encoder/layer_{i}", f"encoder.blocks.{i}"
        _self_attention(m, src, dst)
        _mlp(m, src, dst)
    m.norm("encoder/layer_norm", "encoder.ln_post")
    m.put("decoder.token_embedding.weight", m.get("decoder/embeddings/weight"))
    m.put("decoder.positional_embedding", m.get("decoder/position_encodings/encodings"))
    for i in range(dims["n_text_layer"]):
        src, dst = f"decoder/layer_{i}", f"decoder.blocks.{i}"
        _self_attention(m, src, dst)
        m.norm(f"{src}/attention/layer_norm", f"{dst}.cross_attn_ln")
        m.linear(f"{src}/attention/linear_0", f"{dst}.cross_attn.query")
        m.fused(f"{src}/attention/linear_1", (f"{dst}.cross_attn.key", f"{dst}.cross_attn.value"))
        m.linear(f"{src}/attention/linear_2", f"{dst}.cross_attn.out")
        _mlp(m, src, dst)
    m.norm("decoder/layer_norm", "decoder.ln")
    _check_projection(model)
    m.used.update(("decoder/projection/weight", *_IGNORED))
    left = sorted(n for n, a in model.variables.items() if n not in m.used and a.ndim > 0)
    if left:
        raise ModelFormatError(f"the Whisper model.bin has variables this converter does not know: {', '.join(left[:5])}")
    return {name: _storage(value) for name, value in m.out.items()}


def _self_attention(m: _Mapper, src: str, dst: str) -> None:
    m.norm(f"{src}/self_attention/layer_norm", f"{dst}.attn_ln")
    m.fused(f"{src}/self_attention/linear_0", (f"{dst}.attn.query", f"{dst}.attn.key", f"{dst}.attn.value"))
    m.linear(f"{src}/self_attention/linear_1", f"{dst}.attn.out")


def _mlp(m: _Mapper, src: str, dst: str) -> None:
    m.norm(f"{src}/ffn/layer_norm", f"{dst}.mlp_ln")
    m.linear(f"{src}/ffn/linear_0", f"{dst}.mlp1")
    m.linear(f"{src}/ffn/linear_1", f"{dst}.mlp2")


def _check_spec(model: Ct2Model) -> None:
    if model.spec != "WhisperSpec":
        raise ModelFormatError(f"model.bin holds a CTranslate2 {model.spec or 'model'}, not Whisper")
    checks = (("decoder/pre_norm", 1, "post-norm layers"), ("decoder/activation", _GELU, "an activation other than GELU"),
              ("decoder/alibi", 0, "ALiBi"), ("decoder/scale_embeddings", 0, "scaled embeddings"))
    for name, want, what in checks:
        got = model.scalar(name)
        if got is not None and got != want:
            raise ModelFormatError(f"this Whisper model.bin uses {what}, which mlx-audio's Whisper does not")


def _check_projection(model: Ct2Model) -> None:
    """mlx-audio ties the output projection to the token embedding: it must be the same."""
    name = "decoder/projection/weight"
    if name not in model.variables or model.aliases.get(name) == "decoder/embeddings/weight":
        return
    if not np.array_equal(model.variables[name], model.variables["decoder/embeddings/weight"]):
        raise ModelFormatError("this Whisper model.bin has an output projection apart from its embedding")


def _storage(value: np.ndarray) -> np.ndarray:
    return value if value.dtype == np.float16 else value.astype(np.float32)


# --- tokenizer ------------------------------------------------------------------------------


def timestamp_token(i: int) -> str:
    return f"<|{i * 0.02:.2f}|>"


def add_timestamp_tokens(tokenizer: dict[str, Any], n_vocab: int) -> int:
    """Add ``<|0.00|>`` ... ``<|30.00|>`` after ``<|notimestamps|>`` when missing; how many were added.

    The ids must then cover the model's vocabulary exactly.
    """
    added = tokenizer.setdefault("added_tokens", [])
    ids = {t["content"]: t["id"] for t in added}
    vocab = tokenizer.get("model", {}).get("vocab", {})
    count = 0
    if timestamp_token(0) not in ids and timestamp_token(0) not in vocab:
        if "<|notimestamps|>" not in ids:
            raise ModelFormatError("tokenizer.json has no <|notimestamps|> token: it is not a Whisper tokenizer")
        first = ids["<|notimestamps|>"] + 1
        top = max([*ids.values(), *vocab.values()], default=-1)
        if top >= first:
            raise ModelFormatError(f"tokenizer.json has ids after <|notimestamps|> ({top}): cannot place timestamps")
        for i in range(N_TIMESTAMPS):
            added.append({"id": first + i, "content": timestamp_token(i), "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": False})
        count = N_TIMESTAMPS
    size = 1 + max([*(t["id"] for t in added), *vocab.values()])
    if size != n_vocab:
        raise ModelFormatError(f"the tokenizer has {size} tokens, the model {n_vocab}")
    return count


def _tokenizer_config(dims: dict[str, int]) -> dict:
    end = "<|endoftext|>"
    return {"tokenizer_class": "WhisperTokenizer", "processor_class": "WhisperProcessor", "bos_token": end,
            "eos_token": end, "unk_token": end, "pad_token": end, "model_max_length": dims["n_text_ctx"],
            "add_prefix_space": False, "errors": "replace"}


def _preprocessor_config(dims: dict[str, int]) -> dict:
    return {"feature_extractor_type": "WhisperFeatureExtractor", "processor_class": "WhisperProcessor",
            "feature_size": dims["n_mels"], "sampling_rate": 16000, "hop_length": 160, "chunk_length": 30,
            "n_fft": 400, "n_samples": 480000, "nb_max_frames": 3000, "padding_side": "right",
            "padding_value": 0.0, "return_attention_mask": False}


# --- the folder -----------------------------------------------------------------------------


def convert_whisper(src: Path, out: Path, progress: Progress = None, *, dtype: str | None = None) -> dict[str, Any]:
    """Write the mlx-audio folder for the faster-whisper folder ``src`` into ``out``.

    ``dtype`` (float16 or float32) stores every weight so; None keeps float16 weights float16.

    Returns facts for the manifest: dimensions, parameter count, stored dtypes, tokens added.
    """
    import mlx.core as mx

    src, out = Path(src), Path(out)
    if not is_faster_whisper(src):
        raise ModelFormatError(f"{src} is not a faster-whisper folder",
                               hint="it needs model.bin (a CTranslate2 Whisper) and tokenizer.json")
    tokenizer_path = src / "tokenizer.json"
    try:
        tokenizer = json.loads(tokenizer_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelFormatError(f"{src} has no tokenizer.json") from None
    except (OSError, ValueError) as exc:
        raise ModelFormatError(f"cannot read {tokenizer_path}: {exc}") from None
    _say(progress, f"reading {src / 'model.bin'}")
    model = read_model(src / "model.bin")
    _check_spec(model)
    dims = dimensions(model)
    added = add_timestamp_tokens(tokenizer, dims["n_vocab"])
    weights = whisper_weights(model)
    if dtype is not None:
        if dtype not in ("float16", "float32"):
            raise ModelFormatError(f"cannot store Whisper weights as {dtype}: use float16 or float32")
        weights = {k: v.astype(dtype) for k, v in weights.items()}
    out.mkdir(parents=True, exist_ok=True)
    _say(progress, f"writing {WEIGHTS} ({len(weights)} tensors)")
    mx.save_safetensors(str(out / WEIGHTS), {k: mx.array(v) for k, v in weights.items()}, metadata={"format": "mlx"})
    _write_json(out / "config.json", {"model_type": "whisper", **dims})
    _write_json(out / "tokenizer.json", tokenizer, indent=None)
    _write_json(out / "tokenizer_config.json", _tokenizer_config(dims))
    _write_json(out / "preprocessor_config.json", _preprocessor_config(dims))
    heads = _alignment_heads(src)
    if heads:
        _write_json(out / "generation_config.json", {"alignment_heads": heads})
    return {
        "dimensions": dims,
        "parameters": int(sum(v.size for v in weights.values())),
        "tensors": len(weights),
        "dtypes": sorted({str(v.dtype) for v in weights.values()}),
        "timestamp_tokens_added": added,
        "multilingual": dims["n_vocab"] >= 51865,
    }


def _alignment_heads(src: Path) -> list[list[int]] | None:
    try:
        heads = json.loads((src / "config.json").read_text()).get("alignment_heads")
    except (OSError, ValueError, AttributeError):
        return None
    if isinstance(heads, list) and all(isinstance(h, list) and len(h) == 2 for h in heads):
        return [[int(a), int(b)] for a, b in heads]
    return None


def _write_json(path: Path, data: Any, indent: int | None = 2) -> None:
    path.write_text(json.dumps(data, indent=indent, ensure_ascii=False) + "\n", encoding="utf-8")


def _say(progress: Progress, message: str) -> None:
    if progress is not None:
        progress(message)
