"""Load a model folder with mlx-lm (its public ``load``) and pick the weight dtype.

``dtype``: ``native`` keeps the weights as stored (quantised stays quantised); ``float32``,
``float16`` and ``bfloat16`` dequantise and cast everything; ``auto`` is float32 on the CPU
backend (faster there than quantised kernels) and native elsewhere.

A vision-language folder (its config has ``vision_config``): mlx-lm loads the text tower, and
``mlxctl.vision`` the vision tower and projector (``LoadedModel.vision``; see docs/vision.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from mlxctl.api.sampling_defaults import read_generation_config
from mlxctl.errors import BadInputError, ModelFormatError, ModelNotFoundError
from mlxctl.models.manifest import model_name

DTYPES = ("auto", "native", "float32", "float16", "bfloat16")
_CONTEXT_KEYS = ("max_position_embeddings", "max_seq_len", "seq_length", "n_positions", "n_ctx")
_DEFAULT_CONTEXT = 4096


@dataclass(frozen=True)
class LoadedModel:
    model: Any  # mlx.nn.Module
    tokenizer: Any  # mlx_lm's TokenizerWrapper
    config: dict = field(repr=False)
    context_length: int
    eos_token_ids: set[int]
    name: str
    vision: Any = field(default=None, repr=False)  # mlxctl.vision.adapter.VisionAdapter, for image input
    generation_config: dict = field(default_factory=dict, repr=False)  # the folder's generation_config.json


def load_model(path: Path, dtype: str = "auto", *, name: str | None = None,
               prepare: Callable[[Any, dict], None] | None = None) -> LoadedModel:
    """Load the model folder at ``path`` with weights in ``dtype`` (see module docstring).

    ``prepare(model, config)`` runs on the lazily loaded model before any weight is read (the
    tensor-parallel split: each rank then reads only its share)."""
    check_dtype(dtype)
    path = Path(path)
    model, tokenizer, config = _mlx_lm_load(path, lazy=prepare is not None)
    if prepare is not None:
        prepare(model, config)
    if (target := weight_dtype(dtype)) is not None:
        _convert(model, target)
    elif prepare is not None:
        import mlx.core as mx

        mx.eval(model.parameters())
    vision = None
    if "vision_config" in config:
        from mlxctl.vision.adapter import load_vision

        vision = load_vision(path, config, model, tokenizer, target)
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        config=config,
        context_length=context_length(config),
        eos_token_ids=set(tokenizer.eos_token_ids),
        name=name or model_name(path),
        vision=vision,
        generation_config=read_generation_config(path),
    )


def check_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        raise BadInputError(f"unknown dtype {dtype!r}", hint=f"choose one of: {', '.join(DTYPES)}")


def weight_dtype(dtype: str):
    """The mx.Dtype to convert to, or None to keep the weights as stored."""
    import mlx.core as mx

    check_dtype(dtype)
    if dtype == "auto":
        return mx.float32 if mx.default_device().type == mx.cpu else None
    return None if dtype == "native" else getattr(mx, dtype)


def context_length(config: dict) -> int:
    """The longest sequence the model was built for, from whichever key its config uses."""
    for source in (config, config.get("text_config") or {}):
        for key in _CONTEXT_KEYS:
            if isinstance(source.get(key), int):
                return source[key]
    return _DEFAULT_CONTEXT


def _mlx_lm_load(path: Path, lazy: bool = False) -> tuple:
    if not (path / "config.json").is_file():
        raise ModelNotFoundError(f"no model folder at {path} (config.json missing)")
    import json

    from mlx_lm import load

    from mlxctl.vision.text_towers import load_text_tower

    try:
        config = json.loads((path / "config.json").read_text())
        return load_text_tower(path, config, lazy) or load(str(path), return_config=True, lazy=lazy)
    except (ValueError, FileNotFoundError, KeyError) as e:
        raise ModelFormatError(f"cannot load {path.name}: {e}") from None


def _convert(model, dtype) -> None:
    import mlx.core as mx

    from mlxctl.models.dequantize import dequantize_model

    dequantize_model(model, dtype)
    model.set_dtype(dtype)
    mx.eval(model.parameters())
