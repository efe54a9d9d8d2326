"""Acquire a local model folder or ``.gguf`` file: hard-linked into the store when it is on the
same filesystem (no second copy, and it survives the original's deletion), else copied."""

from __future__ import annotations

import os
import shutil
from functools import partial
from pathlib import Path

from mlxctl.errors import ModelFormatError
from mlxctl.models.acquire_common import (
    Acquired,
    check_name,
    existing,
    inside,
    safe_name,
)
from mlxctl.models.manifest import (
    file_hashes,
    model_files,
    read_manifest,
    write_manifest,
)
from mlxctl.models.resolve import Progress, _say
from mlxctl.models.store import ModelStore


def acquire_local(
    path: Path, store: ModelStore, *, name: str | None = None, progress: Progress = None
) -> Acquired:
    """Link (same filesystem) or copy a local model folder or .gguf file into the store."""
    from mlxctl.models.inspect import read_facts

    path = path.resolve()
    if path.is_file() and path.suffix.lower() != ".gguf":
        raise ModelFormatError(
            f"{path} is not a model", hint="give a folder with config.json or a .gguf file"
        )
    facts = read_facts(path)  # refuses what inspect could not read
    name = name or check_name(safe_name(path.stem if path.is_file() else path.name))
    if (found := existing(store, name, str(path))) is not None:
        return found
    sources = [(path, path.name)] if path.is_file() else _relative_files(path)
    source_manifest = (read_manifest(path) if path.is_dir() else None) or {}
    folder = store.install(
        name,
        partial(_build_local, sources, name, str(path), facts.format, source_manifest, progress),
    )
    return Acquired(name, folder, read_manifest(folder) or {}, True)


def _relative_files(folder: Path) -> list[tuple[Path, str]]:
    return [(p, p.relative_to(folder).as_posix()) for p in model_files(folder)]


def _build_local(
    sources: list[tuple[Path, str]],
    name: str,
    source: str,
    fmt: str,
    source_manifest: dict,
    progress: Progress,
    out: Path,
) -> None:
    how = set()
    for src, rel in sources:
        how.add(link_or_copy(src, inside(out, rel)))
    _say(progress, f"hashing {len(sources)} files")
    write_manifest(
        out,
        name=name,
        source=source,
        recipe=source_manifest.get("recipe"),
        kind=source_manifest.get("kind"),
        format=fmt,
        source_type="local",
        stored="+".join(sorted(how)) or None,
        files=file_hashes(out),
    )


def link_or_copy(src: Path, dst: Path) -> str:
    """Hard-link ``src`` to ``dst``, or copy it across filesystems: "linked" or "copied"."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src.resolve(), dst)
        return "linked"
    except OSError:
        shutil.copy2(src, dst)
        return "copied"
