"""GET / and HEAD /: 200 and a line naming the server, for liveness probes (Ollama-compatible
clients ask ``HEAD /`` or ``GET /`` for "Ollama is running"); open like /health, and answered
while the model loads."""

from __future__ import annotations

from aiohttp import web

from mlxctl import __version__


async def root(request: web.Request) -> web.Response:
    return web.Response(text=f"mlxctl serve {__version__} is running\n")
