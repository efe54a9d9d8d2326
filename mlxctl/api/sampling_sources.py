"""Where each sampling value came from, for `mlxctl run -v` and `mlxctl chat`'s status line:
``sampling: temperature=0.7 (generation_config.json) top_p=0.9 (flag) top_k=0 (default) ...``.

A source is a (label, SamplingDefaults) layer; the first layer that sets a field gives its value."""

from __future__ import annotations

from typing import Any

from mlxctl.api.sampling_defaults import SAMPLING_FIELDS, SamplingDefaults, from_generation_config

GENERATION_CONFIG = "generation_config.json"
# what `run` and `chat` use for a field no flag, setting or generation_config.json gives: greedy,
# no filters, no penalty (the server's built-ins are OpenAI's: temperature 1)
LOCAL_BUILT_IN = SamplingDefaults(temperature=0.0, top_p=1.0, top_k=0, min_p=0.0, repetition_penalty=1.0)


def model_layers(flags: SamplingDefaults, generation_config: dict, built_in: SamplingDefaults,
                 flag_label: str = "flag") -> list[tuple[str, SamplingDefaults]]:
    """The layers of a local run: the flags, the model's generation_config.json, the built-ins."""
    return [(flag_label, flags), (GENERATION_CONFIG, from_generation_config(generation_config)), ("default", built_in)]


def resolve(layers: list[tuple[str, SamplingDefaults]]) -> list[tuple[str, Any, str]]:
    """(field, value, source label) of each sampling field some layer sets, in SAMPLING_FIELDS order."""
    found = []
    for name in SAMPLING_FIELDS:
        source = next(((label, getattr(d, name)) for label, d in layers if getattr(d, name) is not None), None)
        if source is not None:
            found.append((name, source[1], source[0]))
    return found


def sampling_line(resolved: list[tuple[str, Any, str]]) -> str:
    return "sampling: " + " ".join(f"{name}={value:g} ({source})" for name, value, source in resolved)
