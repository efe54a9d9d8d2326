"""GET /v1/cache/stats and DELETE /v1/cache: the prefix cache, seen and emptied."""

from __future__ import annotations

import asyncio

from aiohttp import web

from mlxctl.server.keys import ENGINE


async def cache_stats(request: web.Request) -> web.Response:
    return web.json_response(request.app[ENGINE].stats()["prefix_cache"])


async def clear_cache(request: web.Request) -> web.Response:
    """Drop every cached block no running request holds (runs on the engine thread)."""
    engine = request.app[ENGINE]
    cleared = await asyncio.get_running_loop().run_in_executor(None, engine.clear_prefix_cache)
    return web.json_response({"cleared_blocks": cleared, **engine.stats()["prefix_cache"]})
