"""Convert on acquire: what ``mlxctl model acquire`` fetched or linked is brought to MLX with the
converters ``mlxctl model convert`` uses, so the stored model is ready for the engine.

The source kind is told the way ``mlxctl model convert`` tells it, with the detectors that exist
(no second one here): inspect's :func:`~mlxctl.models.inspect.read_facts` says whether the files
are MLX already; :func:`~mlxctl.audio.models.whisper_source` and
:func:`~mlxctl.audio.models.tts_source` find faster-whisper (CTranslate2) and Kokoro ONNX folders;
everything else goes to :func:`~mlxctl.models.convert.find_source` (a Hugging Face safetensors
folder mlx-lm has a model class for, or a GGUF file mlxctl's importer reads).

- MLX already: kept as it is (linked), unless conversion options (``--quantize``, ``--recipe``,
  ``--dtype``) ask for a conversion.
- A source a converter takes: converted by that converter (``convert_model``, ``convert_folder``,
  ``convert_tts_folder``, the very functions behind ``mlxctl model convert``) into a scratch
  store beside the real one, then moved into the folder being built under the acquired name; its
  manifest gets the acquire's own keys (``source``, ``revision``, ``path``, ...) and
  ``stored: converted``.
- A source no converter takes (an architecture mlx-lm lacks, such as a BERT embedding model; an
  ONNX or CTranslate2 model that is not Kokoro or Whisper; a GGUF the importer cannot read) is
  kept as fetched, with the reason on stderr and in the manifest's ``not_converted``; with
  conversion options that is an error instead.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mlxctl.errors import BadInputError, ModelFormatError
from mlxctl.models.acquire_common import format_of
from mlxctl.models.manifest import read_manifest, update_manifest
from mlxctl.models.resolve import Progress, _say
from mlxctl.models.store import _PARTIAL_PREFIX, ModelStore

CONVERTED = "converted"  # the manifest's ``stored`` for a converted model


@dataclass(frozen=True)
class Conversion:
    """What acquire was asked to do with the files: convert (the options of ``model convert``)
    or keep them as fetched (``--no-convert``)."""

    convert: bool = True
    quantize: str | None = None
    group_size: int | None = None
    recipe: str | None = None
    dtype: str | None = None

    @property
    def given(self) -> list[str]:
        """The conversion options given, as flags."""
        values = {"--quantize": self.quantize, "--group-size": self.group_size,
                  "--recipe": self.recipe, "--dtype": self.dtype}  # fmt: skip
        return [flag for flag, value in values.items() if value is not None]

    @property
    def forces(self) -> bool:
        """Whether the options ask for a conversion even of a model that is MLX already."""
        return self.quantize not in (None, "none") or self.recipe is not None or self.dtype is not None

    @property
    def record(self) -> dict:
        """The options as the manifest's ``convert_options`` records them (``none`` as null)."""
        quantize = None if self.quantize == "none" else self.quantize
        return {"quantize": quantize, "group_size": self.group_size, "recipe": self.recipe,
                "dtype": self.dtype}  # fmt: skip


KEEP = Conversion(convert=False)


def check_conversion(conversion: Conversion) -> None:
    """Refuse option values and combinations that make no sense (BadInputError, one line)."""
    from mlxctl.models.convert import check_options

    if not conversion.convert and conversion.given:
        raise BadInputError(
            f"--no-convert keeps the files as fetched; leave out {', '.join(conversion.given)}"
        )
    c = conversion
    check_options(c.quantize, c.group_size, c.recipe, c.dtype)


@dataclass(frozen=True)
class Decision:
    """How the fetched or linked model is stored."""

    converter: str | None  # "mlx-lm" (convert_model: safetensors or GGUF), "whisper", "kokoro"; None: keep
    conversion: Conversion
    not_converted: str | None = None  # why a model that is not MLX is kept as fetched
    mlx: bool = False  # the source is MLX already (converted only because options ask for it)

    @property
    def converts(self) -> bool:
        return self.converter is not None


def decide(path: Path, store: ModelStore, conversion: Conversion) -> Decision:
    """Which converter, if any, the model at ``path`` (a folder or a .gguf file) goes through.

    Errors (one line) for options that cannot apply: ``--quantize`` for a speech model, an
    already quantized source asked to be quantized again, options for a source no converter
    takes."""
    from mlxctl.audio.models import tts_source, whisper_source

    mlx = format_of(path) == "mlx"
    if not conversion.convert:
        return Decision(None, conversion, None if mlx else "--no-convert", mlx)
    if mlx and not conversion.forces:  # --quantize none changes nothing
        return Decision(None, conversion, mlx=True)
    src = str(path)
    if whisper_source(src, store):
        _check_audio("Whisper", conversion, ("float16", "float32"))
        return Decision("whisper", conversion, mlx=mlx)
    if tts_source(src, store):
        _check_audio("Kokoro", conversion, ("float32",))
        return Decision("kokoro", conversion, mlx=mlx)
    from mlxctl.models.convert import find_source, make_plan

    try:
        source = find_source(src, store)
    except ModelFormatError as e:
        if conversion.given:
            raise ModelFormatError(e.message) from None
        return Decision(None, conversion, e.message, mlx)
    c = conversion
    make_plan(source, c.quantize, c.group_size, c.recipe, c.dtype)  # refuses re-quantizing, early
    return Decision("mlx-lm", conversion, mlx=mlx)


def _check_audio(family: str, conversion: Conversion, dtypes: tuple[str, ...]) -> None:
    """The rules of ``mlxctl model convert`` for Whisper and Kokoro sources."""
    quant = [f for f in conversion.given if f != "--dtype" and not
             (f == "--quantize" and conversion.quantize == "none")]  # fmt: skip
    if quant:
        raise BadInputError(f"{family} models are converted unquantized; leave out {', '.join(quant)}")
    if conversion.dtype is not None and conversion.dtype not in dtypes:
        raise BadInputError(f"--dtype for {family} must be {' or '.join(dtypes)}, got {conversion.dtype}")


def same_treatment(manifest: dict, decision: Decision) -> bool:
    """Whether a store folder with ``manifest`` already holds what ``decision`` would build
    from the same source: the same conversion options, or unconverted files."""
    converted = manifest.get("stored") == CONVERTED
    if not decision.converts:
        return not converted
    return converted and manifest.get("convert_options") == decision.conversion.record


def build_converted(
    decision: Decision,
    path: Path,
    name: str,
    store: ModelStore,
    progress: Progress,
    fields: dict,
    out: Path,
) -> None:
    """Convert ``path`` into ``out`` (an empty folder in the store) with ``decision``'s converter;
    the manifest is the converter's, with ``fields`` and the acquire's keys on top."""
    work = Path(tempfile.mkdtemp(prefix=f"{_PARTIAL_PREFIX}convert-{name}-", dir=out.parent))
    try:
        folder = _convert(decision, path, name, ModelStore(work), progress)
        for entry in folder.iterdir():
            entry.rename(out / entry.name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    manifest = read_manifest(out) or {}
    recipe = manifest.get("recipe")
    if isinstance(recipe, dict) and "source" in fields:
        recipe = {**recipe, "source": fields["source"]}
    update_manifest(out, **fields, recipe=recipe, stored=CONVERTED,
                    convert_options=decision.conversion.record)  # fmt: skip


def _convert(decision: Decision, path: Path, name: str, scratch: ModelStore, progress: Progress) -> Path:
    c = decision.conversion
    if decision.converter == "whisper":
        from mlxctl.audio.models import convert_folder

        return convert_folder(path, scratch, progress, name=name, dtype=c.dtype).path
    if decision.converter == "kokoro":
        from mlxctl.audio.models import convert_tts_folder

        return convert_tts_folder(path, scratch, progress, name=name).path
    from mlxctl.models.convert import convert_model

    return convert_model(str(path), name=name, quantize=c.quantize, group_size=c.group_size,
                         recipe=c.recipe, dtype=c.dtype, store=scratch, progress=progress).path  # fmt: skip


def say_converting(progress: Progress, shown: str, name: str, decision: Decision, where: str = "") -> None:
    given = ", ".join(decision.conversion.given)
    why = f"is MLX already: converting it again ({given})" if decision.mlx else "is not in MLX format: converting it"
    _say(progress, f"{shown} {why} into the store as {name}{where}")


def say_kept(progress: Progress, name: str, decision: Decision) -> None:
    if decision.not_converted and decision.not_converted != "--no-convert":
        _say(progress, f"{name}: not converted to MLX, stored as fetched: {decision.not_converted}")


def relabel(progress: Progress, path: Path, label: str) -> Progress:
    """``progress`` with the HF snapshot's folder (a commit hash) shown as ``label``."""
    if progress is None:
        return None
    return lambda text: progress(text.replace(str(path), label).replace(f" {path.name} ", f" {label} "))
