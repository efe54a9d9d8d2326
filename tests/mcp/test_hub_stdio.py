"""McpHub over stdio against the real calc test server, next to servers that cannot start.

The hub gets a generous connect timeout (a deadlock backstop: start() returns as soon as every
server is connected or has failed); short timeouts are used only against servers that never answer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys

import pytest
import pytest_asyncio

from mlxctl.mcp import McpHub, parse_config
from tests.mcp.helpers import BACKSTOP_S, CALC_ALLOW, calc_stdio, held_call

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(3 * BACKSTOP_S)]

SHORT_TIMEOUT = 1  # for a server or a call that never answers: the timeout is what is tested
HANGS = {"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"]}


@pytest.fixture(scope="module")
def audit_path(tmp_path_factory):
    return tmp_path_factory.mktemp("mcp") / "audit.jsonl"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def hub(audit_path):
    config = parse_config(
        {
            "mcpServers": {
                "calc": calc_stdio(env={"CALC_GREETING": "hello"}, allow=CALC_ALLOW, timeout=BACKSTOP_S),
                "timid": calc_stdio(allow=["hold", "add"], timeout=SHORT_TIMEOUT),  # for the call timeout
                "missing": {"command": "/nonexistent/mcp-server"},
                "dies": {"command": sys.executable, "args": ["-c", "import sys; sys.exit('no config here')"]},
                "off": {"command": "/nonexistent/other", "disabled": True},
            }
        }
    )
    async with McpHub(config, connect_timeout=BACKSTOP_S, audit_log=audit_path) as hub:
        yield hub


async def test_failed_servers_are_reported_and_the_others_work(hub):
    assert set(hub.errors) == {"missing", "dies"}
    assert "command not found: /nonexistent/mcp-server" in hub.errors["missing"]
    assert "no config here" in hub.errors["dies"]  # the server's stderr explains it
    result = await hub.call("calc__add", {"a": 2, "b": 3})
    assert (result.text, result.is_error) == ("5", False)


async def test_a_server_that_never_answers_fails_at_the_connect_timeout():
    async with McpHub(parse_config({"mcpServers": {"hangs": HANGS}}), connect_timeout=SHORT_TIMEOUT) as hub:
        assert hub.errors == {"hangs": f"failed to start: timed out after {SHORT_TIMEOUT:g}s"}
        assert hub.tools() == []


async def test_servers_are_started_at_once(tmp_path):
    # Before it serves, each server waits for the other to open the FIFO: one at a time, neither would.
    fifo = tmp_path / "meet"
    os.mkfifo(fifo)
    servers = {
        "left": calc_stdio(flags=("--meet", str(fifo), "w"), allow=["add"]),
        "right": calc_stdio(flags=("--meet", str(fifo), "r"), allow=["add"]),
    }
    async with McpHub(parse_config({"mcpServers": servers}), connect_timeout=BACKSTOP_S) as hub:
        assert hub.errors == {}
        assert [s["state"] for s in hub.status()] == ["connected", "connected"]


async def test_tools_are_qualified_and_only_allowed(hub):
    tools = hub.tools()
    names = [t["function"]["name"] for t in tools]
    assert names == [f"calc__{name}" for name in CALC_ALLOW] + ["timid__add", "timid__hold"]
    add = next(t for t in tools if t["function"]["name"] == "calc__add")
    assert add["type"] == "function"
    assert add["function"]["description"] == "Add two integers."
    params = add["function"]["parameters"]
    assert params["type"] == "object" and set(params["required"]) == {"a", "b"}
    assert params["properties"]["a"]["type"] == "integer"


async def test_status(hub):
    status = {s["name"]: s for s in hub.status()}
    assert status["calc"]["state"] == "connected" and status["calc"]["transport"] == "stdio"
    assert status["calc"]["server_info"]["name"] == "calc"
    calc_tools = {t["tool"]: t for t in status["calc"]["tools"]}
    assert calc_tools["secret.read"] == {
        "name": "calc__secret_read",
        "tool": "secret.read",
        "allowed": False,
        "description": "A tool the tests keep off the allow-list.",
    }
    assert status["missing"]["state"] == "failed" and status["missing"]["error"] == hub.errors["missing"]
    assert status["off"]["state"] == "disabled"
    json.dumps(status)  # it goes straight into an HTTP response


async def test_call_passes_env_and_accepts_json_text(hub):
    result = await hub.call("calc__getenv", '{"name": "CALC_GREETING"}')
    assert (result.text, result.is_error, result.server, result.tool) == ("hello", False, "calc", "getenv")
    assert result.structured == {"result": "hello"}
    assert result.duration_s >= 0


async def test_non_text_content_is_described(hub):
    result = await hub.call("calc__picture", {})
    assert not result.is_error
    assert result.text.splitlines() == ["a tiny picture", "[image: image/png, 68 bytes]"]


async def test_tool_that_raises_is_an_error_result(hub):
    result = await hub.call("calc__boom", {"message": "it broke"})
    assert result.is_error and "boom" in result.text


async def test_denied_tool_is_an_error_result(hub):
    result = await hub.call("calc__secret_read", {})
    assert result.is_error
    assert "not allowed" in result.text and "the secret" not in result.text
    assert (result.server, result.tool) == ("calc", "secret.read")


async def test_unknown_tool_and_failed_server(hub):
    unknown = await hub.call("calc__nope", {})
    assert unknown.is_error and "unknown tool 'calc__nope'" in unknown.text and "calc__add" in unknown.text
    down = await hub.call("missing__anything", {})
    assert down.is_error and "'missing' is not available" in down.text


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"a": 1}, "'b' is a required property"),
        ({"a": "one", "b": 2}, "$.a: 'one' is not of type 'integer'"),
        ([1, 2], "must be a JSON object"),
        ("{not json", "not valid JSON"),
    ],
)
async def test_schema_invalid_arguments_are_error_results(hub, arguments, problem):
    result = await hub.call("calc__add", arguments)
    assert result.is_error and problem in result.text, result.text


async def test_timeout_is_an_error_result_and_the_session_survives(hub):
    result = await hub.call("timid__hold", {})  # nothing releases it: it never answers
    assert result.is_error and f"timed out after {SHORT_TIMEOUT:g}s" in result.text
    assert result.duration_s >= SHORT_TIMEOUT  # it waited out the timeout, no less
    assert "timid" not in hub.errors
    assert (await hub.call("timid__add", {"a": 1, "b": 1})).text == "2"


async def test_calls_run_concurrently(hub):
    held = await held_call(hub)  # the server is running it, and it answers only once released
    fast = await hub.call("calc__add", {"a": 20, "b": 22})
    assert fast.text == "42" and not held.done()
    assert (await hub.call("calc__release", {})).text == "released"
    assert (await held).text == "released"


async def test_audit_log_lines(hub, audit_path, caplog):
    caplog.set_level(logging.INFO, logger="mlxctl.mcp")
    before = audit_path.read_text().splitlines() if audit_path.exists() else []
    await hub.call("calc__add", {"a": 4, "b": 5})
    await hub.call("calc__secret_read", {"x": 1})
    lines = audit_path.read_text().splitlines()[len(before) :]
    records = [json.loads(line) for line in lines]
    assert [r["name"] for r in records] == ["calc__add", "calc__secret_read"]
    ok, denied = records
    assert set(ok) >= {"time", "server", "tool", "arguments", "is_error", "duration_s", "result_chars"}
    assert (ok["server"], ok["tool"], ok["arguments"], ok["is_error"], ok["result_chars"]) == (
        "calc",
        "add",
        {"a": 4, "b": 5},
        False,
        1,
    )
    assert ok["time"].endswith("Z") and ok["duration_s"] >= 0
    assert denied["is_error"] is True and denied["tool"] == "secret.read"
    logged = [
        r.getMessage() for r in caplog.records if r.name == "mlxctl.mcp" and "mcp call" in r.getMessage()
    ]
    assert len(logged) == 2 and json.loads(logged[0].split("mcp call ", 1)[1]) == ok


async def test_cancelled_call_is_audited_and_the_session_survives(hub, audit_path):
    task = await held_call(hub)  # in flight at the server, never released
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    last = json.loads(audit_path.read_text().splitlines()[-1])
    assert (last["name"], last["is_error"]) == ("calc__hold", True)
    assert (await hub.call("calc__add", {"a": 3, "b": 3})).text == "6"
