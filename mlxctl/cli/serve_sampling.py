"""`serve --default-temperature / --default-top-p / --default-top-k / --default-max-tokens`: what a
request's omitted sampling fields take, over the model's generation_config.json (see
mlxctl/api/sampling_defaults.py for the precedence). Each is read as text and checked here, so a
bad value is one line and exit 4, before anything loads."""

from __future__ import annotations

import math
from typing import Annotated, Any, Optional

import typer

from mlxctl.errors import BadInputError

TemperatureOpt = Annotated[Optional[str], typer.Option("--default-temperature", metavar="T", show_default=False, help="Temperature for requests that give none (0 to 2; 0: greedy), over the model's generation_config.json.")]
TopPOpt = Annotated[Optional[str], typer.Option("--default-top-p", metavar="P", show_default=False, help="top_p for requests that give none (above 0, at most 1), over the model's generation_config.json.")]
TopKOpt = Annotated[Optional[str], typer.Option("--default-top-k", metavar="K", show_default=False, help="top_k for requests that give none (0: off), over the model's generation_config.json.")]
MaxTokensOpt = Annotated[Optional[str], typer.Option("--default-max-tokens", metavar="N", show_default=False, help="Most new tokens for a request that sets no max_tokens / max_output_tokens (Codex sets none), capped to what the prompt leaves of the context; a request's own limit is kept. Default: up to the end of the context.")]


def sampling_defaults(temperature: str | None, top_p: str | None, top_k: str | None,
                      max_tokens: str | None) -> Any:
    """The flags as a checked SamplingDefaults (None where a flag was not given)."""
    from mlxctl.api.sampling_defaults import SamplingDefaults, check_defaults

    return check_defaults(SamplingDefaults(
        temperature=_number("--default-temperature", temperature), top_p=_number("--default-top-p", top_p),
        top_k=_whole("--default-top-k", top_k), max_tokens=_whole("--default-max-tokens", max_tokens)))


def _number(flag: str, text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise BadInputError(f"{flag} must be a number, got {text!r}")
    return value


def _whole(flag: str, text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise BadInputError(f"{flag} must be a whole number, got {text!r}") from None


CONFIG_KEYS = ("temperature", "top_p", "top_k", "min_p", "max_tokens")  # a --models-config entry's
_WHOLE = ("top_k", "max_tokens")


def config_sampling(item: dict, where: str) -> Any:
    """A ``--models-config`` entry's sampling keys as a checked SamplingDefaults (None where the
    entry has no such key); BadInputError naming the entry, the key and the value otherwise."""
    from mlxctl.api.sampling_defaults import SamplingDefaults, check_defaults

    found = {key: _config_value(key, item[key], where) for key in CONFIG_KEYS if key in item}
    return check_defaults(SamplingDefaults(**found), prefix=f"{where}: ", dashed=False)


def _config_value(key: str, value: Any, where: str) -> int | float:
    whole = key in _WHOLE
    if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)) \
            or not math.isfinite(value):
        kind = "a whole number" if whole else "a number"
        raise BadInputError(f"{where}: {key}: must be {kind}, got {value!r}")
    return value if whole else float(value)
