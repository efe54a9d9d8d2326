"""Quantised dummy weights: a config's ``quantization`` key applied to a freshly built model.

The key has the form mlx-lm writes into a quantised checkpoint's config.json:
``{"group_size": 64, "bits": 4}``, optionally ``"mode"`` (affine, mxfp4, nvfp4, mxfp8) and
entries keyed by a module path for layers quantised otherwise (a dict) or not at all (false).
The model is quantised as ``mlx_lm.convert`` quantises one, which is how the published MLX
checkpoints were made: every layer that can be whose input width divides by the group size,
with the architecture's ``quant_predicate`` choosing per layer (MoE routers at 8 bits).
The weights are still lazy when this runs: nothing is drawn in full precision until evaluated.
"""

from __future__ import annotations

from typing import Any

from mlxctl.errors import BadInputError

MODES = ("affine", "mxfp4", "nvfp4", "mxfp8")


def quantization_of(config: dict) -> dict | None:
    """The checked ``quantization`` entry of a dummy config; None when it has none."""
    q = config.get("quantization")
    if q is None:
        return None
    if not isinstance(q, dict) or not all(_is_int(q.get(key)) for key in ("group_size", "bits")):
        raise BadInputError(f"a dummy config's quantization needs integer group_size and bits, got {q!r}",
                            hint='e.g. "quantization": {"group_size": 64, "bits": 4}')
    if q.get("mode", "affine") not in MODES:
        raise BadInputError(f"unknown quantization mode {q['mode']!r} in the dummy config",
                            hint=f"choose one of {', '.join(MODES)}")
    return q


def quantize_dummy(model: Any, config: dict) -> dict | None:
    """Quantise ``model`` in place as its config's ``quantization`` says (nothing without one).
    Returns the entry as mlx-lm writes it into a checkpoint: the defaults and every layer
    quantised otherwise (so a folder saved from the model loads as it was built)."""
    q = quantization_of(config)
    if q is None:
        return None
    import mlx.nn as nn

    written = dict(q)
    group_size, bits, mode = q["group_size"], q["bits"], q.get("mode", "affine")
    try:
        nn.quantize(model, group_size, bits, mode=mode, class_predicate=_chooser(model, q, written))
    except ValueError as exc:
        raise BadInputError(f"cannot quantize the dummy model to {bits} bits in groups of {group_size} "
                            f"({mode}): {exc}") from None
    return written


def _chooser(model: Any, q: dict, written: dict):
    """The class predicate of mlx-lm's conversion: per-path entries first, then what the layer
    and the architecture allow; per-layer choices are recorded in ``written``."""
    layers = {path: value for path, value in q.items() if isinstance(value, (dict, bool))}
    architecture = getattr(model, "quant_predicate", None)

    def choose(path: str, module: Any):
        if path in layers:
            return layers[path]
        if not hasattr(module, "to_quantized") or module.weight.shape[-1] % q["group_size"]:
            return False
        chosen = architecture(path, module) if architecture is not None else True
        if isinstance(chosen, dict):
            written[path] = chosen
        return chosen

    return choose


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
