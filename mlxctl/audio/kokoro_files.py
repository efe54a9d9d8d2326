"""The files of a Kokoro folder: shipped ONNX folders, mlx-audio folders, the phoneme vocabulary
and the voice packs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from mlxctl.errors import ModelFormatError


def is_kokoro_onnx(folder: Path) -> bool:
    """Whether ``folder`` holds a Kokoro ONNX model as shipped: an ``.onnx``, the phoneme vocab
    (``vocab.json``, or a ``config.json`` with ``vocab``) and voice packs (``voices*.npz``, or
    kokoro-onnx's ``voices*.bin``, an npz by another name)."""
    folder = Path(folder)
    return (folder.is_dir() and any(folder.glob("*.onnx")) and find_vocab(folder) is not None
            and bool(voice_files(folder)))


def find_vocab(folder: Path) -> Path | None:
    if (folder / "vocab.json").is_file():
        return folder / "vocab.json"
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return folder / "config.json" if isinstance(config, dict) and isinstance(config.get("vocab"), dict) else None


def voice_files(folder: Path) -> list[Path]:
    return sorted([*Path(folder).glob("voices*.npz"), *Path(folder).glob("voices*.bin")])


def is_mlx_kokoro(folder: Path) -> bool:
    """Whether ``folder`` is an mlx-audio Kokoro folder (config.json, safetensors, voices)."""
    try:
        config = json.loads((Path(folder) / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return (isinstance(config, dict) and config.get("model_type") == "kokoro" and "istftnet" in config
            and any(Path(folder).glob("*.safetensors")))


def read_vocab(path: Path) -> dict[str, int]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelFormatError(f"cannot read the phoneme vocabulary {path}: {exc}") from None
    vocab = data.get("vocab", data) if isinstance(data, dict) else None
    if not isinstance(vocab, dict) or not all(isinstance(k, str) and isinstance(v, int) for k, v in vocab.items()):
        raise ModelFormatError(f"{path} is not a phoneme vocabulary (symbol → id)")
    return vocab


def read_voices(folder: Path, style_dim: int) -> dict[str, np.ndarray]:
    """Every voice pack in the folder's ``voices*.npz`` / ``voices*.bin`` files, as (rows, 1, 2 * style_dim) float32."""
    voices: dict[str, np.ndarray] = {}
    for path in voice_files(folder):
        try:
            with np.load(path, allow_pickle=False) as packs:
                for name in packs.files:
                    voices[name] = np.asarray(packs[name], dtype=np.float32)
        except (OSError, ValueError) as exc:
            raise ModelFormatError(f"cannot read the voice packs in {path}: {exc}") from None
    if not voices:
        raise ModelFormatError(f"{folder} has no voice packs (voices*.npz or voices*.bin)")
    for name, pack in voices.items():
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or name.startswith("."):
            raise ModelFormatError(f"voice pack {name!r} has a name that cannot be a file name")
        if pack.ndim == 2:
            voices[name] = pack = pack[:, None, :]
        if pack.ndim != 3 or pack.shape[1:] != (1, 2 * style_dim):
            raise ModelFormatError(f"voice pack {name} has shape {pack.shape}, expected (rows, 1, {2 * style_dim})")
    return voices
