"""Acquire a Hugging Face repo (``org/name[@revision]``): ``huggingface_hub.snapshot_download``
into the user's own HF cache (resumable, shared with every other HF tool); the store folder holds
links to that snapshot and a manifest that records its path, never a second copy."""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from mlxctl.errors import ModelFormatError
from mlxctl.models.acquire_common import (
    Acquired,
    check_name,
    existing,
    format_of,
)
from mlxctl.models.acquire_snapshot import fetch_snapshot
from mlxctl.models.acquire_store import replace
from mlxctl.models.manifest import (
    file_hashes,
    model_files,
    read_manifest,
    write_manifest,
)
from mlxctl.models.resolve import Progress
from mlxctl.models.store import ModelStore


def acquire_hf(
    repo_id: str,
    store: ModelStore,
    *,
    revision: str | None = None,
    allow_patterns: Sequence[str] | None = None,
    name: str | None = None,
    progress: Progress = None,
    progress_bars: bool = True,
) -> Acquired:
    """Download ``repo_id`` into the HF cache (or find it there) and link it into the store."""
    from mlxctl.models.hub import ALLOW_PATTERNS

    name = name or check_name(repo_id.replace("/", "--"))
    source = f"hf:{repo_id}"
    before = existing(store, name, source) if store.has(name) else None  # raises on a clash
    patterns = list(allow_patterns or ALLOW_PATTERNS)
    snapshot = fetch_snapshot(repo_id, revision, patterns, progress, progress_bars)
    if not model_files(snapshot):
        raise ModelFormatError(
            f"no files of {repo_id} match {', '.join(patterns)}",
            hint="pick the files with --allow-patterns, e.g. --allow-patterns '*.gguf'",
        )
    fmt = format_of(snapshot)
    build = partial(_build_hf, snapshot, name, source, revision, patterns, fmt)
    folder = replace(store, name, build)  # relinked: the patterns may have added files
    same = before is not None and before.manifest.get("path") == str(snapshot)
    return Acquired(name, folder, read_manifest(folder) or {}, not same)


def _build_hf(
    snapshot: Path,
    name: str,
    source: str,
    revision: str | None,
    patterns: list[str],
    fmt: str | None,
    out: Path,
) -> None:
    for entry in sorted(snapshot.iterdir()):
        os.symlink(entry, out / entry.name, target_is_directory=entry.is_dir())
    write_manifest(
        out,
        name=name,
        source=source,
        recipe=None,
        format=fmt,
        source_type="hf",
        revision=snapshot.name,
        requested_revision=revision,
        allow_patterns=patterns,
        path=str(snapshot),
        stored="hf-cache",
        files=file_hashes(out),
    )
