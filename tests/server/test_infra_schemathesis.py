"""A bounded schemathesis run against /openapi.json: no endpoint answers 5xx.

Two runs over the live schema, each with both positive (schema-valid) and negative (malformed)
bodies:

* the cheap endpoints, POST /v1/messages/count_tokens among them (it tokenizes, never generates);
* the generation endpoints (chat, completions, messages, responses), without schemathesis's
  coverage phase (thousands of boundary cases for these schemas: minutes of generation) and with
  every example bounded before it is sent (``bounded``): a ``max_tokens`` / ``max_output_tokens``
  the server would accept (pydantic's lax ints take "3000" too) is cut to a couple of tokens, and
  set when absent or null (chat and responses default to "until the context is full"); ``n`` is
  cut to two choices; a string ``model`` becomes the served one, so that valid bodies reach the
  engine instead of stopping at 404 (unknown models: test_openai_errors.py, test_anthropic.py).
  Values the server refuses are left as generated: those must give a 4xx, never a 5xx.

Both runs are random (hypothesis, no fixed seed); each took 10-20 s on a shared 2-core machine.
"""

from __future__ import annotations

import httpx
import pydantic
import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from tests.server.infra import MODEL

CHEAP = r"^/(tokenize|detokenize|health|v1/models|v1/status|openapi\.json|v1/messages/count_tokens)$"
GENERATION = r"^/v1/(chat/completions|completions|messages|responses)$"
TOKEN_LIMITS = {"/v1/chat/completions": ("max_tokens", "max_completion_tokens"), "/v1/completions": ("max_tokens",),
                "/v1/messages": ("max_tokens",), "/v1/responses": ("max_output_tokens",)}
MAX_TOKENS, MAX_CHOICES = 2, 2


@pytest.fixture
def api_schema(base_url):
    return schemathesis.openapi.from_url(f"{base_url}/openapi.json")


@pytest.fixture
def generation_schema(base_url):
    """Without the coverage phase: its boundary cases run to thousands of requests for these
    large request schemas (minutes of generation); examples and fuzzing, bounded by
    max_examples, still send both valid and malformed bodies."""
    loaded = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    loaded.config.phases.update(phases=["examples", "fuzzing"])
    return loaded


cheap = schemathesis.pytest.from_fixture("api_schema").include(path_regex=CHEAP)
generating = schemathesis.pytest.from_fixture("generation_schema").include(path_regex=GENERATION)


def _count(value) -> int | None:
    """What the request models make of ``value`` as an int field (pydantic's lax mode also takes
    "3000", 3000.0 and true), or None where they refuse it."""
    try:
        return pydantic.TypeAdapter(int).validate_python(value)
    except pydantic.ValidationError:
        return None


def bounded(case) -> None:
    """Cut a generated body's cost to a few tokens, leaving values the server refuses as they are."""
    body = case.body
    if not isinstance(body, dict):
        return
    if isinstance(body.get("model"), str):
        body["model"] = MODEL
    limits = TOKEN_LIMITS.get(case.path, ())
    for name in limits:
        if (count := _count(body.get(name))) is not None and count > MAX_TOKENS:
            body[name] = MAX_TOKENS
    if limits and all(body.get(name) is None for name in limits):  # absent or null: no limit at all
        body[limits[0]] = MAX_TOKENS
    if (count := _count(body.get("n"))) is not None and count > MAX_CHOICES:
        body["n"] = MAX_CHOICES
        if _count(body.get("best_of")) is not None:
            body["best_of"] = MAX_CHOICES


@cheap.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors(case):
    bounded(case)
    case.call_and_validate(checks=[not_a_server_error])


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
@generating.parametrize()
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
def test_generation_endpoints_give_no_server_errors(case):
    bounded(case)
    case.call_and_validate(checks=[not_a_server_error], timeout=30)  # two tokens take about a second


def test_bounded_keeps_malformed_values_and_caps_valid_ones():
    class Case:
        path = "/v1/chat/completions"

    case = Case()
    case.body = {"model": "x", "max_tokens": 500, "n": 9, "messages": []}
    bounded(case)
    assert case.body == {"model": MODEL, "max_tokens": MAX_TOKENS, "n": MAX_CHOICES, "messages": []}
    case.body = {"model": "x", "max_tokens": "3000", "n": "9", "best_of": 9}  # what pydantic coerces is capped
    bounded(case)
    assert case.body == {"model": MODEL, "max_tokens": MAX_TOKENS, "n": MAX_CHOICES, "best_of": MAX_CHOICES}
    case.body = {"model": 3, "max_tokens": "many", "n": -1}
    bounded(case)
    assert case.body == {"model": 3, "max_tokens": "many", "n": -1}
    case.body = {"model": "x", "max_tokens": None, "max_completion_tokens": None}
    bounded(case)
    assert case.body == {"model": MODEL, "max_tokens": MAX_TOKENS, "max_completion_tokens": None}


@pytest.mark.parametrize("path", ["/v1/messages/count_tokens", "/v1/messages"])
def test_a_conversation_of_only_a_prefill_is_a_400(base_url, path):
    """Found by this fuzz run: the final assistant message is a prefill, so nothing was left to
    render and the chat template's ValueError came out as a 500."""
    body = {"model": MODEL, "messages": [{"role": "assistant", "content": ""}]}
    if path == "/v1/messages":
        body["max_tokens"] = 2
    r = httpx.post(f"{base_url}{path}", json=body, timeout=30)
    assert r.status_code == 400, r.text
    assert r.json()["type"] == "error" and r.json()["error"]["type"] == "invalid_request_error"
    assert "empty" in r.json()["error"]["message"]
