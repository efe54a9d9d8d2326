"""What a loaded chat model is, for its /v1/models entry: context length, capabilities and the
quantisation of its weights as loaded (the CPU backend's ``--dtype auto`` dequantises a quantised
folder, so the folder's config is not the answer)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from aiohttp import web

from mlxctl.server.keys import SETTINGS

UNKNOWN = {"context_length": None, "capabilities": None, "quantization": None}  # a model not loaded


def model_facts(app: web.Application, loaded: Any) -> dict[str, Any]:
    """``context_length``, ``capabilities`` and ``quantization`` of ``loaded`` (a LoadedModel; None
    while it is not loaded: all three unknown)."""
    if loaded is None:
        return dict(UNKNOWN)
    return {"context_length": loaded.context_length, "capabilities": capabilities(app, loaded),
            "quantization": quantization(loaded.model)}


def capabilities(app: web.Application, loaded: Any) -> list[str]:
    """chat always; tools unless --tool-call-parser none; reasoning when a reasoning parser is on
    (forced or found in the chat template); vision when the model has a vision tower."""
    from mlxctl.server.served_model import formats_for

    formats = formats_for(app, loaded.tokenizer)
    found = ["chat"]
    if app[SETTINGS].tool_call_parser != "none":
        found.append("tools")
    if formats.reasoning_parser is not None:
        found.append("reasoning")
    if getattr(loaded, "vision", None) is not None:
        found.append("vision")
    return found


def quantization(model: Any) -> dict[str, Any]:
    """Bits, group size and mode of the quantised layers (the most common, ``mixed`` when they
    differ; None when nothing is quantised) and ``dtype``, that of the unquantised weights."""
    kinds: Counter = Counter()
    dtypes: Counter = Counter()  # of unquantised weights; of the scales when there are none
    for module in model.modules():
        if hasattr(module, "bits") and "scales" in module:
            kinds[(module.bits, module.group_size, getattr(module, "mode", "affine"))] += 1
            dtypes[_name(module["scales"].dtype)] += 0.001
        elif hasattr(module.get("weight"), "dtype"):
            dtypes[_name(module["weight"].dtype)] += 1
    (bits, group, mode), _ = kinds.most_common(1)[0] if kinds else ((None, None, None), 0)
    return {"quantized": bool(kinds), "bits": bits, "group_size": group, "mode": mode,
            "mixed": len(kinds) > 1, "dtype": dtypes.most_common(1)[0][0] if dtypes else None}


def _name(dtype: Any) -> str:
    return str(dtype).removeprefix("mlx.core.")
