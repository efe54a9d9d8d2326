"""GET /health, and loading or unloading a pool model (the model list is views/models.py)."""

from __future__ import annotations

from aiohttp import web

from mlxctl.errors import MlxctlError
from mlxctl.server.errors import ApiError
from mlxctl.server.keys import ENGINE, POOL, SETTINGS


async def health(request: web.Request) -> web.Response:
    engine = request.app[ENGINE]
    if engine.model is None:
        return web.json_response({"status": "loading"}, status=503)
    return web.json_response({"status": "ok", "model": request.app[SETTINGS].model_name})


async def load_model(request: web.Request) -> web.Response:
    """POST /v1/models/{name}/load: load a pool model now (200 when it is resident)."""
    resident = _resident(request)
    try:
        await request.app[POOL].load(resident.name)
    except MlxctlError as err:
        raise ApiError(503, f"model '{resident.name}' could not be loaded: {err.message}") from err
    return web.json_response(resident.describe())


async def unload_model(request: web.Request) -> web.Response:
    """POST /v1/models/{name}/unload: unload a pool model no request is using (409 otherwise)."""
    resident = _resident(request)
    force = request.query.get("force", "false").lower() in ("1", "true")
    if resident.state == "ready" and not await request.app[POOL].unload(resident.name, force=force):
        why = "it is pinned (add ?force=true)" if resident.pinned and not resident.leases else "requests are using it"
        raise ApiError(409, f"model '{resident.name}' was not unloaded: {why}")
    return web.json_response(resident.describe())


def _resident(request: web.Request):
    name = request.match_info["name"]
    resident = request.app[POOL].get(name)
    if resident is None:
        settings = request.app[SETTINGS]
        why = "the primary model is pinned (serve --no-pin-primary lets it be unloaded)" \
            if name in (settings.model_name, *settings.aliases) else "not a served model"
        raise ApiError(404, f"model '{name}': {why}", param="name", code="model_not_found")
    return resident
