"""scripts/framework_checks.py against a real server, with the official SDKs this environment has
(the agent frameworks live in a venv of their own: here they are "not installed" rows)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


def checks_module():
    spec = importlib.util.spec_from_file_location("framework_checks", ROOT / "scripts" / "framework_checks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its pydantic models resolve their annotations through it
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # 14 s end to end: the slow step (default step over 15 min)
def test_forced_calls_over_refs_pass_on_both_sdks(base_url, capsys):
    # the calls are sampled (the SDKs' default temperature): before forced calls closed their objects
    # (schema_relax), 15 in 40 Anthropic ones invented members until max_tokens cut them
    httpx.delete(f"{base_url}/v1/cache").raise_for_status()
    code = checks_module().main(["--url", base_url, "--only", "openai,anthropic", "--check", "tool forced",
                                 "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0, rows
    assert {(r["framework"], r["check"]) for r in rows} == {
        ("openai", "tool forced ($defs+Enum)"), ("openai", "responses tool forced ($defs+Enum)"),
        ("anthropic", "tool forced ($defs+Enum)")}
    assert all(r["result"] == "pass" and r["version"] for r in rows), rows


def test_a_framework_not_installed_is_one_skip_row(capsys):
    module = checks_module()
    module.CHECKS[:] = [("no-such-framework-dist", "a", None), ("no-such-framework-dist", "b", None)]
    code = module.main(["--url", "http://127.0.0.1:9", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0 and rows == [{"framework": "no-such-framework-dist", "version": None, "check": "*",
                                   "result": "skip", "reason": "not installed"}]


def test_an_unknown_only_name_is_an_error(capsys):
    assert checks_module().main(["--url", "http://127.0.0.1:9", "--only", "openia"]) == 2
    assert "openia" in capsys.readouterr().err
