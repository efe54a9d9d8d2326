"""GET /v1/cache/stats and DELETE /v1/cache: the prefix cache, seen and emptied."""

from __future__ import annotations

import asyncio
import functools

from aiohttp import web

from mlxctl.server.errors import ApiError
from mlxctl.server.keys import ENGINE


async def cache_stats(request: web.Request) -> web.Response:
    return web.json_response(request.app[ENGINE].stats()["prefix_cache"])


async def clear_cache(request: web.Request) -> web.Response:
    """Drop every cached block no running request holds (runs on the engine thread);
    ``?disk=true`` empties the disk tier too."""
    engine = request.app[ENGINE]
    disk = request.query.get("disk", "false").lower()
    if disk not in ("true", "false", "1", "0"):
        raise ApiError(400, f"disk must be true or false, got {request.query['disk']!r}", param="disk")
    clear = functools.partial(engine.clear_prefix_cache, disk=disk in ("true", "1"))
    cleared = await asyncio.get_running_loop().run_in_executor(None, clear)
    return web.json_response({"cleared_blocks": cleared, **engine.stats()["prefix_cache"]})
