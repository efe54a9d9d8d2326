"""POST /tokenize and /detokenize."""

from __future__ import annotations

import httpx


def test_round_trip(base_url):
    r = httpx.post(f"{base_url}/tokenize", json={"prompt": "Hello, world!"})
    assert r.status_code == 200
    body = r.json()
    assert body["count"] == len(body["tokens"]) > 0
    back = httpx.post(f"{base_url}/detokenize", json={"tokens": body["tokens"]}).json()
    assert back["prompt"].endswith("Hello, world!")


def test_messages_use_the_chat_template(base_url):
    plain = httpx.post(f"{base_url}/tokenize", json={"prompt": "hi"}).json()
    chat = httpx.post(f"{base_url}/tokenize", json={"messages": [{"role": "user", "content": "hi"}]}).json()
    assert chat["count"] > plain["count"]
    text = httpx.post(f"{base_url}/detokenize", json={"tokens": chat["tokens"]}).json()["prompt"]
    assert "hi" in text


def test_add_special_tokens_option(base_url):
    with_special = httpx.post(f"{base_url}/tokenize", json={"prompt": "hi", "add_special_tokens": True}).json()
    without = httpx.post(f"{base_url}/tokenize", json={"prompt": "hi", "add_special_tokens": False}).json()
    assert without["count"] <= with_special["count"]


def test_bad_token_ids_are_400(base_url):
    for tokens in ([10**9], [-1]):
        r = httpx.post(f"{base_url}/detokenize", json={"tokens": tokens})
        assert r.status_code == 400
        assert r.json()["error"]["param"] == "tokens"


def test_bad_tokenize_bodies_are_400(base_url):
    for body in ({}, {"prompt": "a", "messages": []}, {"prompt": "a", "bogus": 1}):
        r = httpx.post(f"{base_url}/tokenize", json=body)
        assert r.status_code == 400, body
