"""Shared bits of the MCP hub tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

CALC = str(Path(__file__).parent / "servers" / "calc.py")
HTTP_TOKEN = "s3cret"
# Tools of the calc server that the tests allow (all but crash and secret.read).
CALC_ALLOW = ["add", "slow", "hold", "release", "boom", "getenv", "picture"]
# How long a call or a connection may take before the hub gives up: only a backstop against a
# deadlock, so that a loaded machine never runs into it (the tests go on as soon as the hub answers).
BACKSTOP_S = 90


def calc_stdio(env: dict[str, str] | None = None, *, flags: tuple[str, ...] = (), **extra) -> dict:
    """A config entry that runs the calc server over stdio with this interpreter (and ``flags``).

    PYTHONPATH is passed on (stdio servers get only a minimal environment), so the server sees
    the same ``mcp`` SDK as the tests.
    """
    env = dict(env or {})
    if os.environ.get("PYTHONPATH"):
        env.setdefault("PYTHONPATH", os.environ["PYTHONPATH"])
    return {"command": sys.executable, "args": [CALC, *flags], **({"env": env} if env else {}), **extra}


@contextlib.asynccontextmanager
async def arrival_port() -> AsyncIterator[tuple[int, asyncio.Event]]:
    """A loopback port, and an event set once something connects to it (calc's hold, on arrival)."""
    arrived = asyncio.Event()

    def connected(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        arrived.set()
        writer.close()

    server = await asyncio.start_server(connected, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1], arrived


async def held_call(hub, name: str = "calc__hold") -> asyncio.Task:
    """A hold call (it answers only once released), returned once the server is running it."""
    async with arrival_port() as (port, arrived):
        call = asyncio.ensure_future(hub.call(name, {"signal_port": port}))
        signal = asyncio.ensure_future(arrived.wait())
        await asyncio.wait([call, signal], return_when=asyncio.FIRST_COMPLETED)
        signal.cancel()
    assert arrived.is_set(), f"{name} ended before the server ran it: {call.result()}"
    return call
