"""Fixtures for the MCP hub tests: the calc test server, over stdio and streamable HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time

import pytest

from tests.mcp.helpers import CALC, HTTP_TOKEN, free_port


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
    """The calc server on streamable HTTP at a free loopback port; it wants X-Token: s3cret."""
    reason = _http_unsupported()
    if reason:
        pytest.skip(reason)
    port = free_port()
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in the finally below
    proc = subprocess.Popen(
        [sys.executable, CALC, "--http", str(port), "--require-header", f"x-token={HTTP_TOKEN}"],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"the HTTP calc server exited ({proc.returncode}): {log.read().decode()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("the HTTP calc server did not start listening within 30s")
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
