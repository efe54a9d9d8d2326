"""Request logging: one line per request on the ``mlxctl.access`` logger (see server/logs.py)."""

from __future__ import annotations

import asyncio
import logging
import time

from aiohttp import web

from mlxctl.server.errors import SENT_ERROR

log = logging.getLogger("mlxctl.access")
CLIENT_CLOSED = 499  # nginx's code for a client that left before the response was done
MESSAGE_CHARS = 300  # an error message longer than this is cut in the log line


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
    error = sent_error(request)
    fields.update(error)
    log.info("%s %s %s %.1fms %s%s", request.remote, request.method, request.path_qs, seconds * 1000, status,
             _error_text(error), extra={"http": fields})


def sent_error(request: web.Request) -> dict:
    """The message (and param) of the error body the client got, cut to MESSAGE_CHARS; {} if none.

    Also for a stream that ended with an error event after its 200."""
    if SENT_ERROR not in request:
        return {}
    message, param = request[SENT_ERROR]
    if len(message) > MESSAGE_CHARS:
        message = message[:MESSAGE_CHARS] + f"... ({len(message)} chars)"
    return {"error": message, **({"param": param} if param else {})}


def _error_text(error: dict) -> str:
    if not error:
        return ""
    return f" - {error['error']}" + (f" (param: {error['param']})" if "param" in error else "")
