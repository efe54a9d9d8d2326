"""Golden transcripts of what each API sends for a scripted generation, streamed and not.

Pins today's output of /v1/chat/completions, /v1/messages, /v1/responses and /v1/completions
byte for byte (after tests/server/golden_io.py's id and timestamp substitution), so that a
refactor of the output builders and views shows every change as a diff. A real ``init_app``
server on loopback over a scripted engine (tests/server/scripted_engine.py), read with httpx
as raw bytes. One file per API x scenario x mode under tests/server/golden/; after a deliberate
change, ``MLXCTL_REGEN_GOLDEN=1`` rewrites them (docs/development.md).
"""

from __future__ import annotations

import dataclasses
import json

import httpx
import pytest

from mlxctl.server.app import init_app
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings
from tests.server.golden_io import check_golden, normalise
from tests.server.golden_scenarios import (
    API_REQUESTS, COMPLETION_ONLY, COMPLETION_SCENARIOS, MODEL, SCENARIOS, completion_request, scripts,
)
from tests.server.scripted_engine import ScriptedEngine

MODES = {"stream": True, "whole": False}


@pytest.fixture(scope="module")
def servers():
    """{"think": url, "plain": url}: the same scripted engine with and without a reasoning parser."""
    engine, base = ScriptedEngine(scripts()), ServeSettings(model_name=MODEL, tool_call_parser="hermes")
    running = {kind: BackgroundServer(init_app(engine, dataclasses.replace(base, reasoning_parser=parser))).start()
               for kind, parser in (("think", "think"), ("plain", "none"))}
    yield {kind: server.url for kind, server in running.items()}
    for server in running.values():
        server.stop()


def transcript(url: str, path: str, body: dict) -> str:
    """The request, the status and Content-Type, and the response body exactly as sent."""
    with httpx.Client(base_url=url, timeout=60) as client, client.stream("POST", path, json=body) as r:
        raw = b"".join(r.iter_raw())
    head = f"POST {path}\n{json.dumps(body, ensure_ascii=False)}\n\nHTTP {r.status_code} {r.headers['content-type']}\n"
    return normalise(head + raw.decode())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("api", API_REQUESTS)
def test_chat_like_golden(servers, api, scenario, mode):
    path, request = API_REQUESTS[api]
    s = SCENARIOS[scenario]
    url = servers["think" if s.think else "plain"]
    check_golden(f"{api}/{scenario}.{mode}.txt", transcript(url, path, request(scenario, s, MODES[mode])))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scenario", COMPLETION_SCENARIOS)
def test_completions_golden(servers, scenario, mode):
    s = (SCENARIOS | COMPLETION_ONLY)[scenario]
    body = completion_request(scenario, s, MODES[mode])
    check_golden(f"completions/{scenario}.{mode}.txt", transcript(servers["plain"], "/v1/completions", body))
