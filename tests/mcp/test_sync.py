"""McpHubThread: the blocking hub the CLI uses, on its own event loop thread."""

from __future__ import annotations

import json
import threading

import pytest

from mlxctl.errors import BadInputError
from mlxctl.mcp import McpHubThread
from tests.mcp.helpers import BACKSTOP_S, CALC_ALLOW, calc_stdio

pytestmark = pytest.mark.timeout(3 * BACKSTOP_S)


def test_config_errors_surface_before_any_thread(tmp_path):
    with pytest.raises(BadInputError, match="not found"):
        McpHubThread(tmp_path / "missing.json")


def test_blocking_hub_from_a_config_file(tmp_path):
    path = tmp_path / "mcp.json"
    allow = [*CALC_ALLOW, "crash"]
    path.write_text(json.dumps({"mcpServers": {"calc": calc_stdio(allow=allow, timeout=BACKSTOP_S)}}))
    audit = tmp_path / "audit.jsonl"
    threads_before = set(threading.enumerate())
    with McpHubThread(path, connect_timeout=BACKSTOP_S, audit_log=audit) as hub:
        assert hub.errors == {}
        assert [t["function"]["name"] for t in hub.tools()] == [f"calc__{name}" for name in allow]
        result = hub.call("calc__add", {"a": 2, "b": 2})
        assert (result.text, result.is_error) == ("4", False)
        assert hub.call("calc__add", {"a": 2}).is_error
        assert hub.status()[0]["state"] == "connected"

        # The server dies mid-call: an error result, and the hub reports the lost connection.
        crashed = hub.call("calc__crash", {})
        assert crashed.is_error and "failed" in crashed.text
        assert "connection lost" in hub.errors["calc"]
        assert hub.tools() == []
        after = hub.call("calc__add", {"a": 1, "b": 1})
        assert after.is_error and "not available" in after.text
    assert len(audit.read_text().splitlines()) == 4
    leftover = [t for t in threading.enumerate() if t not in threads_before and t.name == "mlxctl-mcp"]
    assert leftover == []
