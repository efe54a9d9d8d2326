"""/api/chat and /api/generate with the official ollama client against a real server on SmolLM2."""

from __future__ import annotations

import httpx
import ollama
import openai
import pytest

from tests.server.infra import MODEL, openai_client, served

HI = [{"role": "user", "content": "Hi"}]
GREEDY = {"temperature": 0, "num_predict": 5}


@pytest.fixture(scope="module")
def url(engine):
    with served(engine) as base:
        yield base


@pytest.fixture(scope="module")
def client(url) -> ollama.Client:
    return ollama.Client(host=url)


@pytest.fixture(scope="module")
def whole(client):
    return client.chat(model=MODEL, messages=HI, options=GREEDY)


def test_chat_answers_with_counts_and_durations_in_nanoseconds(whole):
    assert whole.done and whole.done_reason == "length"
    assert whole.message.role == "assistant" and whole.message.content
    assert whole.eval_count == 5 and whole.prompt_eval_count > 0
    assert whole.total_duration >= whole.eval_duration > 0 and whole.prompt_eval_duration > 0
    assert whole.load_duration >= 0


def test_chat_streams_ndjson_by_default(url, whole):
    with httpx.stream("POST", f"{url}/api/chat", json={"model": MODEL, "messages": HI, "options": GREEDY},
                      timeout=60) as r:
        assert r.headers["content-type"].startswith("application/x-ndjson")
        lines = [ollama.ChatResponse.model_validate_json(line) for line in r.iter_lines()]
    assert all(not line.done for line in lines[:-1]) and lines[-1].done
    assert "".join(line.message.content for line in lines) == whole.message.content
    assert lines[-1].eval_count == 5 and lines[-1].done_reason == "length"


def test_chat_stream_through_the_client(client, whole):
    parts = list(client.chat(model=MODEL, messages=HI, options=GREEDY, stream=True))
    assert "".join(p.message.content for p in parts) == whole.message.content


def test_options_reach_the_sampler_as_the_openai_fields_do(url, whole):
    """Greedy with the same limit: the same text as /v1/chat/completions; num_predict is max_tokens."""
    same = openai_client(url).chat.completions.create(model=MODEL, messages=HI, temperature=0, max_tokens=5)
    assert same.choices[0].message.content == whole.message.content


def test_stop_option_ends_the_answer(client, whole):
    word = whole.message.content.split()[1]
    stopped = client.chat(model=MODEL, messages=HI, options={**GREEDY, "stop": [word]})
    assert stopped.done_reason == "stop" and word not in stopped.message.content
    assert whole.message.content.startswith(stopped.message.content)


def test_num_ctx_caps_prompt_and_output(client, whole):
    capped = client.chat(model=MODEL, messages=HI, options={"temperature": 0, "num_ctx": whole.prompt_eval_count + 2})
    assert capped.eval_count == 2 and capped.done_reason == "length"


def test_num_ctx_beyond_the_model_is_refused(client):
    with pytest.raises(ollama.ResponseError) as err:
        client.chat(model=MODEL, messages=HI, options={"num_ctx": 10**6})
    assert err.value.status_code == 400 and "options.num_ctx" in err.value.error


def test_latest_tag_names_the_served_model(client):
    assert client.chat(model=f"{MODEL}:latest", messages=HI, options={"num_predict": 1}).eval_count == 1


def test_empty_messages_load_the_model(client):
    loaded = client.chat(model=MODEL, messages=[])
    assert loaded.done and loaded.done_reason == "load"


def test_generate_is_a_user_turn(client, whole):
    out = client.generate(model=MODEL, prompt="Hi", options=GREEDY)
    assert out.response == whole.message.content and out.eval_count == 5


def test_generate_raw_sends_the_prompt_as_it_is(client):
    out = client.generate(model=MODEL, prompt="The sky is", raw=True, options={"temperature": 0, "num_predict": 3})
    assert out.prompt_eval_count == 3 and out.eval_count == 3  # no chat template around it


def test_generate_template_and_system(client):
    out = client.generate(model=MODEL, prompt="sky", system="The", template="{{ if .System }}{{ .System }} {{ end }}"
                          "{{ .Prompt }} is{{ .Response }}", options={"temperature": 0, "num_predict": 2})
    assert out.prompt_eval_count == 3


def test_generate_raw_with_system_is_refused(client):
    with pytest.raises(ollama.ResponseError) as err:
        client.generate(model=MODEL, prompt="x", system="y", raw=True)
    assert err.value.status_code == 400 and "system" in err.value.error


def test_generate_streams(client):
    parts = list(client.generate(model=MODEL, prompt="The sky is", raw=True, stream=True,
                                 options={"temperature": 0, "num_predict": 3}))
    assert parts[-1].done and parts[-1].eval_count == 3 and "".join(p.response for p in parts)


def test_openai_sdk_is_untouched(url):
    with pytest.raises(openai.NotFoundError):
        openai_client(url).chat.completions.create(model="nope", messages=HI)


def test_generate_template_with_another_action_is_refused(client):
    with pytest.raises(ollama.ResponseError) as err:
        client.generate(model=MODEL, prompt="x", template="{{ range .Messages }}{{ end }}")
    assert err.value.status_code == 400 and "template" in err.value.error
