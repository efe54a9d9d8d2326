"""Shared bits of the MCP hub tests."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

CALC = str(Path(__file__).parent / "servers" / "calc.py")
HTTP_TOKEN = "s3cret"
# Tools of the calc server that the tests allow (all but crash and secret.read).
CALC_ALLOW = ["add", "slow", "boom", "getenv", "picture"]


def calc_stdio(env: dict[str, str] | None = None, **extra) -> dict:
    """A config entry that runs the calc server over stdio with this interpreter.

    PYTHONPATH is passed on (stdio servers get only a minimal environment), so the server sees
    the same ``mcp`` SDK as the tests.
    """
    env = dict(env or {})
    if os.environ.get("PYTHONPATH"):
        env.setdefault("PYTHONPATH", os.environ["PYTHONPATH"])
    return {"command": sys.executable, "args": [CALC], **({"env": env} if env else {}), **extra}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
