"""``mlxctl model convert``: a Hugging Face safetensors model or a GGUF file to an MLX folder.

Sources are found without downloading (:func:`mlxctl.models.inspect.locate`): a store name, a
folder with config.json and ``*.safetensors``, a ``.gguf`` file (or a store folder holding one),
or a Hugging Face repo id already in the local HF cache.

- **Safetensors** go through mlx-lm's public ``mlx_lm.convert.convert``: weights cast to
  ``dtype`` (default: the config's ``torch_dtype``), then optionally quantised (affine, ``bits``
  and ``group_size``) or quantised by a mixed recipe (mlx-lm's ``mixed_*`` quant predicates:
  a few sensitive layers, such as ``v_proj``, ``down_proj`` in the first and last eighth of the
  layers and ``lm_head``, get the high bit count, the rest the low one).
- **GGUF** files go through our own importer (:mod:`mlxctl.models.gguf`), which keeps Q4_0,
  Q4_1 and Q8_0 tensors quantised. A float GGUF (F32/F16) can then be quantised or cast: the
  imported folder goes through mlx-lm's convert like any safetensors folder.
- ``quantize="auto"`` picks bits from memory: see :func:`auto_bits`.

The result is installed in the store under a ``.partial-`` name and renamed into place; its
manifest's ``recipe`` records the source and every choice (see :func:`_recipe`).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from mlxctl import __version__
from mlxctl.errors import BadInputError, ModelFormatError
from mlxctl.models.manifest import file_hashes, read_manifest, write_manifest
from mlxctl.models.store import ModelStore

Progress = Callable[[str], None] | None

QUANTIZE_CHOICES = ("2", "3", "4", "6", "8", "auto", "none")
GROUP_SIZES = (32, 64, 128)
DEFAULT_GROUP_SIZE = 64
CONVERT_DTYPES = ("float16", "bfloat16", "float32")
# mixed recipe -> (low bits, high bits); the names and choices are mlx-lm's QUANT_RECIPES
RECIPES = {"mixed_2_6": (2, 6), "mixed_3_4": (3, 4), "mixed_3_6": (3, 6), "mixed_4_6": (4, 6)}
AUTO_BITS = (8, 6, 4)  # quantize=auto tries these, largest first
SCALE_BIAS_BITS = 32  # affine quantisation stores a 16-bit scale and bias per group


@dataclass(frozen=True)
class Source:
    """What is being converted: a GGUF file or a Hugging Face-format folder."""

    kind: str  # "gguf" | "safetensors"
    path: Path  # the .gguf file, or the folder
    base_name: str  # what the default output name starts with
    describe: str  # the manifest's source text
    source_type: str  # local | hf | store
    revision: str | None = None  # the HF snapshot commit


@dataclass(frozen=True)
class Plan:
    """The conversion asked for, with ``auto`` resolved."""

    quantize: str  # as asked
    bits: int | None  # None: no quantisation
    group_size: int | None
    recipe: str | None
    dtype: str | None  # as asked (None: the source's own)
    auto_rule: str | None = None  # how auto chose, in words


@dataclass(frozen=True)
class Converted:
    name: str
    path: Path
    manifest: dict
    converted: bool  # False when the store already held this very conversion


def convert_model(
    src: str,
    *,
    name: str | None = None,
    quantize: str | None = None,
    group_size: int | None = None,
    recipe: str | None = None,
    dtype: str | None = None,
    store: ModelStore | None = None,
    progress: Progress = None,
) -> Converted:
    """Convert ``src`` to MLX and install it in the store as ``name``."""
    from mlxctl.models.acquire import check_name

    store = store if store is not None else ModelStore()
    check_options(quantize, group_size, recipe, dtype)
    if name is not None:
        check_name(name)
    source = find_source(src, store)
    plan = _plan(source, quantize, group_size, recipe, dtype)
    name = name or check_name(default_name(source, plan))
    if (existing := _existing(store, name, source, plan)) is not None:
        return existing
    _say(progress, f"converting {source.path.name} ({_plan_text(plan)})")
    if plan.auto_rule:
        _say(progress, plan.auto_rule)
    folder = store.install(name, partial(_build, source, plan, name, store, progress))
    return Converted(name, folder, read_manifest(folder) or {}, True)


def check_options(
    quantize: str | None, group_size: int | None, recipe: str | None, dtype: str | None
) -> None:
    """Refuse option values and combinations that do not make sense (BadInputError)."""
    if quantize is not None and quantize not in QUANTIZE_CHOICES:
        raise BadInputError(
            f"--quantize must be one of {', '.join(QUANTIZE_CHOICES)}, got {quantize!r}"
        )
    if group_size is not None and group_size not in GROUP_SIZES:
        raise BadInputError(
            f"--group-size must be one of {', '.join(map(str, GROUP_SIZES))}, got {group_size}"
        )
    if recipe is not None and recipe not in RECIPES:
        raise BadInputError(f"--recipe must be one of {', '.join(RECIPES)}, got {recipe!r}")
    if dtype is not None and dtype not in CONVERT_DTYPES:
        raise BadInputError(f"--dtype must be one of {', '.join(CONVERT_DTYPES)}, got {dtype!r}")
    if recipe is not None and quantize not in (None, "none") and quantize != str(RECIPES[recipe][0]):
        raise BadInputError(
            f"--recipe {recipe} sets the bits itself; leave out --quantize {quantize}"
        )
    if recipe is not None and quantize == "none":
        raise BadInputError(f"--recipe {recipe} quantizes; it cannot go with --quantize none")
    if group_size is not None and recipe is None and quantize in (None, "none"):
        raise BadInputError("--group-size applies only with --quantize or --recipe")


# --- the source ---------------------------------------------------------------------------


def find_source(src: str, store: ModelStore) -> Source:
    """The GGUF file or safetensors folder ``src`` names; never downloads."""
    from mlxctl.models.inspect import locate

    located = locate(src, store)
    path = located.path
    manifest = located.manifest or {}
    if located.origin == "hf":
        return _checked(Source("safetensors", path, located.name.split("/")[-1],
                               f"hf:{located.name}", "hf", revision=path.name))  # fmt: skip
    if located.origin == "store":  # files as shipped: their origin; else the converted model
        shipped = manifest.get("source") and manifest.get("recipe") is None
        describe = str(manifest["source"]) if shipped else f"store:{located.name}"
        source_type = "store"
        base = located.name
    else:
        describe, source_type = str(path.resolve()), "local"
        base = path.stem if path.is_file() else path.resolve().name
    if path.is_file():
        return _checked(Source("gguf", path, base, describe, source_type))
    gguf = sorted(p for p in path.iterdir() if p.suffix.lower() == ".gguf")
    if not (path / "config.json").is_file() and len(gguf) == 1:  # e.g. `model acquire x.gguf`
        return _checked(Source("gguf", gguf[0], base, describe, source_type))
    return _checked(Source("safetensors", path, base, describe, source_type))


def _checked(source: Source) -> Source:
    if source.kind == "gguf":
        _check_gguf(source.path)
    else:
        _check_folder(source.path)
    return source


def _check_gguf(path: Path) -> None:
    from mlxctl.models.gguf import check_supported

    try:
        check_supported(path)
    except ModelFormatError as e:  # one line: the message and what to use instead
        raise ModelFormatError(f"{e.message}; {e.hint}" if e.hint else e.message) from None


def _check_folder(folder: Path) -> None:
    if not (folder / "config.json").is_file():
        raise ModelFormatError(
            f"{folder} is not a model to convert: give a Hugging Face safetensors folder "
            "(config.json + *.safetensors), a .gguf file, a store name or a cached repo id"
        )
    if not any(folder.glob("*.safetensors")):
        raise ModelFormatError(
            f"{folder} has no *.safetensors weights (PyTorch .bin, CTranslate2 and ONNX files "
            "are not converted)"
        )
    config = _read_config(folder)
    model_type = config.get("model_type")
    if not model_type or not supported_architecture(config):
        import mlx_lm

        archs = ", ".join(config.get("architectures") or ()) or "unknown architecture"
        raise ModelFormatError(
            f"{folder.name}: architecture {model_type!r} ({archs}) is not supported by "
            f"mlx-lm {mlx_lm.__version__}"
        )


def supported_architecture(config: dict) -> bool:
    """Whether mlx-lm has a model class for this config (its own remapping rules)."""
    import importlib.util

    from mlx_lm import utils

    model_type = str(config.get("model_type"))
    archs = config.get("architectures") or ()
    archs = (archs,) if isinstance(archs, str) else archs
    remap = getattr(utils, "MODEL_ARCHITECTURE_REMAPPING", {})
    for arch in archs:
        if (model_type, arch) in remap:
            model_type = remap[(model_type, arch)]
            break
    else:
        model_type = getattr(utils, "MODEL_REMAPPING", {}).get(model_type, model_type)
    if not re.fullmatch(r"[A-Za-z0-9_]+", model_type):
        return False
    return importlib.util.find_spec(f"mlx_lm.models.{model_type}") is not None


def _read_config(folder: Path) -> dict:
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise ModelFormatError(f"cannot read {folder / 'config.json'}: {e}") from None
    if not isinstance(config, dict):
        raise ModelFormatError(f"{folder / 'config.json'} is not a JSON object")
    return config


# --- the plan -----------------------------------------------------------------------------


def _plan(
    source: Source,
    quantize: str | None,
    group_size: int | None,
    recipe: str | None,
    dtype: str | None,
) -> Plan:
    quantize = quantize or "none"
    if recipe is not None:
        quantize = str(RECIPES[recipe][0])
    wants_quant = quantize != "none"
    if wants_quant and (already := _source_quantization(source)):
        raise BadInputError(
            f"{source.path.name} is already quantized ({already}); converting it again needs "
            "float weights, so leave out --quantize and --recipe"
        )
    group = (group_size or DEFAULT_GROUP_SIZE) if wants_quant else None
    if quantize != "auto":
        bits = int(quantize) if wants_quant else None
        return Plan(quantize, bits, group, recipe, dtype)
    from mlxctl.models.inspect import memory_limit, read_facts

    parameters = read_facts(source.path).parameters
    limit, where = memory_limit()
    if not parameters or not limit:
        raise BadInputError(
            "--quantize auto cannot tell the model's size or this machine's memory",
            hint="give the bits: --quantize 4, 6 or 8",
        )
    bits = auto_bits(parameters, group or DEFAULT_GROUP_SIZE, limit)
    size = quantized_bytes(parameters, bits, group or DEFAULT_GROUP_SIZE)
    rule = (
        f"auto: {bits}-bit ({_gb(size)} of weights; budget half of the {where}, "
        f"{_gb(limit // 2)}{'; even 4-bit is over it' if size > limit // 2 else ''})"
    )
    return Plan("auto", bits, group, None, dtype, rule)


def auto_bits(parameters: int, group_size: int, limit_bytes: int) -> int:
    """The largest of 8, 6 and 4 bits whose weights fit in half of ``limit_bytes`` (4 if none).

    Weights at b bits take ``parameters x (b + 32 / group_size) / 8`` bytes: the packed values
    plus a 16-bit scale and bias per group. Half the limit leaves room for the KV cache,
    activations and the rest of the machine.
    """
    budget = limit_bytes // 2
    for bits in AUTO_BITS:
        if quantized_bytes(parameters, bits, group_size) <= budget:
            return bits
    return AUTO_BITS[-1]


def quantized_bytes(parameters: int, bits: int, group_size: int) -> int:
    return int(parameters * (bits + SCALE_BIAS_BITS / group_size) / 8)


def _source_quantization(source: Source) -> str | None:
    """A description of the source's quantisation, or None for float weights."""
    if source.kind == "gguf":
        from mlxctl.models.gguf_header import read_header

        types = set(read_header(source.path).tensor_types.values()) - {"F32", "F16"}
        return ", ".join(sorted(types)) or None
    config = _read_config(source.path)
    quant = config.get("quantization") or config.get("quantization_config")
    if not isinstance(quant, dict):
        return None
    if "bits" in quant:
        return f"{quant['bits']}-bit"
    return str(quant.get("quant_method") or "quantized")


def default_name(source: Source, plan: Plan) -> str:
    """``<source>-4bit``, ``<source>-mixed_4_6``, ``<source>-bfloat16`` or ``<source>-mlx``."""
    if plan.recipe:
        suffix = plan.recipe
    elif plan.bits:
        suffix = f"{plan.bits}bit"
    else:
        suffix = plan.dtype or "mlx"
    cleaned = re.sub(r"[^A-Za-z0-9._+-]+", "-", source.base_name).strip("-.") or "model"
    cleaned = cleaned if cleaned[0].isalnum() else f"m{cleaned}"
    return f"{cleaned}-{suffix}"


def _plan_text(plan: Plan) -> str:
    if plan.recipe:
        low, high = RECIPES[plan.recipe]
        what = f"{plan.recipe}: {low}/{high}-bit, group size {plan.group_size}"
    elif plan.bits:
        what = f"{plan.bits}-bit, group size {plan.group_size}"
    else:
        what = "not quantized"
    return what + (f", {plan.dtype}" if plan.dtype else "")


def _existing(store: ModelStore, name: str, source: Source, plan: Plan) -> Converted | None:
    """The store's ``name`` if it is this very conversion; a clash if it is anything else."""
    if not store.has(name):
        return None
    folder = store.model_path(name)
    manifest = read_manifest(folder) or {}
    recipe = manifest.get("recipe")
    same = {"source": source.describe, "bits": plan.bits, "group_size": plan.group_size,
            "name": plan.recipe, "dtype_requested": plan.dtype}  # fmt: skip
    if isinstance(recipe, dict) and all(recipe.get(k) == v for k, v in same.items()):
        return Converted(name, folder, manifest, False)
    raise BadInputError(
        f"the store already has a model called {name} (from {manifest.get('source', 'elsewhere')})",
        hint=f"pick another name with --name, or remove it first: mlxctl model rm {name}",
    )


# --- building -----------------------------------------------------------------------------


def _build(source: Source, plan: Plan, name: str, store: ModelStore, progress: Progress,
           out: Path) -> None:  # fmt: skip
    method = []
    if source.kind == "gguf":
        method.append("gguf-llama")
        if plan.bits is None and plan.dtype is None:
            _import_gguf(source.path, out, progress)
        else:
            with tempfile.TemporaryDirectory(prefix=".convert-", dir=store.root) as work:
                imported = _import_gguf(source.path, Path(work) / "imported", progress)
                method.append("mlx-lm")
                _mlx_lm_convert(imported, out, plan, progress)
    else:
        method.append("mlx-lm")
        _mlx_lm_convert(source.path, out, plan, progress)
    (out / "manifest.json").unlink(missing_ok=True)  # the importer's; ours replaces it
    _say(progress, "hashing the converted files")
    write_manifest(
        out,
        name=name,
        source=source.describe,
        source_sha256=_sha256(source),
        recipe=_recipe(source, plan, out, "+".join(method)),
        kind="chat",
        format="mlx",
        source_type=source.source_type,
        revision=source.revision,
        files=file_hashes(out),
    )


def _import_gguf(path: Path, out: Path, progress: Progress) -> Path:
    from mlxctl.models.gguf import import_gguf

    return import_gguf(path, out, progress, name=path.stem)


def _mlx_lm_convert(folder: Path, out: Path, plan: Plan, progress: Progress) -> None:
    """mlx-lm's convert into ``out`` (which must exist and be empty)."""
    from mlx_lm.convert import convert

    target = out / ".mlx-lm"  # convert refuses a folder that exists
    kwargs: dict[str, Any] = {"dtype": plan.dtype}
    if plan.bits is not None:
        kwargs |= {"quantize": True, "q_bits": plan.bits, "q_group_size": plan.group_size}
    if plan.recipe is not None:
        kwargs["quant_predicate"] = _predicate(folder, plan.recipe, plan.group_size or DEFAULT_GROUP_SIZE)
    try:
        with _printed_to(progress):
            convert(str(folder), str(target), **kwargs)
    except (ValueError, KeyError, FileNotFoundError) as e:
        raise ModelFormatError(f"cannot convert {folder.name}: {_first_line(e)}") from None
    for entry in target.iterdir():
        entry.rename(out / entry.name)
    target.rmdir()


def _predicate(folder: Path, recipe: str, group_size: int) -> Any:
    """mlx-lm's quant predicate for ``recipe`` when it has one (its convert builds it from the
    name), else our own with the same rule."""
    from mlx_lm import convert as mlx_convert

    if recipe in getattr(mlx_convert, "QUANT_RECIPES", ()):
        return recipe
    config = _read_config(folder)
    layers = config.get("num_hidden_layers") or (config.get("text_config") or {}).get(
        "num_hidden_layers"
    )
    if not isinstance(layers, int):
        raise ModelFormatError(f"--recipe {recipe}: {folder.name} does not say how many layers it has")
    return mixed_predicate(recipe, layers, group_size)


def mixed_predicate(recipe: str, num_layers: int, group_size: int) -> Callable[[str, Any], dict]:
    """A mixed-bits rule like llama.cpp's Q*_K_M: ``v_proj`` and ``down_proj`` of the first and
    last eighth of the layers and of every third layer between, and ``lm_head``, get the high
    bits; everything else the low bits. Used when mlx-lm lacks the recipe."""
    low, high = RECIPES[recipe]

    def predicate(path: str, module: Any) -> dict:
        index = next((int(p) for p in path.split(".") if p.isdigit()), 0)
        sensitive = (
            index < num_layers // 8
            or index >= 7 * num_layers // 8
            or (index - num_layers // 8) % 3 == 2
        )
        more = "lm_head" in path or (sensitive and ("v_proj" in path or "down_proj" in path))
        return {"group_size": group_size, "bits": high if more else low, "mode": "affine"}

    return predicate


def _recipe(source: Source, plan: Plan, out: Path, method: str) -> dict:
    """What the manifest's ``recipe`` records: the source and every choice that made the files.

    ``bits`` / ``group_size`` are what the weights hold (for a GGUF import, its block type);
    ``dtype`` is the float type of the unquantized tensors in the output."""
    import mlx_lm

    from mlxctl.models.inspect import read_facts

    config = _read_config(out)
    quant = config.get("quantization") if isinstance(config.get("quantization"), dict) else {}
    facts = read_facts(out)
    bits = plan.bits if plan.bits is not None else quant.get("bits")
    group = plan.group_size if plan.group_size is not None else quant.get("group_size")
    low_high = RECIPES.get(plan.recipe or "")
    return {
        "method": method,
        "source": source.describe,
        "name": plan.recipe,
        "quantize": plan.quantize,
        "bits": bits,
        "high_bits": low_high[1] if low_high else None,
        "group_size": group,
        "mode": quant.get("mode", "affine") if bits else None,
        "dtype": facts.dtype,
        "dtype_requested": plan.dtype,
        "bits_per_weight": _bits_per_weight(facts),
        "mlx_lm": mlx_lm.__version__,
        "mlxctl": __version__,
    }


def _bits_per_weight(facts: Any) -> float | None:
    if not facts.parameters or not facts.weights_bytes:
        return None
    return round(facts.weights_bytes * 8 / facts.parameters, 3)


def _sha256(source: Source) -> str | None:
    if source.kind != "gguf":
        return None
    from mlxctl.models.digest import file_sha256

    return file_sha256(source.path)


@contextlib.contextmanager
def _printed_to(progress: Progress) -> Iterator[None]:
    """mlx-lm's convert prints ``[INFO] ...`` lines: send them to ``progress``, never stdout."""
    buffer = _Lines(progress, sys.stdout)
    with contextlib.redirect_stdout(buffer):
        yield
    buffer.flush()


class _Lines(io.TextIOBase):
    def __init__(self, progress: Progress, stdout: Any):
        self._progress = progress
        self._stdout = stdout  # what stdout was: progress may print
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            self._send(line)
        return len(text)

    def flush(self) -> None:
        pending, self._pending = self._pending, ""
        self._send(pending)

    def _send(self, line: str) -> None:
        if line.strip():
            with contextlib.redirect_stdout(self._stdout):
                _say(self._progress, line.replace("[INFO] ", "mlx-lm: ").strip())


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB"


def _say(progress: Progress, message: str) -> None:
    if progress is not None:
        progress(message)
