"""Acquire a local model folder or ``.gguf`` file. One that is MLX already (or ``--no-convert``)
is hard-linked into the store when it is on the same filesystem (no second copy, and it survives
the original's deletion), else copied; one that is not is converted into the store (see
:mod:`mlxctl.models.acquire_convert`) and the original stays where it is."""

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
from mlxctl.models.acquire_convert import (
    Conversion,
    build_converted,
    decide,
    same_treatment,
    say_converting,
    say_kept,
)
from mlxctl.models.acquire_store import replace
from mlxctl.models.manifest import (
    file_hashes,
    model_files,
    read_manifest,
    write_manifest,
)
from mlxctl.models.resolve import Progress, _say
from mlxctl.models.store import ModelStore


def acquire_local(
    path: Path,
    store: ModelStore,
    *,
    name: str | None = None,
    progress: Progress = None,
    conversion: Conversion | None = None,
) -> Acquired:
    """Link (same filesystem) or copy a local model folder or .gguf file into the store, or
    store its MLX conversion when it is not MLX (``conversion``: the options; default: convert
    what is not MLX, unquantized). The same source acquired the same way again is a no-op;
    another way (other options, ``--no-convert``) rebuilds it."""
    from mlxctl.models.inspect import read_facts

    path = path.resolve()
    if path.is_file() and path.suffix.lower() != ".gguf":
        raise ModelFormatError(
            f"{path} is not a model", hint="give a folder with config.json or a .gguf file"
        )
    facts = read_facts(path)  # refuses what inspect could not read
    name = name or check_name(safe_name(path.stem if path.is_file() else path.name))
    found = existing(store, name, str(path))
    decision = decide(path, store, conversion or Conversion())
    if found is not None and same_treatment(found.manifest, decision):
        return found
    if decision.converts:
        say_converting(progress, path.name, name, decision)
        fields = {"source": str(path), "source_type": "local"}
        build = partial(build_converted, decision, path, name, store, progress, fields)
    else:
        say_kept(progress, name, decision)
        sources = [(path, path.name)] if path.is_file() else _relative_files(path)
        source_manifest = (read_manifest(path) if path.is_dir() else None) or {}
        build = partial(_build_local, sources, name, str(path), facts.format, source_manifest,
                        decision.not_converted, progress)  # fmt: skip
    folder = replace(store, name, build) if found is not None else store.install(name, build)
    return Acquired(name, folder, read_manifest(folder) or {}, True, converted=decision.converts)


def _relative_files(folder: Path) -> list[tuple[Path, str]]:
    return [(p, p.relative_to(folder).as_posix()) for p in model_files(folder)]


def _build_local(
    sources: list[tuple[Path, str]],
    name: str,
    source: str,
    fmt: str,
    source_manifest: dict,
    not_converted: str | None,
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
        not_converted=not_converted,
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
