"""`mlxctl run --mcp-config`: the MCP tool loop in process, over the real SmolLM2 and the calc server."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cli.helpers import REPO, clean_env, run_cli
from tests.mcp.helpers import calc_stdio

pytest.importorskip("mcp")

QUESTION = "What is 2 + 3? Use the calculator."


def run_mlxctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mlxctl", "run", *args], check=False, cwd=REPO, env=clean_env(),
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def calc_config(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"calc": calc_stdio(allow=["add", "boom"])}}))
    return path


@pytest.mark.slow  # a long end-to-end run: the slow step
def test_forced_call_runs_and_is_reported(smollm2, calc_config, tmp_path):
    audit = tmp_path / "audit.jsonl"
    result = run_mlxctl("-m", str(smollm2.path), "--mcp-config", str(calc_config), "--mcp-audit-log", str(audit),
                        "--tool-choice", "calc__add", "-v", "--json", "-n", "48", QUESTION)
    assert result.returncode == 0, result.stderr
    assert "mcp: 2 tool(s): calc__add, calc__boom" in result.stderr  # -v lists the tools
    doc = json.loads(result.stdout)
    (call, *_) = doc["mcp_calls"]
    args = json.loads(call["arguments"])
    assert call["name"] == "calc__add" and call["is_error"] is False and call["result"] == str(args["a"] + args["b"])
    assert f"mcp: calc__add {json.dumps(args)} -> {call['result']}" in result.stderr  # each call on stderr
    assert doc["mcp_rounds"] >= 2 and doc["finish_reason"] in ("stop", "length")
    assert doc["usage"]["completion_tokens"] > 0
    assert json.loads(audit.read_text().splitlines()[0])["name"] == "calc__add"


def test_a_bad_config_exits_4_in_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"mcpServers": {"calc": {"command": "x", "url": "http://y"}}}')
    result = run_cli("run", "--mcp-config", str(bad), "hello")
    assert result.returncode == 4
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "has both 'command' and 'url'" in lines[0], result.stderr


def test_mcp_flags_need_a_config():
    result = run_cli("run", "--tool-choice", "calc__add", "hello")
    assert result.returncode == 4 and "--tool-choice needs --mcp-config" in result.stderr


def test_raw_prompts_cannot_use_tools(calc_config):
    result = run_cli("run", "--mcp-config", str(calc_config), "--raw", "hello")
    assert result.returncode == 4 and "chat template" in result.stderr
