"""Typed keys for the application's shared state (aiohttp's web.AppKey)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from mlxctl.engine.engine import Engine
from mlxctl.server.settings import ServeSettings

ENGINE = web.AppKey("engine", Engine)
SETTINGS = web.AppKey("settings", ServeSettings)
POOL = web.AppKey("pool", Any)  # residency.ModelPool: the models besides the primary one
STATE = web.AppKey("state", Any)  # ServerState: draining flag, counters, response store
