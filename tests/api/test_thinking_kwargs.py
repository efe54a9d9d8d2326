"""Reasoning switches reach the chat template: OpenAI ``reasoning_effort`` / ``chat_template_kwargs``,
Anthropic ``thinking.type`` / ``output_config.effort``, Responses ``reasoning.effort``.

The real SmolLM2 tokenizer is copied with a small Qwen3-like chat template that prints the values it
receives and opens ``<think>`` in the prompt unless ``enable_thinking`` is false; each API's request
model and translation function then render the prompt, which is decoded and read back.
"""

from __future__ import annotations

import json
import shutil

import pytest

from mlxctl.api.chat_request import prepare_chat
from mlxctl.api import anthropic_translate, openai_translate, responses_translate
from mlxctl.api.anthropic_models import MessagesRequest
from mlxctl.api.chat_plan import ModelFormats
from mlxctl.api.chat_split import SplitResult
from mlxctl.api.openai_models import ChatCompletionRequest
from mlxctl.api.responses_models import ResponsesRequest
from mlxctl.errors import BadInputError

# Prints every value (or "unset"), replays past reasoning, and ends the prompt like Qwen3: an open
# <think> when thinking is on (or not said), an empty closed block when enable_thinking is false.
TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}"
    "{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "[enable_thinking={{ enable_thinking if enable_thinking is defined else 'unset' }}]"
    "[reasoning_effort={{ reasoning_effort if reasoning_effort is defined else 'unset' }}]"
    "[custom={{ custom if custom is defined else 'unset' }}]\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
    "{% else %}<think>\n{% endif %}{% endif %}"
)
MODEL = "m"
# A request that says nothing about thinking leaves enable_thinking to mlx-lm's TokenizerWrapper,
# which passes whether the vocabulary has <think> and </think> tokens: SmolLM2's has not.
UNSAID = "False"
HELLO = [{"role": "user", "content": "Hello"}]


def tokenizer_with(smollm2, folder, template: str):
    """mlx-lm's TokenizerWrapper over SmolLM2's real tokenizer files, with ``template``."""
    from mlx_lm.tokenizer_utils import load as load_tokenizer

    shutil.copy(smollm2.path / "tokenizer.json", folder / "tokenizer.json")
    config = json.loads((smollm2.path / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": template}))
    return load_tokenizer(folder)


@pytest.fixture(scope="module")
def tokenizer(smollm2, tmp_path_factory):
    return tokenizer_with(smollm2, tmp_path_factory.mktemp("thinking-tokenizer"), TEMPLATE)


@pytest.fixture(scope="module")
def formats(tokenizer) -> ModelFormats:
    return ModelFormats.detect(tokenizer)


def shown(enable: str, effort: str, custom: str = "unset") -> str:
    return f"[enable_thinking={enable}][reasoning_effort={effort}][custom={custom}]"


def test_unsaid_enable_thinking_is_mlx_lms_default(tokenizer):
    assert tokenizer.has_thinking is False
    prompt = tokenizer.apply_chat_template(HELLO, tokenize=False, add_generation_prompt=True)
    assert shown(UNSAID, "unset") in prompt


def test_the_template_selects_the_think_parser(formats):
    # the server's own detection, so the renders below also say whether the prompt opened thinking
    assert formats.reasoning_parser == "think"
    assert formats.template_tools is False


# -- OpenAI chat completions ---------------------------------------------------------------------------

@pytest.mark.parametrize(("fields", "expected", "opens"), [
    ({}, shown(UNSAID, "unset"), False),
    ({"reasoning_effort": "low"}, shown("True", "low"), True),
    ({"reasoning_effort": "minimal"}, shown("True", "minimal"), True),
    ({"reasoning_effort": "none"}, shown("False", "none"), False),
    # chat_template_kwargs take precedence over what reasoning_effort implies
    ({"reasoning_effort": "high", "chat_template_kwargs": {"enable_thinking": False}}, shown("False", "high"), False),
    ({"reasoning_effort": "low", "chat_template_kwargs": {"reasoning_effort": "medium"}},
     shown("True", "medium"), True),
    ({"reasoning_effort": "none", "chat_template_kwargs": {"enable_thinking": True}}, shown("True", "none"), True),
    ({"chat_template_kwargs": {"enable_thinking": False}}, shown("False", "unset"), False),
    ({"chat_template_kwargs": {"custom": "yes", "enable_thinking": True}}, shown("True", "unset", "yes"), True),
])
def test_openai_chat_fields_reach_the_template(tokenizer, formats, fields, expected, opens):
    body = ChatCompletionRequest.model_validate({"model": MODEL, "messages": HELLO, **fields})
    jobs, plan = openai_translate.chat_jobs(body, tokenizer, formats)
    prompt = tokenizer.decode(jobs[0].tokens)
    assert expected in prompt
    assert prompt.rstrip().endswith("<think>") is opens
    assert jobs[0].reasoning_open is opens  # the reasoning parser will start inside thinking
    assert plan.reasoning_parser == "think"


def test_openai_past_reasoning_reaches_the_template(tokenizer, formats):
    for field in ("reasoning_content", "reasoning"):
        messages = [*HELLO, {"role": "assistant", "content": "Hi!", field: "they greeted me"},
                    {"role": "user", "content": "Again"}]
        body = ChatCompletionRequest.model_validate({"model": MODEL, "messages": messages})
        jobs, _ = openai_translate.chat_jobs(body, tokenizer, formats)
        assert "<|im_start|>assistant\n<think>they greeted me</think>Hi!<|im_end|>" in tokenizer.decode(jobs[0].tokens)


def test_openai_thinking_budget_with_thinking_switched_off_is_refused(tokenizer, formats):
    body = ChatCompletionRequest.model_validate({"model": MODEL, "messages": HELLO, "thinking_budget": 8,
                                                 "chat_template_kwargs": {"enable_thinking": False}})
    with pytest.raises(BadInputError, match="thinking is off"):
        openai_translate.chat_jobs(body, tokenizer, formats)


# -- Anthropic messages ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("fields", "expected", "opens", "budget"), [
    ({}, shown(UNSAID, "unset"), False, None),
    ({"thinking": {"type": "enabled", "budget_tokens": 64}}, shown("True", "unset"), True, 64),
    ({"thinking": {"type": "enabled"}}, shown("True", "unset"), True, None),
    ({"thinking": {"type": "adaptive"}}, shown("True", "unset"), True, None),
    ({"thinking": {"type": "disabled"}}, shown("False", "unset"), False, None),
    ({"output_config": {"effort": "high"}}, shown(UNSAID, "high"), False, None),
    ({"thinking": {"type": "disabled"}, "output_config": {"effort": "low"}}, shown("False", "low"), False, None),
])
def test_anthropic_fields_reach_the_template(tokenizer, formats, fields, expected, opens, budget):
    req = MessagesRequest.model_validate({"model": MODEL, "max_tokens": 16, "messages": HELLO, **fields})
    tokens, plan, opened = anthropic_prompt(tokenizer, req, formats)
    prompt = tokenizer.decode(tokens)
    assert expected in prompt
    assert prompt.rstrip().endswith("<think>") is opens
    assert opened is opens
    assert plan.thinking_budget == budget


def test_anthropic_thinking_blocks_reach_the_template(tokenizer, formats):
    messages = [*HELLO, {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "they greeted me", "signature": ""}, {"type": "text", "text": "Hi!"}]},
        {"role": "user", "content": "Again"}]
    req = MessagesRequest.model_validate({"model": MODEL, "max_tokens": 16, "messages": messages})
    tokens, _, _ = anthropic_prompt(tokenizer, req, formats)
    assert "<|im_start|>assistant\n<think>they greeted me</think>Hi!<|im_end|>" in tokenizer.decode(tokens)


def test_anthropic_thinking_needs_a_reasoning_format(tokenizer):
    req = MessagesRequest.model_validate({"model": MODEL, "max_tokens": 16, "messages": HELLO,
                                          "thinking": {"type": "enabled", "budget_tokens": 64}})
    with pytest.raises(BadInputError, match="no reasoning format"):
        anthropic_prompt(tokenizer, req, ModelFormats())


def anthropic_prompt(tokenizer, req, formats):
    """(tokens, plan, whether the prompt opened thinking), as the /v1/messages view prepares them."""
    prepared = prepare_chat(tokenizer, formats, anthropic_translate.chat_request(req, formats))
    return prepared.tokens, prepared.plan, prepared.reasoning_open


def responses_prompt(tokenizer, req, messages, formats):
    prepared = prepare_chat(tokenizer, formats, responses_translate.chat_request(req, messages, formats))
    return prepared.tokens, prepared.plan, prepared.reasoning_open


# -- OpenAI Responses ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("fields", "expected", "opens"), [
    ({}, shown(UNSAID, "unset"), False),
    ({"reasoning": {"effort": "low"}}, shown("True", "low"), True),
    ({"reasoning": {"effort": "high", "summary": "auto"}}, shown("True", "high"), True),
    ({"reasoning": {"effort": "none"}}, shown("False", "none"), False),
    ({"reasoning": {"summary": "auto"}}, shown(UNSAID, "unset"), False),
])
def test_responses_fields_reach_the_template(tokenizer, formats, fields, expected, opens):
    req = ResponsesRequest.model_validate({"model": MODEL, "input": "Hello", **fields})
    messages = responses_translate.conversation(req)
    tokens, _, opened = responses_prompt(tokenizer, req, messages, formats)
    prompt = tokenizer.decode(tokens)
    assert expected in prompt
    assert prompt.rstrip().endswith("<think>") is opens
    assert opened is opens


def test_responses_reasoning_items_reach_the_template(tokenizer, formats):
    # a past response's output items sent back as input: reasoning, then its message (as the
    # official client's `output` holds them), then the next user turn
    items = [{"role": "user", "content": "Hello"},
             {"type": "reasoning", "id": "rs_1", "summary": [],
              "content": [{"type": "reasoning_text", "text": "they greeted me"}]},
             {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
              "content": [{"type": "output_text", "text": "Hi!", "annotations": []}]},
             {"role": "user", "content": "Again"}]
    req = ResponsesRequest.model_validate({"model": MODEL, "input": items})
    tokens, _, _ = responses_prompt(tokenizer, req, responses_translate.conversation(req), formats)
    prompt = tokenizer.decode(tokens)
    # one assistant turn holds the reasoning and the answer
    assert "<|im_start|>assistant\n<think>they greeted me</think>Hi!<|im_end|>" in prompt
    assert prompt.count("<|im_start|>assistant") == 2  # that turn and the generation prompt

    # the same turn as previous_response_id replays it from the store
    stored = responses_translate.with_reply(HELLO, SplitResult("they greeted me", "Hi!", []))
    follow = ResponsesRequest.model_validate({"model": MODEL, "input": "Again"})
    replayed, _, _ = responses_prompt(
        tokenizer, follow, responses_translate.conversation(follow, stored), formats)
    assert replayed == tokens


def test_responses_reasoning_item_then_a_call_is_one_turn(tokenizer, formats):
    items = [{"role": "user", "content": "Hello"},
             {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "need time"}]},
             {"type": "function_call", "call_id": "call_1", "name": "now", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "call_1", "output": "noon"}]
    messages = responses_translate.conversation(ResponsesRequest.model_validate({"model": MODEL, "input": items}))
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert messages[1]["reasoning_content"] == "need time"
    assert messages[1]["tool_calls"][0]["function"] == {"name": "now", "arguments": {}}


def test_a_template_that_refuses_the_conversation_is_a_400_naming_messages(tmp_path, smollm2):
    """Templates raise on conversations they do not take (Mistral's "roles must alternate"):
    that is the client's input, so a 400 naming ``messages``, not a 500."""
    from mlxctl.api.prompt import render_chat
    from mlxctl.server.errors import ApiError

    strict = ("{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
              "{{ raise_exception('roles must alternate user/assistant') }}{% endif %}"
              "{{ m['content'] }}{% endfor %}")
    tokenizer = tokenizer_with(smollm2, tmp_path, strict)
    assert render_chat(tokenizer, [{"role": "user", "content": "hi"}])
    with pytest.raises(BadInputError, match="roles must alternate") as caught:
        render_chat(tokenizer, [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    api = ApiError.from_mlxctl(caught.value)
    assert (api.status, api.param) == (400, "messages")
