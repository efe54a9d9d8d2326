"""Middlewares: protocol-shaped errors for everything a view raises."""

from __future__ import annotations

import logging

from aiohttp import web

from mlxctl.errors import MlxctlError
from mlxctl.server.errors import ApiError, error_response

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
