"""Request logging: one line per request on the ``mlxctl.access`` logger (see server/logs.py)."""

from __future__ import annotations

import asyncio
import logging
import time

from aiohttp import web

log = logging.getLogger("mlxctl.access")
CLIENT_CLOSED = 499  # nginx's code for a client that left before the response was done


@web.middleware
async def access_log(request: web.Request, handler) -> web.StreamResponse:
    start, status = time.perf_counter(), 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except asyncio.CancelledError:
        status = CLIENT_CLOSED
        raise
    except web.HTTPException as exc:
        status = exc.status
        raise
    finally:
        _log(request, status, time.perf_counter() - start)


def _log(request: web.Request, status: int, seconds: float) -> None:
    fields = {"method": request.method, "path": request.path, "status": status,
              "duration_ms": round(seconds * 1000, 1), "remote": request.remote}
    log.info("%s %s %s %.1fms %s", request.remote, request.method, request.path_qs, seconds * 1000, status,
             extra={"http": fields})
