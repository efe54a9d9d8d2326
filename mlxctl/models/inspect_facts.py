"""The facts a model's headers give, shared by the format readers of :mod:`.inspect`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8": 1}


@dataclass
class _Facts:
    """What the headers say; every field may be unknown for some formats."""

    format: str
    files: list[Path]
    architecture: str | None = None
    model_type: str | None = None
    parameters: int | None = None
    weights_bytes: int | None = None
    dtype: str | None = None
    quantization: dict | None = None
    tensor_types: dict[str, dict] = field(default_factory=dict)
    context_length: int | None = None
    attention: dict | None = None  # layers, kv_heads, head_dim, (value_dim)
    chat_template: str | None = None
    decoder: bool | None = None


def _size(path: Path) -> int:
    return path.stat().st_size


def _tally(types: dict[str, dict], label: str, parameters: int) -> None:
    """Count one tensor of ``parameters`` under ``label`` in a ``tensor_types`` table."""
    entry = types.setdefault(label, {"tensors": 0, "parameters": 0})
    entry["tensors"] += 1
    entry["parameters"] += parameters
