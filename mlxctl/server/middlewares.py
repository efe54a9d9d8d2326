"""Small middlewares: protocol-shaped errors, the body size limit, in-flight tracking and drain.

The others live in their own modules (auth, ratelimit, cors, access_log); app.py orders them.
"""

from __future__ import annotations

import logging

from aiohttp import web

from mlxctl.errors import MlxctlError
from mlxctl.server.errors import ApiError, error_response
from mlxctl.server.keys import ENGINE, SETTINGS, STATE

log = logging.getLogger("mlxctl.server")


@web.middleware
async def errors(request: web.Request, handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as err:
        return error_response(request, err)
    except MlxctlError as err:
        return error_response(request, ApiError.from_mlxctl(err))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(request, ApiError(exc.status, exc.reason if not exc.text else exc.text))
    except Exception as exc:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(request, ApiError(500, f"internal error: {type(exc).__name__}: {exc}"))


@web.middleware
async def body_limit(request: web.Request, handler) -> web.StreamResponse:
    """413 before reading a body whose declared length is over the limit (aiohttp's own
    client_max_size catches bodies without a Content-Length while they are read)."""
    limit = request.app[SETTINGS].max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise ApiError(413, f"request body too large: {request.content_length} bytes, the limit is {limit}")
    return await handler(request)


@web.middleware
async def track(request: web.Request, handler) -> web.StreamResponse:
    """Count requests in flight; while draining, refuse new ones with 503 and Retry-After."""
    state = request.app[STATE]
    if state.draining:
        raise ApiError(503, "the server is shutting down", headers={"Retry-After": "5", "Connection": "close"})
    state.enter()
    try:
        return await handler(request)
    finally:
        state.leave()


WHILE_LOADING = ("/", "/health", "/v1/models", "/v1/status", "/metrics", "/openapi.json")


@web.middleware
async def leases(request: web.Request, handler) -> web.StreamResponse:
    """Residency leases a view took (served_model.use_model) end with its response."""
    from mlxctl.server.served_model import release_models

    try:
        return await handler(request)
    finally:
        release_models(request)


@web.middleware
async def loading(request: web.Request, handler) -> web.StreamResponse:
    """503 with Retry-After for model endpoints until the engine has loaded its model."""
    if request.app[ENGINE].model is None and request.path not in WHILE_LOADING and request.method != "OPTIONS":
        raise ApiError(503, "the model is still loading", headers={"Retry-After": "5"})
    return await handler(request)
