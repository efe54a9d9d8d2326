"""Where a model reference points, found without downloading."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mlxctl.errors import BadInputError, ModelFormatError, ModelNotFoundError
from mlxctl.models.catalog import catalog_entry, catalog_names
from mlxctl.models.manifest import read_manifest
from mlxctl.models.resolve import _REPO_ID
from mlxctl.models.store import ModelStore


@dataclass(frozen=True)
class Located:
    """Where a reference points: a model folder or a GGUF file, and what the store knows."""

    name: str
    path: Path
    origin: str  # "store", "folder", "gguf", "hf"
    manifest: dict | None = None


def locate(ref: str, store: ModelStore | None = None) -> Located:
    """Find ``ref`` without downloading: a store name, a folder, a .gguf file, a cached HF repo."""
    store = store if store is not None else ModelStore()
    ref = ref.strip()
    if not ref:
        raise BadInputError("the model reference is empty")
    if "/" not in ref and ref not in (".", "..") and store.has(ref):
        folder = store.model_path(ref)
        return Located(ref, folder, "store", read_manifest(folder))
    if catalog_entry(ref) is not None:
        raise ModelNotFoundError(
            f"{ref} is a catalog model that is not in the store yet",
            hint=f"fetch it first: mlxctl model acquire {ref}",
        )
    path = Path(ref).expanduser()
    if path.is_dir() or path.is_file():
        return _local(path)
    if _looks_like_path(ref):
        raise ModelNotFoundError(f"no such file or folder: {ref}")
    if _REPO_ID.match(ref):
        return _cached_repo(ref)
    raise ModelNotFoundError(
        f"unknown model {ref!r}",
        hint=f"give a model in the store (mlxctl model list), a catalog model "
        f"({', '.join(catalog_names())}), a folder, a .gguf file or a cached repo id",
    )


def _local(path: Path) -> Located:
    """A model folder, or a file that must be a .gguf."""
    if path.is_dir():
        return Located(path.resolve().name, path.resolve(), "folder", read_manifest(path))
    if path.suffix.lower() != ".gguf":
        raise ModelFormatError(
            f"{path} is not a model", hint="give a folder with config.json or a .gguf file"
        )
    return Located(path.stem, path.resolve(), "gguf")


def _cached_repo(ref: str) -> Located:
    """A Hugging Face repo id (``owner/name[@revision]``) in the local cache."""
    from mlxctl.models.acquire import cached_snapshot

    repo_id, _, revision = ref.partition("@")
    if (snapshot := cached_snapshot(repo_id, revision or None)) is not None:
        return Located(repo_id, snapshot, "hf")
    raise ModelNotFoundError(
        f"{repo_id} is not in the local Hugging Face cache",
        hint=f"inspect reads local files only; fetch it first: mlxctl model acquire {ref}",
    )


def _looks_like_path(ref: str) -> bool:
    name = ref.partition("@")[0]
    return name.lower().endswith(".gguf") or name.startswith((".", "/", "~")) or name.count("/") > 1
