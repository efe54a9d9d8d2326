"""The sampling fields of /v1/chat/completions reach the sampler over HTTP.

Each field is shown to act by what it does to a real generation, not by its echo: a filter that
keeps a single candidate (``top_p`` near 0, ``top_k`` 1, ``min_p`` 1) turns a seeded sample at
temperature 1 into the greedy output; a penalty changes a greedy output that repeats tokens, where
and in the direction its definition says. Everything is compared with this server's own greedy and seeded outputs (greedy
text may differ between BLAS builds). Out-of-range values are a 400 that names the field.
"""

from __future__ import annotations

from collections import Counter

import httpx
import openai
import pytest

from mlxctl.server.app import init_app
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings
from tests.server.infra import MODEL

PROMPT = "List twenty random words."  # SmolLM2's greedy reply repeats tokens ("A-B-A-A-A-")
SEED, TOKENS = 1, 24
EXTENSIONS = ("top_k", "min_p", "repetition_penalty")  # vLLM's fields: not arguments of the SDK


@pytest.fixture(scope="module")
def url(engine):
    server = BackgroundServer(init_app(engine, ServeSettings(model_name=MODEL))).start()
    yield server.url
    server.stop()


@pytest.fixture(scope="module")
def client(url) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)


def chat(client, stream: bool = False, **fields) -> tuple[str, list[str]]:
    """(text, tokens) of one reply to PROMPT."""
    extra = {k: fields.pop(k) for k in EXTENSIONS if k in fields}
    args = {"model": MODEL, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": TOKENS,
            "logprobs": True, "extra_body": extra or None, **fields}
    if stream:
        chunks = list(client.chat.completions.create(stream=True, **args))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        tokens = [t.token for c in chunks if c.choices and c.choices[0].logprobs for t in c.choices[0].logprobs.content]
        return text, tokens
    choice = client.chat.completions.create(**args).choices[0]
    return choice.message.content, [t.token for t in choice.logprobs.content]


def most_repeats(tokens: list[str]) -> int:
    return Counter(tokens).most_common(1)[0][1]


@pytest.fixture(scope="module")
def greedy(client) -> tuple[str, list[str]]:
    return chat(client, temperature=0)


@pytest.fixture(scope="module")
def sampled(client, greedy) -> str:
    text, _ = chat(client, temperature=1.0, seed=SEED)
    assert text != greedy[0], "the seeded sample should stray from greedy, or the filter tests prove nothing"
    return text


@pytest.mark.parametrize("one_candidate", [{"top_p": 1e-9}, {"top_k": 1}, {"min_p": 1.0}])
def test_a_filter_keeping_one_candidate_gives_the_greedy_output(client, greedy, sampled, one_candidate):
    text, _ = chat(client, temperature=1.0, seed=SEED, **one_candidate)
    assert text == greedy[0]


def test_filters_reach_the_sampler_when_streaming_too(client, greedy, sampled):
    text, tokens = chat(client, stream=True, temperature=1.0, seed=SEED, top_k=1)
    assert text == greedy[0] and len(tokens) == len(greedy[1])


def test_filters_that_keep_everything_leave_the_seeded_sample_alone(client, sampled):
    """top_k -1 and 0 mean "off" (vLLM), as do top_p 1 and min_p 0."""
    text, _ = chat(client, temperature=1.0, seed=SEED, top_k=-1, top_p=1.0, min_p=0.0)
    assert text == sampled


def first_repeat(tokens: list[str]) -> int:
    """The index of the first token that already came earlier in ``tokens``."""
    return next((i for i, t in enumerate(tokens) if t in tokens[:i]), len(tokens))


def first_difference(a: list[str], b: list[str]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


@pytest.mark.parametrize("penalty", [{"frequency_penalty": 2.0}, {"presence_penalty": 2.0}])
def test_an_additive_penalty_acts_from_the_first_repeated_token(client, greedy, penalty):
    """OpenAI's penalties count generated tokens only, and only lower the logits of tokens seen:
    the greedy reply is kept until it would repeat a token, and changed after that."""
    text, tokens = chat(client, temperature=0, **penalty)
    repeat = first_repeat(greedy[1])
    assert repeat < len(greedy[1]), f"the greedy reply should repeat a token: {greedy[0]!r}"
    assert text != greedy[0]
    assert first_difference(tokens, greedy[1]) >= repeat


def test_repetition_penalty_and_a_negative_frequency_penalty_pull_opposite_ways(client, greedy):
    def repeated(tokens: list[str]) -> int:
        return len(tokens) - len(set(tokens))

    assert repeated(greedy[1]) >= 3, f"the greedy reply should repeat tokens: {greedy[0]!r}"
    fewer = chat(client, temperature=0, repetition_penalty=2.0)[1]
    more = chat(client, temperature=0, frequency_penalty=-2.0)[1]
    assert repeated(fewer) < repeated(greedy[1]) < repeated(more)


def test_a_zero_penalty_is_greedy(client, greedy):
    text, _ = chat(client, temperature=0, frequency_penalty=0.0, presence_penalty=0.0, repetition_penalty=1.0)
    assert text == greedy[0]


@pytest.mark.slow  # a long end-to-end run: the slow step
def test_completions_take_the_same_fields(client):
    def complete(**fields) -> str:
        extra = {k: fields.pop(k) for k in EXTENSIONS if k in fields}
        return client.completions.create(model=MODEL, prompt="A list of random words: apple,", max_tokens=TOKENS,
                                         extra_body=extra or None, **fields).choices[0].text

    greedy = complete(temperature=0)
    assert complete(temperature=1.0, seed=SEED) != greedy
    assert complete(temperature=1.0, seed=SEED, top_k=1) == greedy


@pytest.mark.parametrize("field, value", [
    ("top_p", 2), ("top_p", 0), ("top_p", "high"),
    ("top_k", -2), ("top_k", 1.5),
    ("min_p", 1.5), ("min_p", -0.1),
    ("presence_penalty", 2.5), ("frequency_penalty", -2.5),
    ("repetition_penalty", 0), ("repetition_penalty", 2.5),
    ("temperature", 2.5),
])
def test_out_of_range_values_are_a_400_naming_the_field(url, field, value):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, field: value}
    r = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == field and field in error["message"]
    assert error["type"] == "invalid_request_error"
