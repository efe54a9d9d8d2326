"""Import a GGUF file as an MLX / Hugging Face model folder (architectures: ``gguf_archs``).

The folder holds config.json, model.safetensors, tokenizer.json, tokenizer_config.json,
generation_config.json and manifest.json; ``mlx_lm.load(folder)`` loads it. Quantised tensors
stay quantised, as mlx-lm affine triplets with group size 32 (:mod:`mlxctl.models.gguf_decode`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import mlx.core as mx

from mlxctl.errors import ModelFormatError
from mlxctl.models.digest import file_sha256
from mlxctl.models.gguf_archs import ARCHITECTURES
from mlxctl.models.gguf_config import generation_config, head_counts
from mlxctl.models.gguf_decode import SUPPORTED_TYPES, load_tensors
from mlxctl.models.gguf_header import read_header
from mlxctl.models.gguf_reader import read_gguf
from mlxctl.models.gguf_tokenizer import write_tokenizer
from mlxctl.models.gguf_weights import convert_weights, quantization_config
from mlxctl.models.manifest import write_manifest

Progress = Callable[[str], None] | None

SUPPORTED_ARCHITECTURES = tuple(ARCHITECTURES)
SUPPORTED_TENSOR_TYPES = SUPPORTED_TYPES


def recipe(architecture: str) -> str:
    """The manifest's recipe of an import: ``gguf-`` and the GGUF architecture (``gguf-qwen2``)."""
    return f"gguf-{architecture}"


def import_gguf(
    gguf_path: Path,
    out_dir: Path,
    progress: Progress = None,
    *,
    name: str | None = None,
    source: str | None = None,
    source_sha256: str | None = None,
) -> Path:
    """Convert ``gguf_path`` into a model folder at ``out_dir`` (created if needed)."""
    gguf_path, out_dir = Path(gguf_path), Path(out_dir)
    check_supported(gguf_path)
    _say(progress, f"reading {gguf_path.name}")
    gguf = read_gguf(gguf_path)
    tensors, metadata = load_tensors(gguf), gguf.metadata
    arch = ARCHITECTURES[metadata["general.architecture"]]
    rope = {name: tensors.pop(name) for name in arch.rope_tensors if name in tensors}
    weights = arch.fix_weights(
        convert_weights(tensors, *head_counts(metadata), metadata["general.architecture"])
    )
    _say(progress, f"writing {len(weights)} tensors")
    _write_folder(out_dir, weights, arch.config(metadata, weights, rope), metadata)
    write_manifest(
        out_dir,
        name=name or gguf_path.stem,
        source=source or str(gguf_path.resolve()),
        source_sha256=source_sha256 or file_sha256(gguf_path),
        recipe=recipe(metadata["general.architecture"]),
    )
    return out_dir


def check_supported(gguf_path: Path) -> None:
    """Raise ModelFormatError unless the file is a GGUF of an architecture and types we read."""
    header = read_header(gguf_path)
    if header.architecture not in SUPPORTED_ARCHITECTURES:
        raise ModelFormatError(
            f"{gguf_path.name}: GGUF architecture {header.architecture!r} is not supported",
            hint=f"supported GGUF architectures: {', '.join(SUPPORTED_ARCHITECTURES)}",
        )
    unsupported = {n: t for n, t in header.tensor_types.items() if t not in SUPPORTED_TENSOR_TYPES}
    if unsupported:
        raise _tensor_type_error(gguf_path, unsupported)


def _tensor_type_error(gguf_path: Path, unsupported: dict[str, str]) -> ModelFormatError:
    types = ", ".join(sorted(set(unsupported.values())))
    first = next(iter(unsupported))
    return ModelFormatError(
        f"{gguf_path.name}: tensor type {types} is not supported "
        f"({first} and {len(unsupported) - 1} more tensors)",
        hint=f"use a GGUF quantised as {', '.join(SUPPORTED_TENSOR_TYPES)}",
    )


def _write_folder(out_dir: Path, weights: dict, config: dict, metadata: dict) -> None:
    if quantization := quantization_config(weights):
        config["quantization"] = quantization
    out_dir.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(out_dir / "model.safetensors"), weights, metadata={"format": "mlx"})
    write_tokenizer(metadata, out_dir, config["max_position_embeddings"])
    _write_json(out_dir / "config.json", config)
    _write_json(out_dir / "generation_config.json", generation_config(metadata))


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _say(progress: Progress, message: str) -> None:
    if progress is not None:
        progress(message)
