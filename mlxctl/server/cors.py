"""CORS, off unless origins are configured: preflight answers and headers on every response."""

from __future__ import annotations

from aiohttp import web

from mlxctl.server.keys import SETTINGS

ALLOW_HEADERS = "Authorization, Content-Type, x-api-key, anthropic-version, anthropic-beta, OpenAI-Organization"
ALLOW_METHODS = "GET, POST, DELETE, OPTIONS"
MAX_AGE = "600"


def allowed_origin(request: web.Request) -> str | None:
    """The value for Access-Control-Allow-Origin, or None when this origin is not allowed."""
    origins, origin = request.app[SETTINGS].cors_origins, request.headers.get("Origin")
    if not origins or origin is None:
        return None
    if "*" in origins:
        return "*"
    return origin if origin in origins else None


def is_preflight(request: web.Request) -> bool:
    return request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers


@web.middleware
async def cors_preflight(request: web.Request, handler) -> web.StreamResponse:
    if not (is_preflight(request) and request.app[SETTINGS].cors_origins):
        return await handler(request)
    if allowed_origin(request) is None:
        return web.Response(status=403, text="origin not allowed")
    requested = request.headers.get("Access-Control-Request-Headers", ALLOW_HEADERS)
    return web.Response(status=204, headers={"Access-Control-Allow-Methods": ALLOW_METHODS,
                                             "Access-Control-Allow-Headers": requested,
                                             "Access-Control-Max-Age": MAX_AGE})


async def add_cors_headers(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare: runs before headers go out, so streamed responses get them too."""
    origin = allowed_origin(request)
    if origin is not None:
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Vary"] = "Origin"
        response.headers.setdefault("Access-Control-Expose-Headers", "Retry-After")
