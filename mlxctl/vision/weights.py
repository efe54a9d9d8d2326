"""Vision weights of a model folder by prefix, into the modules of a family (families.py's LLaVA
and Gemma 3 use ``vision_tower.`` / ``multi_modal_projector.``; Idefics3 ``vision_model.`` /
``connector.``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable


def load_prefixed(path: Path, config: dict, modules: dict[str, Any], dtype: Any,
                  rename: Callable[[str], str] | None = None) -> None:
    """Each module's weights (the folder's keys under its prefix, ``model.`` dropped as
    transformers 5 nests them; quantised where the checkpoint is), converted to ``dtype`` when
    given, evaluated. The tower (the first module) sanitises its own weights, after ``rename``
    of their keys where given."""
    from mlxctl.vision.families import load_module

    weights = _weights(path, tuple(modules))
    for n, (prefix, module) in enumerate(modules.items()):
        w = {k.removeprefix(prefix): v for k, v in weights.items() if k.startswith(prefix)}
        if not w:
            raise KeyError(f"the folder has no {prefix}* weights")
        if n == 0 and rename is not None:
            w = {rename(k): v for k, v in w.items()}
        if n == 0 and hasattr(module, "sanitize"):
            w = module.sanitize(w)
        load_module(module, w, config, dtype)


def _weights(path: Path, prefixes: tuple[str, ...]) -> dict:
    import mlx.core as mx

    out = {}
    for file in sorted(path.glob("*.safetensors")):
        for key, value in mx.load(str(file)).items():
            key = key.removeprefix("model.")
            if key.startswith(prefixes):
                out[key] = value
    return out
