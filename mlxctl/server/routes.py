"""The one route table."""

from __future__ import annotations

from aiohttp import web

from mlxctl.server.views import health


def setup_routes(app: web.Application) -> None:
    app.router.add_get("/health", health.health)
    app.router.add_get("/v1/models", health.models)
