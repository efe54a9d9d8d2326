"""GET /health and GET /v1/models."""

from __future__ import annotations

import time

from aiohttp import web

from mlxctl.server.keys import ENGINE, SETTINGS

STARTED = int(time.time())


async def health(request: web.Request) -> web.Response:
    engine = request.app[ENGINE]
    if engine.model is None:
        return web.json_response({"status": "loading"}, status=503)
    return web.json_response({"status": "ok", "model": request.app[SETTINGS].model_name})


async def models(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS]
    names = (settings.model_name, *settings.aliases)
    data = [{"id": n, "object": "model", "created": STARTED, "owned_by": "mlxctl"} for n in names]
    return web.json_response({"object": "list", "data": data})
