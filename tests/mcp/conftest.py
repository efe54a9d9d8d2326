"""Fixtures for the MCP hub tests: the calc test server, over stdio and streamable HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile

import pytest

from tests.mcp.helpers import CALC, HTTP_TOKEN


def _http_unsupported() -> str | None:
    try:
        import uvicorn  # noqa: F401
    except ImportError:
        return "uvicorn is not installed, so the mcp SDK cannot serve streamable HTTP here"
    try:
        from mcp.server.mcpserver import MCPServer as server_cls
    except ImportError:
        try:
            from mcp.server.fastmcp import FastMCP as server_cls
        except ImportError:
            return "the installed mcp SDK has neither MCPServer nor FastMCP"
    if not hasattr(server_cls, "streamable_http_app"):
        return "the installed mcp SDK's server has no streamable_http_app (no streamable HTTP support)"
    return None


@pytest.fixture(scope="session")
def calc_http_url():
    """The calc server on streamable HTTP at a loopback port; it wants X-Token: s3cret.

    The socket is bound and listening before the server starts (it inherits it), so connections
    queue until the server accepts them: there is nothing to wait for here.
    """
    reason = _http_unsupported()
    if reason:
        pytest.skip(reason)
    with socket.create_server(("127.0.0.1", 0)) as sock:
        port = sock.getsockname()[1]
        log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in the finally below
        proc = subprocess.Popen(
            [sys.executable, CALC, "--http-fd", str(sock.fileno()), "--require-header", f"x-token={HTTP_TOKEN}"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=[sock.fileno()],
        )
    try:
        yield f"http://127.0.0.1:{port}/mcp"
        if proc.poll() is not None:
            log.seek(0)
            pytest.fail(f"the HTTP calc server exited ({proc.returncode}): {log.read().decode()[-2000:]}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
