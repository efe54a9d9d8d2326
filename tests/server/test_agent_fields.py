"""What agent clients send on every request, accepted where it asks for nothing we would produce
differently: Claude Code's mid-conversation system messages and ``context_management`` edits
on /v1/messages, Codex's ``include: ["reasoning.encrypted_content"]`` and ``client_metadata``
on /v1/responses; what would change the output is still a 400 naming it."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from tests.server.infra import anthropic_client, openai_client, served

MODEL = "smollm2-135m"
SYSTEM = "Be brief."
CONVERSATION = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},
                {"role": "system", "content": "The Agent tool is available."}, {"role": "user", "content": "Go on"}]
KEEP_ALL = {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}


@pytest.fixture(scope="module")
def url(engine):
    with served(engine) as base:
        yield base


@pytest.fixture(scope="module")
def claude(url) -> anthropic.Anthropic:
    return anthropic_client(url)


def test_a_mid_conversation_system_message_is_rendered_where_it_stands(url, claude):
    msg = claude.messages.create(model=MODEL, system=SYSTEM, messages=CONVERSATION, max_tokens=2,
                                 extra_body={"temperature": 0})
    assert msg.type == "message" and msg.content
    counted = claude.messages.count_tokens(model=MODEL, system=SYSTEM, messages=CONVERSATION).input_tokens
    in_place = httpx.post(f"{url}/tokenize", timeout=30,
                          json={"messages": [{"role": "system", "content": SYSTEM}, *CONVERSATION]}).json()
    assert counted == in_place["count"]  # SmolLM2's ChatML renders system turns anywhere


def test_a_system_message_with_other_blocks_is_a_400(claude):
    bad = [{"role": "system", "content": [{"type": "image", "source": {"type": "url", "url": "http://x/a.png"}}]},
           {"role": "user", "content": "Hi"}]
    with pytest.raises(anthropic.BadRequestError) as info:
        claude.messages.create(model=MODEL, messages=bad, max_tokens=2)
    assert "system message takes text only" in info.value.message


def test_a_no_op_context_management_edit_is_accepted(claude):
    msg = claude.messages.create(model=MODEL, messages=CONVERSATION, max_tokens=2,
                                 extra_body={"temperature": 0, "context_management": KEEP_ALL})
    assert msg.type == "message"
    assert claude.messages.count_tokens(model=MODEL, messages=CONVERSATION,
                                        extra_body={"context_management": KEEP_ALL}).input_tokens > 0


THOUGHT = [{"role": "user", "content": "Hi"},
           {"role": "assistant", "content": [{"type": "thinking", "thinking": "greet", "signature": ""},
                                             {"type": "text", "text": "Hello."}]},
           {"role": "user", "content": "Go on"}, {"role": "assistant", "content": "Sure."},
           {"role": "user", "content": "More"}]


@pytest.mark.parametrize(("edits", "messages", "words"), [
    ([{"type": "clear_tool_uses_20250919"}], CONVERSATION, ["edits[0]", "clear_tool_uses_20250919"]),
    ([{"type": "clear_thinking_20251015"}], THOUGHT, ["edits[0]", "clear_thinking_20251015", "keep"]),
    ([KEEP_ALL["edits"][0], {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}],
     THOUGHT, ["edits[1]", "would clear thinking"]),
], ids=["clear-tool-uses", "clear-thinking-default-keep", "clear-thinking-one-turn"])
def test_a_context_management_edit_that_changes_the_prompt_is_a_400(claude, edits, messages, words):
    with pytest.raises(anthropic.BadRequestError) as info:
        claude.messages.create(model=MODEL, messages=messages, max_tokens=2,
                               extra_body={"context_management": {"edits": edits}})
    for word in ["context_management", *words]:
        assert word in info.value.message, info.value.message


def test_clear_thinking_keeping_the_turns_that_think_is_accepted(claude):
    edit = {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}}
    msg = claude.messages.create(model=MODEL, messages=THOUGHT, max_tokens=2,
                                 extra_body={"temperature": 0, "context_management": {"edits": [edit]}})
    assert msg.type == "message"


def test_codex_include_and_client_metadata_are_advisory(url):
    r = openai_client(url).responses.create(
        model=MODEL, input="Hi", max_output_tokens=2, temperature=0, store=False,
        include=["reasoning.encrypted_content"], extra_body={"client_metadata": {"originator": "codex_cli_rs"}})
    assert r.status in ("completed", "incomplete") and r.output


def test_an_include_of_data_we_would_have_to_add_is_a_400(url):
    with pytest.raises(openai.BadRequestError) as info:
        openai_client(url).responses.create(model=MODEL, input="Hi", max_output_tokens=2,
                                            include=["reasoning.encrypted_content", "message.output_text.logprobs"])
    assert "include[1]" in info.value.message and "message.output_text.logprobs" in info.value.message
