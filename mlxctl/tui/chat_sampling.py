"""The sampling `mlxctl chat` uses, and the ``sampling: ...`` line under its status bar that shows it.

A temperature or top_p set in the settings panel or by a flag of `chat` (``set``) wins. Left
empty: in-process, the model's generation_config.json, else `mlxctl run`'s built-ins (greedy),
the same layers as `run` (api/sampling_sources.py); through a daemon the field is left out of
the request, and the line shows what the server reports for the model in ``/v1/models``
``sampling_defaults`` (``server``), or ``server defaults`` where it reports nothing.
"""

from __future__ import annotations

from typing import Any

from mlxctl.api.sampling_defaults import SAMPLING_FIELDS, SamplingDefaults, from_generation_config
from mlxctl.api.sampling_sources import model_layers, resolve, sampling_line
from mlxctl.api.sampling_sources import LOCAL_BUILT_IN as RUN_BUILT_IN
from mlxctl.tui.conversation import ChatSettings

SET = "set"  # the settings panel or a flag of `chat`
SERVER = "server"


def requested(settings: ChatSettings) -> SamplingDefaults:
    """The sampling fields the chat's settings set (None: left to the model or the server)."""
    return SamplingDefaults(temperature=settings.temperature, top_p=settings.top_p)


def engine_sampling(settings: ChatSettings, loaded: Any) -> list[tuple[str, Any, str]]:
    """(field, value, source) of every sampling field for ``loaded`` (a LoadedModel) in this process."""
    config = getattr(loaded, "generation_config", None) or {}
    return resolve(model_layers(requested(settings), config, RUN_BUILT_IN, flag_label=SET))


def engine_line(settings: ChatSettings, loaded: Any) -> str:
    return sampling_line(engine_sampling(settings, loaded))


def daemon_line(settings: ChatSettings, reported: Any) -> str:
    """The line for a daemon that reported ``reported`` (a model's ``sampling_defaults``, or None)."""
    server = from_generation_config(reported) if isinstance(reported, dict) else SamplingDefaults()
    used = resolve([(SET, requested(settings)), (SERVER, server)])
    if not used:
        return "sampling: server defaults"
    line = sampling_line(used)
    return line + " · others: server defaults" if len(used) < len(SAMPLING_FIELDS) else line
