"""System messages inside an Anthropic conversation: rendered where they stand when the chat
template takes them there (SmolLM2's ChatML does), else merged into the top-level system text
(the top-level system first, then each system message in order, a blank line between)."""

from __future__ import annotations

import copy

import pytest

from mlxctl.api.anthropic_models import CountTokensRequest
from mlxctl.api.anthropic_translate import prompt_tokens

TURN = "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
END = "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
REFUSING = ("{% for m in messages %}{% if m.role == 'system' and not loop.first %}"
            "{{ raise_exception('System message must be at the beginning.') }}{% endif %}" + TURN + END)
DROPPING = "{% for m in messages %}{% if m.role != 'system' or loop.first %}" + TURN + "{% endif %}" + END
BODY = {"model": "m", "system": "Be brief.", "messages": [
    {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},
    {"role": "system", "content": [{"type": "text", "text": "Use the Agent tool."}]},
    {"role": "user", "content": "Go"}]}
IN_PLACE = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
            "Hello.<|im_end|>\n<|im_start|>system\nUse the Agent tool.<|im_end|>\n<|im_start|>user\nGo<|im_end|>\n"
            "<|im_start|>assistant\n")
MERGED = ("<|im_start|>system\nBe brief.\n\nUse the Agent tool.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
          "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nGo<|im_end|>\n<|im_start|>assistant\n")


@pytest.fixture(scope="module")
def tokenizer(smollm2):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(smollm2.path))


def rendered(tokenizer, template: str | None = None, body: dict = BODY) -> str:
    if template is not None:
        tokenizer = copy.copy(tokenizer)
        tokenizer.chat_template = template
    tokens = prompt_tokens(tokenizer, CountTokensRequest.model_validate(body))
    return tokenizer.decode(tokens)


def test_smollm2_renders_a_system_message_where_it_stands(tokenizer):
    assert rendered(tokenizer) == IN_PLACE


@pytest.mark.parametrize("template", [REFUSING, DROPPING], ids=["refusing", "dropping"])
def test_a_template_that_will_not_render_it_there_gets_it_merged(tokenizer, template):
    assert rendered(tokenizer, template) == MERGED


def test_merged_without_a_top_level_system(tokenizer):
    body = {**BODY, "system": None}
    assert rendered(tokenizer, REFUSING, body) == MERGED.replace("Be brief.\n\n", "")


def test_a_system_message_takes_text_only():
    body = {**BODY, "messages": [{"role": "system", "content": [
        {"type": "tool_use", "id": "t", "name": "x", "input": {}}]}, {"role": "user", "content": "Go"}]}
    with pytest.raises(ValueError, match="system message takes text only"):
        CountTokensRequest.model_validate(body)
