"""--api-key: both header styles, protocol-shaped 401s, and the open health endpoints."""

from __future__ import annotations

import httpx
import pytest

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
