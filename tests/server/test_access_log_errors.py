"""The access log line of an error response carries the message (and param) the client got, in
the human and JSON log formats."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from mlxctl.server.access_log import MESSAGE_CHARS
from mlxctl.server.logs import formatter


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def of(self, path: str) -> logging.LogRecord:
        return next(r for r in self.records if r.http["path"] == path)


@pytest.fixture
def access():
    """The mlxctl.access records emitted during the test (logged before the response is sent)."""
    logger, handler = logging.getLogger("mlxctl.access"), Records()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_a_400_logs_its_message_and_param(base_url, access):
    r = httpx.post(f"{base_url}/v1/chat/completions", json={"model": "smollm2-135m", "messages": [],
                                                           "temperature": "hot"})
    assert r.status_code == 400
    sent = r.json()["error"]
    record = access.of("/v1/chat/completions")
    assert record.http["status"] == 400 and record.http["error"] == sent["message"]
    assert record.http["param"] == sent["param"] and sent["param"]
    human = formatter("human").format(record)
    assert human.endswith(f" 400 - {sent['message']} (param: {sent['param']})")
    line = json.loads(formatter("json").format(record))
    assert line["error"] == sent["message"] and line["param"] == sent["param"] and line["status"] == 400


def test_a_long_message_is_cut_and_a_success_carries_none(base_url, access):
    long_name = "m" * 2000
    r = httpx.post(f"{base_url}/v1/chat/completions", json={"model": long_name, "messages": [{"role": "user",
                                                                                              "content": "hi"}]})
    assert r.status_code == 404 and long_name in r.json()["error"]["message"]
    logged = access.of("/v1/chat/completions").http["error"]
    assert logged.startswith("model '" + "m" * 100) and len(logged) < MESSAGE_CHARS + 30
    assert httpx.get(f"{base_url}/v1/models").status_code == 200
    ok = access.of("/v1/models")
    assert "error" not in ok.http and formatter("human").format(ok).endswith(" 200")


def test_anthropic_errors_log_the_anthropic_message(base_url, access):
    r = httpx.post(f"{base_url}/v1/messages", json={"model": "smollm2-135m", "messages": []})
    assert r.status_code == 400
    assert access.of("/v1/messages").http["error"] == r.json()["error"]["message"]
