"""What every acquire source shares: the result, store names, clashes, paths inside a folder."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from mlxctl.errors import BadInputError, ModelFormatError
from mlxctl.models.manifest import read_manifest
from mlxctl.models.store import _PARTIAL_PREFIX, ModelStore


@dataclass(frozen=True)
class Acquired:
    name: str
    path: Path
    manifest: dict
    fetched: bool  # False when the store already held it
    converted: bool = False  # True when this call converted it to MLX


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


def check_name(name: str) -> str:
    """``name`` if it can name a store folder (letters, digits, ``._+-``), else BadInputError."""
    if not _NAME.match(name) or name.startswith(_PARTIAL_PREFIX):
        raise BadInputError(
            f"{name!r} cannot name a model in the store",
            hint="use letters, digits, '.', '_', '+' and '-', starting with a letter or digit",
        )
    return name


def safe_name(text: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-.") or "model"
    return cleaned if cleaned[0].isalnum() else f"m{cleaned}"


def existing(store: ModelStore, name: str, source: str) -> Acquired | None:
    """The store's model ``name`` if it came from ``source``; a clash if from elsewhere."""
    if not store.has(name):
        return None
    folder = store.model_path(name)
    manifest = read_manifest(folder) or {}
    if manifest.get("source") == source:
        return Acquired(name, folder, manifest, False)
    raise BadInputError(
        f"the store already has a model called {name} (from {manifest.get('source', 'elsewhere')})",
        hint=f"pick another name with --name, or remove it first: mlxctl model rm {name}",
    )


def inside(root: Path, rel: str) -> Path:
    parts = PurePosixPath(rel).parts
    if not parts or PurePosixPath(rel).is_absolute() or ".." in parts:
        raise ModelFormatError(f"refusing to unpack {rel!r} outside the model folder")
    return root.joinpath(*parts)


def format_of(folder: Path) -> str | None:
    from mlxctl.models.inspect import read_facts

    try:
        return read_facts(folder).format
    except ModelFormatError:
        return None
