"""McpHub over streamable HTTP against the calc test server running in a subprocess."""

from __future__ import annotations

import pytest
import pytest_asyncio

from mlxctl.mcp import McpHub, parse_config
from tests.mcp.helpers import HTTP_TOKEN, free_port

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(60)]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def hub(calc_http_url, tmp_path_factory):
    config = parse_config(
        {
            "mcpServers": {
                # Globs: "s*" admits slow and secret.read; crash, boom and the rest stay out.
                "web": {
                    "url": calc_http_url,
                    "headers": {"X-Token": HTTP_TOKEN},
                    "allow": ["add", "s*"],
                    "timeout": 1,
                },
                "noauth": {"url": calc_http_url},
                "down": {"url": f"http://127.0.0.1:{free_port()}/mcp"},
            }
        }
    )
    audit = tmp_path_factory.mktemp("mcp-http") / "audit.jsonl"
    async with McpHub(config, connect_timeout=5, audit_log=audit) as hub:
        yield hub


async def test_tools_listed_with_glob_allow_list(hub):
    assert [t["function"]["name"] for t in hub.tools()] == ["web__add", "web__slow", "web__secret_read"]
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
    result = await hub.call("web__slow", {"seconds": 5})
    assert result.is_error and "timed out after 1s" in result.text
    assert (await hub.call("web__add", {"a": 1, "b": 2})).text == "3"
