"""POST /v1/completions (the legacy endpoint) through the official `openai` client."""

import openai
import pytest

MODEL = "smollm2-135m"
PROMPT = "The capital of France is"


@pytest.fixture
def client(base_url):
    return openai.OpenAI(base_url=base_url + "/v1", api_key="x")


def complete(client, **kw):
    args = {"model": MODEL, "prompt": PROMPT, "temperature": 0, "max_tokens": 5, **kw}
    return client.completions.create(**args)


def test_completion(client):
    resp = complete(client)
    choice = resp.choices[0]
    assert resp.object == "text_completion" and resp.id.startswith("cmpl-")
    assert choice.text and choice.finish_reason == "length" and choice.logprobs is None
    assert resp.usage.completion_tokens == 5


def test_default_max_tokens_is_16(client):
    resp = client.completions.create(model=MODEL, prompt="Once upon a time", temperature=0)
    assert resp.usage.completion_tokens <= 16


def test_stream_equals_whole(client):
    whole = complete(client).choices[0]
    chunks = list(complete(client, stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == whole.text
    assert chunks[-2].choices[0].finish_reason == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 5


def test_echo(client):
    plain = complete(client).choices[0].text
    assert complete(client, echo=True).choices[0].text == PROMPT + plain
    chunks = list(complete(client, echo=True, stream=True))
    assert chunks[0].choices[0].text == PROMPT
    assert "".join(c.choices[0].text for c in chunks) == PROMPT + plain


def test_token_id_prompt(client, engine):
    ids = engine.model.tokenizer.encode(PROMPT)
    by_text = complete(client).choices[0].text
    assert complete(client, prompt=ids).choices[0].text == by_text
    assert complete(client, prompt=ids, echo=True).choices[0].text == PROMPT + by_text


def test_several_prompts(client):
    other = "Water is made of"
    resp = complete(client, prompt=[PROMPT, other], n=2, max_tokens=3)
    texts = [c.text for c in sorted(resp.choices, key=lambda c: c.index)]
    assert [c.index for c in resp.choices] == [0, 1, 2, 3]
    assert texts[0] == texts[1] == complete(client, max_tokens=3).choices[0].text
    assert texts[2] == texts[3] == complete(client, prompt=other, max_tokens=3).choices[0].text


def test_legacy_logprobs(client):
    resp = complete(client, logprobs=2)
    choice = resp.choices[0]
    lp = choice.logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 5
    assert "".join(lp.tokens) == choice.text
    assert lp.text_offset[0] == 0 and lp.text_offset[1] == len(lp.tokens[0])
    assert all(len(top) == 2 and max(top.values()) <= 0 for top in lp.top_logprobs)


def test_stop_on_completions(client):
    resp = complete(client, prompt="1, 2, 3, 4,", stop=[" 6"], max_tokens=10)
    assert resp.choices[0].finish_reason == "stop" and " 6" not in resp.choices[0].text
