"""Bad OpenAI requests: every refusal is a 4xx in OpenAI's error shape, naming what is wrong."""

import httpx
import openai
import pytest

MODEL = "smollm2-135m"
MESSAGES = [{"role": "user", "content": "Hi"}]


@pytest.fixture
def client(base_url):
    return openai.OpenAI(base_url=base_url + "/v1", api_key="x", max_retries=0)


def chat_error(client, **kw):
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(**{"model": MODEL, "messages": MESSAGES, "max_tokens": 2, **kw})
    return info.value


def test_unknown_field_is_named(client):
    err = chat_error(client, extra_body={"frobnicate": 1})
    assert isinstance(err, openai.BadRequestError) and err.param == "frobnicate"


def test_wrong_type(client):
    err = chat_error(client, temperature="hot")
    assert isinstance(err, openai.BadRequestError) and err.param == "temperature"


@pytest.mark.parametrize("field, value", [
    ("max_tokens", "3000"), ("max_tokens", True), ("max_tokens", 3.5), ("temperature", "1"), ("n", "2"),
    ("stream", "yes"), ("seed", 1.5),
])
def test_a_value_of_the_wrong_json_type_is_not_coerced(base_url, field, value):
    body = {"model": MODEL, "messages": MESSAGES, "max_tokens": 2, field: value}
    r = httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["param"] == field, r.text
    ok = httpx.post(f"{base_url}/v1/chat/completions", timeout=60,
                    json={"model": MODEL, "messages": MESSAGES, "max_tokens": 2, "temperature": 0})  # int for a number
    assert ok.status_code == 200, ok.text


@pytest.mark.parametrize("field, value", [
    ("modalities", ["text", "audio"]),
    ("audio", {"voice": "alloy", "format": "wav"}),
    ("prediction", {"type": "content", "content": "x"}),
])
def test_unsupported_features_are_refused(client, field, value):
    err = chat_error(client, **{field: value})
    assert isinstance(err, openai.BadRequestError) and err.param == field


def test_unknown_model(client):
    err = chat_error(client, model="gpt-9")
    assert isinstance(err, openai.NotFoundError) and err.code == "model_not_found" and err.param == "model"


def test_malformed_json(base_url):
    headers = {"content-type": "application/json"}
    r = httpx.post(f"{base_url}/v1/chat/completions", content=b'{"model": ', headers=headers)
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error" and "JSON" in error["message"]
    assert set(error) == {"message", "type", "param", "code"}


@pytest.mark.parametrize("kw, param", [
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     "messages.0.content"),
    ({"messages": [{"role": "function", "content": "x"}]}, "messages.0.role"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "messages.0"),
    ({"logit_bias": {"not-a-token": 5}}, "logit_bias"),
    ({"top_logprobs": 21, "logprobs": True}, "top_logprobs"),
    ({"n": 0}, "n"),
    ({"stream_options": {"include_usage": True}}, "stream_options"),
])
def test_bad_fields(client, kw, param):
    err = chat_error(client, **kw)
    assert isinstance(err, openai.BadRequestError) and err.param == param


@pytest.mark.parametrize("kw, words", [
    ({"logit_bias": {"99999999": 5}}, "logit_bias"),
    ({"top_logprobs": 2}, "top_logprobs"),
    ({"stop": [""]}, "stop"),
])
def test_bad_values_named_in_the_message(client, kw, words):
    err = chat_error(client, **kw)
    assert isinstance(err, openai.BadRequestError) and words in err.message


def test_prompt_over_the_context_is_refused(client):
    err = chat_error(client, messages=[{"role": "user", "content": "hi " * 9000}])
    assert isinstance(err, openai.BadRequestError) and "context" in err.message


def test_completions_errors(client):
    with pytest.raises(openai.BadRequestError, match="context"):
        client.completions.create(model=MODEL, prompt=[1] * 9000, max_tokens=2)
    with pytest.raises(openai.BadRequestError, match="out of range"):
        client.completions.create(model=MODEL, prompt=[10**7], max_tokens=2)
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model=MODEL, prompt="x", suffix="y", max_tokens=2)
    assert info.value.param == "suffix"
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="nope", prompt="x", max_tokens=2)


@pytest.mark.parametrize("prompt", ["", []])
def test_an_empty_completions_prompt_names_the_field(base_url, prompt):
    r = httpx.post(f"{base_url}/v1/completions", json={"model": MODEL, "prompt": prompt, "max_tokens": 2}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["param"] == "prompt", r.text
