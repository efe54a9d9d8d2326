"""McpHub over streamable HTTP against the calc test server running in a subprocess."""

from __future__ import annotations

import socket

import pytest
import pytest_asyncio

from mlxctl.mcp import McpHub, parse_config
from tests.mcp.helpers import BACKSTOP_S, HTTP_TOKEN

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(3 * BACKSTOP_S)]

SHORT_TIMEOUT = 1  # for a call the server never answers: the timeout is what is tested


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def hub(calc_http_url, tmp_path_factory):
    with socket.socket() as unlistened:  # bound, never listening: connections to it are refused
        unlistened.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{unlistened.getsockname()[1]}/mcp"
        async with McpHub(_config(calc_http_url, down), connect_timeout=BACKSTOP_S,
                          audit_log=tmp_path_factory.mktemp("mcp-http") / "audit.jsonl") as hub:
            yield hub


def _config(url, down):
    return parse_config(
        {
            "mcpServers": {
                # Globs: "s*" admits slow and secret.read; crash, boom and the rest stay out.
                "web": {
                    "url": url,
                    "headers": {"X-Token": HTTP_TOKEN},
                    "allow": ["add", "s*"],
                    "timeout": BACKSTOP_S,
                },
                # The same server, for the call timeout.
                "tight": {
                    "url": url,
                    "headers": {"X-Token": HTTP_TOKEN},
                    "allow": ["hold", "add"],
                    "timeout": SHORT_TIMEOUT,
                },
                "noauth": {"url": url},
                "down": {"url": down},
            }
        }
    )


async def test_tools_listed_with_glob_allow_list(hub):
    names = [t["function"]["name"] for t in hub.tools()]
    assert names == ["web__add", "web__slow", "web__secret_read", "tight__add", "tight__hold"]
    status = {s["name"]: s for s in hub.status()}
    assert status["web"]["state"] == "connected" and status["web"]["transport"] == "http"
    assert status["web"]["url"].endswith("/mcp") and "headers" not in status["web"]


async def test_unreachable_and_unauthorized_servers_do_not_stop_the_others(hub):
    assert set(hub.errors) == {"noauth", "down"}
    assert "401" in hub.errors["noauth"]  # "(HTTP 401 Unauthorized)" on mcp 2, httpx's message on 1.x
    assert "ConnectError" in hub.errors["down"] or "connect" in hub.errors["down"].lower()


async def test_call_over_http(hub):
    result = await hub.call("web__add", {"a": 40, "b": 2})
    assert (result.text, result.is_error, result.server, result.tool) == ("42", False, "web", "add")


async def test_denied_over_http(hub):
    result = await hub.call("web__boom", {})
    assert result.is_error and "not allowed" in result.text


async def test_invalid_arguments_over_http(hub):
    result = await hub.call("web__add", {"a": 1, "b": "two"})
    assert result.is_error and "$.b: 'two' is not of type 'integer'" in result.text


async def test_timeout_over_http(hub):
    result = await hub.call("tight__hold", {})  # nothing releases it: it never answers
    assert result.is_error and f"timed out after {SHORT_TIMEOUT:g}s" in result.text
    assert (await hub.call("tight__add", {"a": 1, "b": 2})).text == "3"
