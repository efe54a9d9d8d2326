"""What ``mlxctl model convert`` converts: a GGUF file or a Hugging Face safetensors folder, found
without downloading (:func:`mlxctl.models.inspect.locate`) and checked before any work."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from mlxctl.errors import ModelFormatError
from mlxctl.models.store import ModelStore


@dataclass(frozen=True)
class Source:
    """What is being converted: a GGUF file or a Hugging Face-format folder."""

    kind: str  # "gguf" | "safetensors"
    path: Path  # the .gguf file, or the folder
    base_name: str  # what the default output name starts with
    describe: str  # the manifest's source text
    source_type: str  # local | hf | store
    revision: str | None = None  # the HF snapshot commit


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
    config = read_config(folder)
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


def read_config(folder: Path) -> dict:
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise ModelFormatError(f"cannot read {folder / 'config.json'}: {e}") from None
    if not isinstance(config, dict):
        raise ModelFormatError(f"{folder / 'config.json'} is not a JSON object")
    return config
