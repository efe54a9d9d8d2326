"""Prompts are rendered and tokenized on the prompt threads (server/prompt_work.py), not on the
event loop, for every protocol; what they raise still reaches the client as its protocol's 4xx."""

from __future__ import annotations

import threading

import anthropic
import httpx
import openai
import pytest

import mlxctl.api.openai_translate as openai_translate
import mlxctl.api.prompt as prompt
from mlxctl.server.prompt_work import THREAD_NAME

MODEL = "smollm2-135m"


@pytest.fixture
def encoded_on(monkeypatch):
    """The names of the threads that tokenized a prompt (the real tokenizer still does it)."""
    names: list[str] = []

    def recording(real):
        def encode_text(*args, **kwargs):
            names.append(threading.current_thread().name)
            return real(*args, **kwargs)
        return encode_text

    monkeypatch.setattr(prompt, "encode_text", recording(prompt.encode_text))
    monkeypatch.setattr(openai_translate, "encode_text", recording(openai_translate.encode_text))
    return names


def on_prompt_threads(names: list[str]) -> bool:
    return bool(names) and all(n.startswith(THREAD_NAME) for n in names)


def test_openai_chat_and_completions(base_url, encoded_on):
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="x")
    client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
    assert on_prompt_threads(encoded_on), encoded_on
    encoded_on.clear()
    client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=2)
    assert on_prompt_threads(encoded_on), encoded_on


def test_anthropic_messages_and_responses(base_url, encoded_on):
    anthropic.Anthropic(base_url=base_url, api_key="x").messages.create(
        model=MODEL, max_tokens=2, messages=[{"role": "user", "content": "Hi"}])
    assert on_prompt_threads(encoded_on), encoded_on
    encoded_on.clear()
    openai.OpenAI(base_url=base_url + "/v1", api_key="x").responses.create(model=MODEL, input="Hi",
                                                                          max_output_tokens=2)
    assert on_prompt_threads(encoded_on), encoded_on


def test_ollama_chat_and_generate(base_url, encoded_on):
    r = httpx.post(f"{base_url}/api/chat", json={"model": MODEL, "stream": False, "options": {"num_predict": 2},
                                                 "messages": [{"role": "user", "content": "Hi"}]}, timeout=60)
    assert r.status_code == 200 and on_prompt_threads(encoded_on), (r.text, encoded_on)
    encoded_on.clear()
    r = httpx.post(f"{base_url}/api/generate", json={"model": MODEL, "stream": False, "prompt": "Hi",
                                                     "options": {"num_predict": 2}}, timeout=60)
    assert r.status_code == 200 and on_prompt_threads(encoded_on), (r.text, encoded_on)


def test_a_refused_request_is_still_a_400(base_url):
    """What preparing the prompt refuses is raised on a prompt thread and answered as before."""
    r = httpx.post(f"{base_url}/v1/chat/completions", json={
        "model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
        "response_format": {"type": "json_object"}, "structured_outputs": {"regex": "a+"}}, timeout=60)
    assert r.status_code == 400
    assert "response_format or structured_outputs" in r.json()["error"]["message"]


def test_mcp_rounds_whole_and_streamed(serve, tmp_path, encoded_on):
    """The rounds of a server-run tool loop (`serve --mcp-config`) are prepared there too."""
    pytest.importorskip("mcp")
    import json

    from tests.mcp.helpers import calc_stdio

    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"calc": calc_stdio(allow=["add"])}}))
    client = openai.OpenAI(base_url=serve(mcp_config=str(config)) + "/v1", api_key="x", timeout=300)
    ask = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "extra_body": {"mcp": True}}
    client.chat.completions.create(**ask)
    assert on_prompt_threads(encoded_on), encoded_on
    encoded_on.clear()
    list(client.chat.completions.create(**ask, stream=True))
    assert on_prompt_threads(encoded_on), encoded_on
