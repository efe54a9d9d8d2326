"""The model names this server answers to; any other name in a request is a 404."""

from __future__ import annotations

from aiohttp import web

from mlxctl.server.errors import ApiError
from mlxctl.server.keys import SETTINGS


def check_model(request: web.Request, name: str) -> None:
    settings = request.app[SETTINGS]
    if name not in (settings.model_name, *settings.aliases):
        raise ApiError(404, f"model '{name}' not found: this server serves '{settings.model_name}'",
                       param="model", code="model_not_found")
