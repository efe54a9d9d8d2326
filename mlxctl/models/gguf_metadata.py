"""Typed reads of GGUF metadata values (``mlx.core.load`` gives scalars as 0-d arrays)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np


def meta_int(metadata: Mapping[str, object], key: str) -> int | None:
    value = metadata.get(key)
    return None if value is None else int(_scalar(value))


def meta_float(metadata: Mapping[str, object], key: str, default: float) -> float:
    """A float; float32 values come back as their shortest decimal (1e-05, not 9.9999997e-06)."""
    value = metadata.get(key)
    if value is None:
        return default
    if str(getattr(value, "dtype", "")).endswith("float32"):
        return float(str(np.float32(_scalar(value))))
    return float(_scalar(value))


def meta_bool(metadata: Mapping[str, object], key: str) -> bool:
    value = metadata.get(key)
    return False if value is None else bool(_scalar(value))


def _scalar(value: object) -> object:
    return value.item() if hasattr(value, "item") else value
