"""Acquire a Hugging Face repo (``org/name[@revision]``): ``huggingface_hub.snapshot_download``
into the user's own HF cache (resumable, shared with every other HF tool). The snapshot stays
there: when it is MLX already (or ``--no-convert``), the store folder holds links to it and a
manifest that records its path, never a second copy; when it is not, the store folder holds its
MLX conversion (see :mod:`mlxctl.models.acquire_convert`) and the manifest records the
snapshot's path, commit and file hashes next to the recipe."""

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
from mlxctl.models.acquire_convert import (
    Conversion,
    build_converted,
    decide,
    relabel,
    same_treatment,
    say_converting,
    say_kept,
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
    conversion: Conversion | None = None,
) -> Acquired:
    """Download ``repo_id`` into the HF cache (or find it there) and link it into the store,
    or store its MLX conversion when it is not MLX (``conversion``: the options; default:
    convert what is not MLX, unquantized)."""
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
    decision = decide(snapshot, store, conversion or Conversion())
    same = (before is not None and before.manifest.get("path") == str(snapshot)
            and same_treatment(before.manifest, decision))  # fmt: skip
    if decision.converts:
        if same:  # this very snapshot, converted this very way
            return before
        label = f"{repo_id}@{snapshot.name[:12]}"
        fields = {"source": source, "source_type": "hf", "revision": snapshot.name,
                  "requested_revision": revision, "allow_patterns": patterns, "path": str(snapshot),
                  "source_files": file_hashes(snapshot)}  # fmt: skip
        say_converting(progress, label, name, decision, " (the snapshot stays in the Hugging Face cache)")
        build = partial(build_converted, decision, snapshot, name, store,
                        relabel(progress, snapshot, label), fields)  # fmt: skip
        folder = replace(store, name, build)
        return Acquired(name, folder, read_manifest(folder) or {}, True, converted=True)
    say_kept(progress, name, decision)
    fmt = format_of(snapshot)
    build = partial(_build_hf, snapshot, name, source, revision, patterns, fmt, decision.not_converted)
    folder = replace(store, name, build)  # relinked: the patterns may have added files
    return Acquired(name, folder, read_manifest(folder) or {}, not same)


def _build_hf(
    snapshot: Path,
    name: str,
    source: str,
    revision: str | None,
    patterns: list[str],
    fmt: str | None,
    not_converted: str | None,
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
        not_converted=not_converted,
        files=file_hashes(out),
    )
