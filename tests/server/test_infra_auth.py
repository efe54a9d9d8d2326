"""--api-key: both header styles, protocol-shaped 401s, and the open health endpoints."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.server.infra import raw_exchange

KEY = "sk-test-123"


@pytest.fixture
def url(serve):
    return serve(api_key=KEY)


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"x-api-key": "wrong"},
                                     {"Authorization": KEY}], ids=["missing", "bad-bearer", "bad-x-api-key", "no-scheme"])
def test_missing_or_bad_key_is_an_openai_shaped_401(url, headers):
    r = httpx.get(f"{url}/v1/models", headers=headers)
    assert r.status_code == 401
    assert r.json()["error"]["type"] == "authentication_error"


def test_anthropic_paths_get_an_anthropic_shaped_401(url):
    r = httpx.post(f"{url}/v1/messages", json={})
    assert r.status_code == 401
    assert r.json() == {"type": "error", "error": {"type": "authentication_error", "message": r.json()["error"]["message"]}}


@pytest.mark.parametrize("headers", [{"Authorization": f"Bearer {KEY}"}, {"x-api-key": KEY}], ids=["bearer", "x-api-key"])
def test_good_key_passes(url, headers):
    assert httpx.get(f"{url}/v1/models", headers=headers).status_code == 200


def test_health_and_metrics_are_open_by_default(url):
    assert httpx.get(f"{url}/health").status_code == 200
    assert httpx.get(f"{url}/metrics").status_code == 200


def test_auth_health_closes_them(serve):
    url = serve(api_key=KEY, auth_health=True)
    assert httpx.get(f"{url}/health").status_code == 401
    assert httpx.get(f"{url}/metrics").status_code == 401
    assert httpx.get(f"{url}/health", headers={"x-api-key": KEY}).status_code == 200


def test_no_key_configured_means_open(base_url):
    assert httpx.get(f"{base_url}/v1/models").status_code == 200


NOT_UTF8 = [b"x-api-key: \xff\xfe" + KEY.encode(), b"Authorization: Bearer \xc3\x28" + KEY.encode()]


def key_request(path: str, header: bytes) -> bytes:
    """A POST with ``header`` as raw bytes (HTTP clients refuse to send header bytes like these)."""
    return (f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n".encode() + header
            + b"\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")


@pytest.mark.parametrize("header", NOT_UTF8, ids=["x-api-key", "bearer"])
def test_non_utf8_key_bytes_are_an_openai_shaped_401(url, header):
    status, body = raw_exchange(url, key_request("/v1/chat/completions", header))
    assert status == 401
    error = json.loads(body)["error"]
    assert error["type"] == "authentication_error" and error["code"] == "invalid_api_key"
    assert "invalid or missing API key" in error["message"]


@pytest.mark.parametrize("header", NOT_UTF8, ids=["x-api-key", "bearer"])
def test_non_utf8_key_bytes_are_an_anthropic_shaped_401(url, header):
    status, body = raw_exchange(url, key_request("/v1/messages", header))
    assert status == 401
    data = json.loads(body)
    assert data["type"] == "error" and data["error"]["type"] == "authentication_error"
    assert "invalid or missing API key" in data["error"]["message"]


def test_a_non_ascii_key_matches_its_utf8_bytes(serve):
    url = serve(api_key="clé-ü")
    status, _ = raw_exchange(url, key_request("/v1/messages/count_tokens", "x-api-key: clé-ü".encode()))
    assert status != 401
    status, _ = raw_exchange(url, key_request("/v1/messages/count_tokens", "x-api-key: clé-ü".encode("latin-1")))
    assert status == 401
