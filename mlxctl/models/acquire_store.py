"""The store's side of acquire: list its models, remove one, swap a rebuilt folder in."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from mlxctl.errors import ModelNotFoundError
from mlxctl.models.acquire_common import check_name, format_of
from mlxctl.models.catalog import catalog_entry
from mlxctl.models.manifest import model_files, read_manifest
from mlxctl.models.store import _PARTIAL_PREFIX, ModelStore


def list_models(store: ModelStore | None = None) -> list[dict]:
    """One row per model in the store: name, kind, format, source, size, path."""
    store = store if store is not None else ModelStore()
    rows = []
    for name in store.names():
        folder = store.model_path(name)
        manifest = read_manifest(folder) or {}
        entry = catalog_entry(name)
        rows.append(
            {
                "name": name,
                "kind": manifest.get("kind") or (entry.kind if entry else None),
                "format": manifest.get("format") or _guess_format(folder, manifest),
                "source": manifest.get("source"),
                "source_type": manifest.get("source_type") or _guess_source_type(manifest),
                "size_bytes": folder_size(folder),
                "path": str(folder),
            }
        )
    return rows


def folder_size(folder: Path) -> int:
    """Bytes of the model's files, links followed (what the model occupies, wherever it is)."""
    return sum(p.stat().st_size for p in model_files(folder))


def remove(name: str, store: ModelStore | None = None) -> dict:
    """Delete model ``name`` from the store; an HF cache snapshot it links to is kept."""
    store = store if store is not None else ModelStore()
    check_name(name)
    if not store.has(name):
        raise ModelNotFoundError(
            f"no model called {name} in the store", hint="see: mlxctl model list"
        )
    folder = store.model_path(name)
    manifest = read_manifest(folder) or {}
    freed = _own_bytes(folder)
    if folder.is_symlink():  # a folder someone linked in by hand: drop the link only
        target = str(folder.resolve())
        folder.unlink()
        return {"name": name, "path": str(folder), "freed_bytes": 0, "kept": target}
    doomed = Path(tempfile.mkdtemp(prefix=f"{_PARTIAL_PREFIX}rm-{name}-", dir=store.models_dir))
    os.replace(folder, doomed)  # gone from the store at once, even if deleting is cut short
    shutil.rmtree(doomed, ignore_errors=True)
    return {"name": name, "path": str(folder), "freed_bytes": freed, "kept": manifest.get("path")}


def _own_bytes(folder: Path) -> int:
    """Bytes of the regular files in ``folder`` itself (links into the HF cache not counted)."""
    total = 0
    for root, _dirs, names in os.walk(folder):
        for file in names:
            path = Path(root) / file
            if not path.is_symlink():
                total += path.stat().st_size
    return total


def replace(store: ModelStore, name: str, build: Callable[[Path], object]) -> Path:
    """Build model ``name`` afresh and swap it in for the old folder, if any."""
    store.models_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{_PARTIAL_PREFIX}{name}-", dir=store.models_dir))
    final = store.model_path(name)
    old = None
    try:
        build(tmp)
        if final.exists():
            old = Path(tempfile.mkdtemp(prefix=f"{_PARTIAL_PREFIX}old-{name}-", dir=store.models_dir))
            os.replace(final, old)
        os.replace(tmp, final)
    finally:
        for leftover in (tmp, old):
            if leftover is not None and leftover.exists():
                shutil.rmtree(leftover, ignore_errors=True)
    return final


def _guess_format(folder: Path, manifest: dict) -> str | None:
    if str(manifest.get("recipe") or "").startswith("gguf"):
        return "mlx"
    return format_of(folder)


def _guess_source_type(manifest: dict) -> str | None:
    source = str(manifest.get("source") or "")
    if source.startswith("pypi:"):
        return "catalog"
    if source.startswith("hf:"):
        return "hf"
    return "local" if source else None
