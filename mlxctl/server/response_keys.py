"""The app's store of past /v1/responses results (state of the app, never of the module)."""

from __future__ import annotations

from aiohttp import web

from mlxctl.api.response_store import ResponseStore
from mlxctl.server.keys import SETTINGS

RESPONSES = web.AppKey("responses", ResponseStore)


def install_response_store(app: web.Application) -> None:
    """Give ``app`` its store; call before the app starts (a started app's state is frozen)."""
    app[RESPONSES] = ResponseStore(app[SETTINGS].response_store_size)


def store_of(app: web.Application) -> ResponseStore:
    return app[RESPONSES]
