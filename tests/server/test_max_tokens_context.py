"""A max_tokens larger than what the context leaves after the prompt is a 400 on every protocol
(as OpenAI, Anthropic and vLLM answer it), through the official SDKs; a default is capped."""

from __future__ import annotations

import re

import anthropic
import openai
import pytest

from mlxctl.api.openai_models import ChatCompletionRequest, CompletionRequest
from mlxctl.api.openai_translate import chat_params, completion_params
from tests.server.infra import MODEL

CONTEXT = 8192  # SmolLM2-135M's
HUGE = 1_000_000_000_000
HI = [{"role": "user", "content": "Hi"}]
LONG = [{"role": "user", "content": "hi " * 9000}]


@pytest.fixture
def oai(base_url) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url + "/v1", api_key="x", max_retries=0)


@pytest.fixture
def claude(base_url) -> anthropic.Anthropic:
    # A timeout of its own: with the default one the SDK refuses a large max_tokens unstreamed itself.
    return anthropic.Anthropic(base_url=base_url, api_key="x", max_retries=0, timeout=60.0)


def explained(message: str, field: str, value: int) -> int:
    """The prompt's token count, from a refusal that names the field, the value and the context."""
    found = re.search(rf"{field} is {value} but the prompt has (\d+) tokens and the model's context is "
                      rf"{CONTEXT}: at most (\d+) new tokens fit", message)
    assert found, message
    prompt, room = map(int, found.groups())
    assert prompt + room == CONTEXT
    return prompt


def openai_refusal(call, field: str, value: int) -> int:
    with pytest.raises(openai.BadRequestError) as info:
        call()
    err = info.value
    assert err.status_code == 400 and err.code == "context_length_exceeded" and err.param == field, err.body
    assert err.body["type"] == "invalid_request_error"
    prompt = explained(err.message, field, value)
    # OpenAI's own wording first: litellm (aider) and opencode detect an overflow by it
    assert err.body["message"].startswith(f"This model's maximum context length is {CONTEXT} tokens. However, you requested "
                                  f"{prompt + value} tokens ({prompt} in the messages, {value} in the completion)."), err.message
    return prompt


@pytest.mark.parametrize("stream", [False, True])
def test_chat_max_tokens_over_the_context(oai, stream):
    openai_refusal(lambda: oai.chat.completions.create(model=MODEL, messages=HI, max_tokens=HUGE, stream=stream),
                   "max_tokens", HUGE)


def test_chat_max_completion_tokens_one_over_the_room(oai):
    prompt = openai_refusal(lambda: oai.chat.completions.create(model=MODEL, messages=HI, max_completion_tokens=HUGE),
                            "max_completion_tokens", HUGE)
    room = CONTEXT - prompt
    openai_refusal(lambda: oai.chat.completions.create(model=MODEL, messages=HI, max_completion_tokens=room + 1),
                   "max_completion_tokens", room + 1)


def test_completions_max_tokens_over_the_context(oai):
    openai_refusal(lambda: oai.completions.create(model=MODEL, prompt="Hello", max_tokens=HUGE), "max_tokens", HUGE)


def test_responses_max_output_tokens_over_the_context(oai):
    openai_refusal(lambda: oai.responses.create(model=MODEL, input="Hi", max_output_tokens=HUGE),
                   "max_output_tokens", HUGE)


def test_a_prompt_over_the_context_has_openais_code(oai):
    with pytest.raises(openai.BadRequestError) as info:
        oai.chat.completions.create(model=MODEL, messages=LONG, max_tokens=2)
    assert info.value.code == "context_length_exceeded" and "nothing was truncated" in info.value.message
    assert re.match(rf"This model's maximum context length is {CONTEXT} tokens\. However, your messages resulted "
                    r"in \d+ tokens\.", info.value.body["message"]), info.value.message


def anthropic_refusal(call) -> str:
    with pytest.raises(anthropic.BadRequestError) as info:
        call()
    err = info.value
    assert err.status_code == 400 and err.body["type"] == "error", err.body
    assert err.body["error"]["type"] == "invalid_request_error"
    return err.body["error"]["message"]


def test_messages_max_tokens_over_the_context_in_anthropics_words(claude):
    message = anthropic_refusal(lambda: claude.messages.create(model=MODEL, messages=HI, max_tokens=HUGE))
    found = re.match(r"input length and `max_tokens` exceed context limit: (\d+) \+ (\d+) > (\d+), "
                     r"decrease input length or `max_tokens` and try again \((.*)\)$", message)
    assert found, message
    prompt, value, context, ours = found.groups()
    assert (int(value), int(context)) == (HUGE, CONTEXT)
    assert explained(ours, "max_tokens", HUGE) == int(prompt)


def test_messages_stream_is_refused_before_it_starts(claude):
    def stream():
        with claude.messages.stream(model=MODEL, messages=HI, max_tokens=HUGE) as events:
            list(events)

    assert anthropic_refusal(stream).startswith("input length and `max_tokens` exceed context limit: ")


def test_a_prompt_over_the_context_in_anthropics_words(claude):
    message = anthropic_refusal(lambda: claude.messages.create(model=MODEL, messages=LONG, max_tokens=2))
    found = re.match(r"prompt is too long: (\d+) tokens > (\d+) maximum \(the prompt has (\d+) tokens", message)
    assert found and found[1] == found[3] and int(found[2]) == CONTEXT - 1, message


def test_only_a_limit_the_request_gave_is_refused():
    """What the engine refuses (a field named) or caps (none): chat without a limit, and the
    completions default of 16, are capped to the context."""
    chat = chat_params(ChatCompletionRequest(model=MODEL, messages=HI))
    assert (chat.max_tokens, chat.max_tokens_field) == (None, None)  # no limit given: up to the context
    given = completion_params(CompletionRequest(model=MODEL, prompt="x", max_tokens=16))
    default = completion_params(CompletionRequest(model=MODEL, prompt="x"))
    assert (given.max_tokens, given.max_tokens_field) == (16, "max_tokens")
    assert (default.max_tokens, default.max_tokens_field) == (16, None)
