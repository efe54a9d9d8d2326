"""GET /openapi.json."""

from __future__ import annotations

from aiohttp import web

from mlxctl.server import openapi


async def openapi_json(request: web.Request) -> web.Response:
    return web.json_response(openapi.build(request.app))
