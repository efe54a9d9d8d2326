"""POST /v1/chat/completions through the official `openai` client, against the real model."""

import openai
import pytest

MODEL = "smollm2-135m"
PARIS = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture
def client(base_url):
    return openai.OpenAI(base_url=base_url + "/v1", api_key="x")


def chat(client, **kw):
    args = {"model": MODEL, "messages": PARIS, "temperature": 0, "max_tokens": 12, **kw}
    return client.chat.completions.create(**args)


def streamed_text(chunks):
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def test_answers_paris(client):
    resp = chat(client)
    choice = resp.choices[0]
    assert "Paris" in choice.message.content
    assert choice.message.role == "assistant" and choice.finish_reason in ("stop", "length")
    assert resp.object == "chat.completion" and resp.model == MODEL and resp.id.startswith("chatcmpl-")
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens
    # reuse depends on what the session's shared server ran before (a short prompt reuses the
    # chat template's system prompt): reported, and never the prompt's last token
    assert 0 <= resp.usage.prompt_tokens_details.cached_tokens < resp.usage.prompt_tokens


def test_stream_equals_whole(client):
    whole = chat(client).choices[0]
    chunks = list(chat(client, stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert streamed_text(chunks) == whole.message.content
    assert chunks[-1].choices[0].finish_reason == whole.finish_reason
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1])
    assert len({c.id for c in chunks}) == 1


def test_include_usage(client):
    chunks = list(chat(client, stream=True, stream_options={"include_usage": True}, max_tokens=5))
    last = chunks[-1]
    assert last.choices == [] and last.usage.completion_tokens == 5
    assert 0 <= last.usage.prompt_tokens_details.cached_tokens < last.usage.prompt_tokens
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-2].choices[0].finish_reason == "length"


def test_two_greedy_choices_are_identical(client):
    resp = chat(client, n=2, max_tokens=6)
    one = chat(client, max_tokens=6)
    assert [c.index for c in resp.choices] == [0, 1]
    assert resp.choices[0].message.content == resp.choices[1].message.content == one.choices[0].message.content
    assert resp.usage.prompt_tokens == one.usage.prompt_tokens  # the prompt is counted once
    assert resp.usage.completion_tokens == 2 * one.usage.completion_tokens


def test_n_streamed_with_a_seed_repeats(client):
    def run():
        chunks = list(chat(client, n=2, stream=True, temperature=1.0, seed=7, max_tokens=6))
        by_choice = {0: "", 1: ""}
        for c in chunks:
            for ch in c.choices:
                by_choice[ch.index] += ch.delta.content or ""
        finished = [ch.index for c in chunks for ch in c.choices if ch.finish_reason]
        return by_choice, sorted(finished)

    first = run()
    assert first == run()
    assert first[1] == [0, 1]


def test_stop_string(client):
    resp = chat(client, stop=["Paris"], max_tokens=20)
    choice = resp.choices[0]
    assert choice.finish_reason == "stop"
    assert "Paris" not in choice.message.content and choice.message.content


def test_max_tokens_gives_length(client):
    for field in ("max_tokens", "max_completion_tokens"):
        resp = client.chat.completions.create(model=MODEL, messages=PARIS, temperature=0, **{field: 3})
        assert resp.choices[0].finish_reason == "length"
        assert resp.usage.completion_tokens == 3


def test_logprobs_shape(client):
    resp = chat(client, logprobs=True, top_logprobs=3, max_tokens=5)
    content = resp.choices[0].logprobs.content
    assert len(content) == resp.usage.completion_tokens == 5
    assert "".join(t.token for t in content) == resp.choices[0].message.content
    for entry in content:
        assert entry.logprob <= 0 and bytes(entry.bytes).decode() == entry.token
        assert len(entry.top_logprobs) == 3
        assert [t.logprob for t in entry.top_logprobs] == sorted((t.logprob for t in entry.top_logprobs), reverse=True)
        assert entry.top_logprobs[0].token == entry.token  # greedy: the chosen token is the likeliest


def test_no_logprobs_unless_asked(client):
    assert chat(client, max_tokens=2).choices[0].logprobs is None


def test_stream_interval_groups_tokens(serve):
    client = openai.OpenAI(base_url=serve(stream_interval=4) + "/v1", api_key="x")
    whole = chat(client, max_tokens=8).choices[0].message.content
    chunks = list(chat(client, stream=True, max_tokens=8))
    deltas = [c for c in chunks[1:-1] if c.choices[0].delta.content]
    assert streamed_text(chunks) == whole
    assert len(deltas) <= 2


def test_developer_role_and_text_parts(client):
    plain = chat(client, messages=[{"role": "system", "content": "Answer briefly."}, *PARIS], max_tokens=6)
    parts = chat(client, max_tokens=6, messages=[
        {"role": "developer", "content": "Answer briefly."},
        {"role": "user", "content": [{"type": "text", "text": PARIS[0]["content"]}]},
    ])
    assert parts.choices[0].message.content == plain.choices[0].message.content


def test_advisory_fields_are_accepted(client):
    resp = chat(client, max_tokens=2, user="u1", metadata={"k": "v"}, store=False, service_tier="auto",
                parallel_tool_calls=False, tool_choice="none", response_format={"type": "text"})
    assert resp.choices[0].message.content


def test_assistant_history_with_reasoning(client):
    messages = [*PARIS, {"role": "assistant", "content": "Paris.", "reasoning_content": "easy"},
                {"role": "user", "content": "And of Italy?"}]
    assert chat(client, messages=messages, max_tokens=4).choices[0].message.content


def test_extension_sampling_fields(client):
    resp = chat(client, temperature=0.7, seed=1, max_tokens=4,
                extra_body={"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1})
    assert resp.usage.completion_tokens <= 4


def test_streamed_logprobs_match_the_text(client):
    chunks = list(chat(client, stream=True, logprobs=True, top_logprobs=1, max_tokens=5))
    entries = [e for c in chunks if c.choices and c.choices[0].logprobs for e in c.choices[0].logprobs.content]
    assert len(entries) == 5
    assert "".join(e.token for e in entries) == streamed_text(chunks)
