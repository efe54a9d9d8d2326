"""Sampling defaults: the values a request's omitted sampling fields take.

Precedence, per field: the request's own field > the model's ``--models-config`` entry (pool
models) > a ``serve --default-*`` flag > the model folder's ``generation_config.json``
(temperature, top_p, top_k, min_p, repetition_penalty, as Hugging Face writes them) > the
built-in value (SamplingParams: temperature 1, no filters, no penalty). ``max_tokens`` comes from
a config entry or ``--default-max-tokens`` only: a cap for a request that gives no limit of its
own, never more than what the prompt leaves of the context (the engine caps it there); a
request's own limit is checked against the context as before.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlxctl.errors import BadInputError, MlxctlError

SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")
BUILT_IN = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0}


@dataclass(frozen=True)
class SamplingDefaults:
    """Defaults for omitted fields; None: no default here (the next source decides)."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    max_tokens: int | None = None  # a cap for requests without a limit; None: up to the context

    def over(self, base: "SamplingDefaults") -> "SamplingDefaults":
        """These defaults, with ``base``'s where these have none."""
        return SamplingDefaults(**{f.name: _first(getattr(self, f.name), getattr(base, f.name))
                                   for f in dataclasses.fields(self)})

    def sampling(self) -> dict[str, Any]:
        """The sampling fields set here, as SamplingParams keyword arguments (no max_tokens)."""
        return {k: getattr(self, k) for k in SAMPLING_FIELDS if getattr(self, k) is not None}

    def effective(self, context_length: int | None = None) -> dict[str, Any]:
        """Every field's value for a request that omits it (built-ins filled in), as /v1/models
        shows it; ``max_tokens`` None: up to the end of the context."""
        cap = self.max_tokens
        if cap is not None and context_length is not None:
            cap = min(cap, context_length)
        return {**BUILT_IN, **self.sampling(), "max_tokens": cap}


NO_DEFAULTS = SamplingDefaults()  # built-ins only


def _first(value: Any, fallback: Any) -> Any:
    return fallback if value is None else value


def check_defaults(defaults: SamplingDefaults, prefix: str = "--default-", dashed: bool = True) -> SamplingDefaults:
    """Raise BadInputError naming the first value out of its range (``prefix`` + the field name,
    dashed: the flag it came from; ``dashed`` False: the name as it is, a config file's key)."""
    from mlxctl.engine.sampling import SamplingParams

    def label(name: str) -> str:
        return prefix + (name.replace("_", "-") if dashed else name)

    if defaults.max_tokens is not None and defaults.max_tokens < 1:
        raise BadInputError(f"{label('max_tokens')} must be at least 1, got {defaults.max_tokens}")
    for name, value in defaults.sampling().items():
        try:
            SamplingParams(**{name: value}).validate()
        except MlxctlError as err:
            raise BadInputError(err.message.replace(name, label(name), 1)) from None
    return defaults


def from_generation_config(config: dict[str, Any]) -> SamplingDefaults:
    """The sampling defaults a ``generation_config.json`` gives; values of the wrong type or out of
    range are left out (the built-in applies), never a request's error."""
    found = {}
    for name in SAMPLING_FIELDS:
        value = config.get(name)
        wanted = int if name == "top_k" else (int, float)
        if isinstance(value, wanted) and not isinstance(value, bool) and _valid(name, value):
            found[name] = int(value) if name == "top_k" else float(value)
    return SamplingDefaults(**found)


def _valid(name: str, value: Any) -> bool:
    try:
        check_defaults(SamplingDefaults(**{name: value}))
    except BadInputError:
        return False
    return True


def read_generation_config(folder: Path) -> dict[str, Any]:
    """The folder's ``generation_config.json`` as a dict ({} when absent or unreadable)."""
    try:
        data = json.loads((Path(folder) / "generation_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
