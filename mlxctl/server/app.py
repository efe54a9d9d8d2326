"""The aiohttp application factory."""

from __future__ import annotations

from aiohttp import web

from mlxctl.engine.engine import Engine
from mlxctl.server import middlewares
from mlxctl.server.keys import ENGINE, SETTINGS
from mlxctl.server.routes import setup_routes
from mlxctl.server.settings import ServeSettings


def init_app(engine: Engine, settings: ServeSettings = ServeSettings()) -> web.Application:
    app = web.Application(middlewares=[middlewares.errors], client_max_size=settings.max_body_bytes)
    app[ENGINE] = engine
    app[SETTINGS] = settings
    setup_routes(app)
    return app
