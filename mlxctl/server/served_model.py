"""The model names this server answers to; any other name in a request is a 404."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from mlxctl.server.errors import ApiError
from mlxctl.server.keys import ENGINE, SETTINGS, STATE


def model_formats(app: web.Application) -> Any:
    """The served model's tool-call and reasoning formats, detected once per loaded tokenizer."""
    from mlxctl.api.chat_plan import ModelFormats

    engine, settings, state = app[ENGINE], app[SETTINGS], app[STATE]
    tokenizer = engine.model.tokenizer
    if state.formats is None or state.formats[0] is not tokenizer:
        state.formats = (tokenizer, ModelFormats.detect(tokenizer, settings.tool_call_parser, settings.reasoning_parser))
    return state.formats[1]


def check_model(request: web.Request, name: str) -> None:
    settings = request.app[SETTINGS]
    if name not in (settings.model_name, *settings.aliases):
        raise ApiError(404, f"model '{name}' not found: this server serves '{settings.model_name}'",
                       param="model", code="model_not_found")
