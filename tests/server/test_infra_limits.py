"""Rate limit, body size, CORS and admission: each refusal in the protocol's shape."""

from __future__ import annotations

import httpx

from tests.server.infra import chat_body, require_chat


def test_rate_limit_gives_429_with_retry_after(serve):
    url = serve(rate_limit_per_minute=3)
    codes = [httpx.get(f"{url}/v1/models").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    r = httpx.get(f"{url}/v1/models")
    assert r.status_code == 429
    assert int(r.headers["Retry-After"]) >= 1
    assert r.json()["error"]["type"] == "rate_limit_error"
    assert httpx.get(f"{url}/health").status_code == 200  # exempt


def test_oversized_body_is_a_protocol_shaped_413(serve):
    url = serve(max_body_bytes=1024)
    big = {"prompt": "x" * 4096}
    r = httpx.post(f"{url}/tokenize", json=big)
    assert r.status_code == 413
    assert r.json()["error"]["type"] == "invalid_request_error"
    r = httpx.post(f"{url}/v1/messages", json=big)
    assert r.status_code == 413
    assert r.json()["error"]["type"] == "request_too_large"


def test_oversized_chunked_body_is_413_too(serve):
    url = serve(max_body_bytes=1024)
    r = httpx.post(f"{url}/tokenize", content=iter([b'{"prompt": "', b"x" * 4096, b'"}']),
                   headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    assert "error" in r.json()


PREFLIGHT = {"Origin": "http://app.example", "Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers": "authorization, content-type"}


def test_cors_is_off_by_default(base_url):
    r = httpx.options(f"{base_url}/v1/chat/completions", headers=PREFLIGHT)
    assert "Access-Control-Allow-Origin" not in r.headers
    r = httpx.get(f"{base_url}/v1/models", headers={"Origin": "http://app.example"})
    assert "Access-Control-Allow-Origin" not in r.headers


def test_cors_preflight_and_headers_when_enabled(serve):
    url = serve(cors_origins=("http://app.example",), api_key="k")
    r = httpx.options(f"{url}/v1/chat/completions", headers=PREFLIGHT)
    assert r.status_code == 204
    assert r.headers["Access-Control-Allow-Origin"] == "http://app.example"
    assert "POST" in r.headers["Access-Control-Allow-Methods"]
    assert "authorization" in r.headers["Access-Control-Allow-Headers"]
    r = httpx.get(f"{url}/v1/models", headers={"Origin": "http://app.example"})
    assert r.status_code == 401 and r.headers["Access-Control-Allow-Origin"] == "http://app.example"
    r = httpx.options(f"{url}/v1/models", headers={**PREFLIGHT, "Origin": "http://evil.example"})
    assert r.status_code == 403 and "Access-Control-Allow-Origin" not in r.headers


def test_full_admission_queue_gives_503(serve):
    url = serve(max_waiting=0)
    require_chat(url)
    r = httpx.post(f"{url}/v1/chat/completions", json=chat_body(), timeout=60)
    assert r.status_code == 503
    assert r.headers["Retry-After"] == "1"
    assert r.json()["error"]["type"] == "server_error"
