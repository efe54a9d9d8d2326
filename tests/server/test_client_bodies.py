"""Request bodies real agent clients sent (tests/server/client_bodies/), replayed against the real
SmolLM2 server: what the client's default configuration sends must be answered, not refused."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.server.infra import served

BODIES = Path(__file__).parent / "client_bodies"
MODEL = "smollm2-135m"


@pytest.fixture(scope="module")
def url(engine):
    with served(engine) as base:
        yield base


def replayed(name: str, **changes) -> dict:
    """The body as the client sent it, but for the model it named and ``changes``."""
    return {**json.loads((BODIES / name).read_text()), "model": MODEL, **changes}


@pytest.mark.slow  # its tools alone are thousands of tokens of prompt, on a CPU
def test_codex_default_request_is_answered_with_its_tools_flattened(url):
    """Its tools as sent (namespaces, web_search) with a short input: the whole conversation is
    longer than SmolLM2's 8192-token context."""
    say_hi = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "say hi"}]}]
    body = replayed("codex-0.171.0-exec-default.json", stream=False, max_output_tokens=4, input=say_hi)
    response = httpx.post(f"{url}/v1/responses", json=body, timeout=600)
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["status"] in ("completed", "incomplete")
    assert out["tools_not_offered"] == ["web_search"]  # hosted: accepted, not offered, said so
    assert [t["type"] for t in out["tools"]] == [t["type"] for t in body["tools"]]  # echoed as sent
