"""API key check: ``Authorization: Bearer KEY`` (OpenAI style) or ``x-api-key: KEY`` (Anthropic)."""

from __future__ import annotations

import hmac

from aiohttp import web

from mlxctl.server.errors import ApiError
from mlxctl.server.keys import SETTINGS

OPEN_PATHS = ("/", "/health", "/metrics")  # open unless --auth-health


def presented_key(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.headers.get("x-api-key")


def key_matches(presented: str | None, expected: str) -> bool:
    """Constant-time, on the bytes: aiohttp decodes header bytes as UTF-8 with surrogateescape,
    so encoding the same way gives back what the client sent, even when it is not UTF-8."""
    return presented is not None and hmac.compare_digest(presented.encode("utf-8", "surrogateescape"),
                                                         expected.encode("utf-8", "surrogateescape"))


def needs_key(request: web.Request) -> bool:
    settings = request.app[SETTINGS]
    if settings.api_key is None or request.method == "OPTIONS":
        return False
    return settings.auth_health or request.path not in OPEN_PATHS


@web.middleware
async def auth(request: web.Request, handler) -> web.StreamResponse:
    if needs_key(request) and not key_matches(presented_key(request), request.app[SETTINGS].api_key):
        raise ApiError(401, "invalid or missing API key: send 'Authorization: Bearer KEY' or 'x-api-key: KEY'",
                       code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
    return await handler(request)
