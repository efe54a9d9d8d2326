"""A small MCP server for the hub's tests.

``python calc.py`` serves over stdio; ``python calc.py --http-fd FD [--require-header NAME=VALUE]``
serves streamable HTTP at ``/mcp`` on the listening loopback socket it inherits as FD (the test
binds it before starting the server, so no wait for the server to listen is needed), answering 401
to requests without the header, when one is required. ``--meet FIFO r|w`` opens a FIFO before
serving, which blocks until a peer server opens its other end: two servers that meet can only both
come up if they are started at once. Works with the ``mcp`` SDK 2.x (``MCPServer``) and 1.x
(``FastMCP``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import socket
from typing import Annotated

from pydantic import Field

try:  # mcp 2.x
    from mcp.server.mcpserver import Image
    from mcp.server.mcpserver import MCPServer as _Server

    _V2 = True
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as _Server
    from mcp.server.fastmcp import Image

    _V2 = False

# A 1x1 transparent PNG.
_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)

server = _Server("calc")
_released = asyncio.Event()


# bounded, so a forced call's grammar ends each number: a small model greedily writing digits
# would otherwise run a call past max_tokens (seen in full CI runs, where the model's greedy path
# depends on what the session's engine did before)
Operand = Annotated[int, Field(ge=-1_000_000, le=1_000_000)]


@server.tool()
def add(a: Operand, b: Operand) -> int:
    """Add two integers."""
    return a + b


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep for the given number of seconds, then say so."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
async def hold(signal_port: int = 0) -> str:
    """Answer only once release is called; first connect to signal_port (if given) to say it arrived."""
    if signal_port:
        _reader, writer = await asyncio.open_connection("127.0.0.1", signal_port)
        writer.close()
    await _released.wait()
    return "released"


@server.tool()
def release() -> str:
    """Let every hold call now waiting answer."""
    _released.set()
    _released.clear()
    return "released"


@server.tool()
def boom(message: str = "kaboom") -> str:
    """Always fails."""
    raise ValueError(message)


@server.tool()
def getenv(name: str) -> str:
    """Read one of the server's environment variables."""
    return os.environ.get(name, "<unset>")


@server.tool()
def picture() -> list:
    """A caption and a tiny image."""
    return ["a tiny picture", Image(data=_PNG, format="png")]


@server.tool()
def crash() -> str:
    """Kills the server mid-call (to test a lost connection)."""
    os._exit(3)


@server.tool(name="secret.read")
def secret_read() -> str:
    """A tool the tests keep off the allow-list."""
    return "the secret"


def _serve_http(fd: int, require_header: str | None) -> None:
    import uvicorn

    sock = socket.socket(fileno=fd)
    if _V2:
        app = server.streamable_http_app(host="127.0.0.1")
    else:
        server.settings.host = "127.0.0.1"
        server.settings.port = sock.getsockname()[1]
        app = server.streamable_http_app()

    if require_header:
        name, _, value = require_header.partition("=")
        wanted = (name.lower().encode(), value.encode())
        inner = app

        async def app(scope, receive, send):
            if scope["type"] == "http" and wanted not in list(scope.get("headers") or []):
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"missing header"})
                return
            await inner(scope, receive, send)

    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


def _meet(fifo: str, mode: str) -> None:
    """Open the FIFO for reading (r) or writing (w); returns once a peer has opened the other end."""
    with open(fifo, mode):
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http-fd", type=int, metavar="FD")
    parser.add_argument("--require-header", metavar="NAME=VALUE")
    parser.add_argument("--meet", nargs=2, metavar=("FIFO", "MODE"))
    opts = parser.parse_args()
    if opts.meet:
        _meet(*opts.meet)
    if opts.http_fd is not None:
        _serve_http(opts.http_fd, opts.require_header)
    else:
        server.run()


if __name__ == "__main__":
    main()
