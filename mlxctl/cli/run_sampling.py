"""`mlxctl run`'s sampling flags left out: the model's generation_config.json, else run's own
built-ins (greedy: temperature 0, no filters, no penalty), the flags winning; `run -v` shows what
was used and where each value came from (api/sampling_sources.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

from mlxctl.api.sampling_defaults import SamplingDefaults
from mlxctl.api.sampling_sources import LOCAL_BUILT_IN as RUN_BUILT_IN, model_layers, resolve, sampling_line


def with_model_defaults(params: Any, flags: SamplingDefaults, loaded: Any) -> tuple[Any, str]:
    """``params`` with each field no flag set taken from ``loaded``'s generation_config.json (a
    LoadedModel) or the built-in, and the ``sampling: ...`` line saying so."""
    used = resolve(model_layers(flags, getattr(loaded, "generation_config", None) or {}, RUN_BUILT_IN))
    return dataclasses.replace(params, **{name: value for name, value, _ in used}), sampling_line(used)
