"""Constraints with thinking on a tokenizer whose thinking markers are added tokens (as Qwen3's
``<think>`` 151667 and ``</think>`` 151668 are, ``special: false``).

SmolLM2's tokenizer with each reasoning format's markers (and Hermes' call markers) added: a
forced call, a forced call under a thinking budget and a JSON answer after thinking all take the
model's thinking, closed by the marker token, then the answer. Before, the end marker was only in
a regex: llguidance's mask admitted the ``</think>`` token and then the matcher refused it."""

from __future__ import annotations

import json

import pytest

from mlxctl.api import chat_plan as cp
from mlxctl.api.chat_plan import ModelFormats, OutputFormat, ToolChoice
from mlxctl.engine.constraints import compile_constraint

pytest.importorskip("llguidance")

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
# reasoning format -> (its thinking as the model writes it, opening marker included)
THINKING = {
    "think": "<think>\nThe user wants the weather; </thi is not the end.\n</think>\n\n",
    "deepseek_r1": "<think>\nThe weather, then.\n</think>\n\n",
    "mistral": "[THINK]The weather, then.[/THINK]\n",
    "gemma4": "<|channel>thought\nThe weather, then.<channel|>",
}
MARKERS = ["<think>", "</think>", "[THINK]", "[/THINK]", "<|channel>", "<channel|>", "<tool_call>", "</tool_call>",
           "<|tool_call>", "<tool_call|>", '<|"|>', "｜DSML｜"]


@pytest.fixture(scope="module")
def tokenizer(smollm2):
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(smollm2.path))
    tokenizer.add_tokens(MARKERS)
    return tokenizer


def _follows(tokenizer, spec, text: str) -> bool:
    tokens = tokenizer.encode(text, add_special_tokens=False)
    matcher = compile_constraint(spec, tokenizer).matcher(len(tokenizer))
    for token in tokens:
        matcher.advance(token)
        if matcher.error is not None:
            return False
    return matcher.is_accepting()


def _opener(fmt: str) -> str:
    from mlxctl.api import reasoning

    return reasoning.get_parser(fmt).open_markers[0]


def _as_tokens(tokenizer, text: str) -> None:
    """Every marker in ``text`` is one token (the premise of these tests)."""
    tokens = tokenizer.encode(text, add_special_tokens=False)
    for marker in MARKERS:
        if marker in text:
            assert tokenizer.convert_tokens_to_ids(marker) in tokens, marker


@pytest.mark.parametrize("fmt", sorted(THINKING))
@pytest.mark.parametrize("opened", [False, True])
def test_a_forced_call_after_thinking_takes_the_end_marker_token(fmt, opened, tokenizer):
    plan = cp.make_plan(ModelFormats("hermes", fmt, True), [WEATHER], ToolChoice("required"), None)
    text = THINKING[fmt] + CALL
    if opened:
        text = text.removeprefix(_opener(fmt))
    _as_tokens(tokenizer, text)
    assert _follows(tokenizer, cp.constraint_for(plan, opened), text), text


@pytest.mark.parametrize("fmt", sorted(THINKING))
def test_a_forced_call_without_thinking_still_passes(fmt, tokenizer):
    plan = cp.make_plan(ModelFormats("hermes", fmt, True), [WEATHER], ToolChoice("named", "get_weather"), None)
    assert _follows(tokenizer, cp.constraint_for(plan, False), CALL)


@pytest.mark.parametrize("fmt", sorted(THINKING))
def test_a_thinking_budget_closes_with_the_end_marker_token(fmt, tokenizer):
    plan = cp.make_plan(ModelFormats("hermes", fmt, True), [WEATHER], ToolChoice("required"), None, thinking_budget=40)
    assert _follows(tokenizer, cp.constraint_for(plan, False), THINKING[fmt] + CALL)


@pytest.mark.parametrize("fmt", sorted(THINKING))
def test_a_json_answer_after_thinking_takes_the_end_marker_token(fmt, tokenizer):
    answer = OutputFormat("json_schema", json.dumps(SCHEMA))
    plan = cp.make_plan(ModelFormats("hermes", fmt, True), [], ToolChoice("none"), answer)
    spec = cp.constraint_for(plan, False)
    assert spec.token_markers
    assert _follows(tokenizer, spec, THINKING[fmt] + '{"city": "Paris"}')


def test_thinking_written_as_text_still_ends_at_the_marker(smollm2):
    """A tokenizer without the added tokens: the end marker is text, as before."""
    from transformers import PreTrainedTokenizerFast

    plain = PreTrainedTokenizerFast.from_pretrained(str(smollm2.path))
    plan = cp.make_plan(ModelFormats("hermes", "think", True), [WEATHER], ToolChoice("required"), None)
    assert _follows(plain, cp.constraint_for(plan, False), THINKING["think"] + CALL)


def test_a_harmony_analysis_ends_at_the_end_token(smollm2):
    """gpt-oss: the analysis message before a forced call ends with ``<|end|>``, one token."""
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(smollm2.path))
    harmony = ["<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|constrain|>", "<|call|>"]
    tokenizer.add_tokens(harmony)
    plan = cp.make_plan(ModelFormats("gpt_oss", "gpt_oss", True), [WEATHER], ToolChoice("required"), None)
    text = ('<|channel|>analysis<|message|>Weather in Paris.<|end|><|start|>assistant'
            '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}')
    assert _follows(tokenizer, cp.constraint_for(plan, False), text)


@pytest.mark.parametrize("opened", [False, True])
def test_a_forced_gemma_call_after_gemma4_thinking(opened, tokenizer):
    """Gemma 4: its thought channel, then its own call syntax, every marker one token."""
    plan = cp.make_plan(ModelFormats("gemma", "gemma4", True), [WEATHER], ToolChoice("required"), None)
    text = THINKING["gemma4"] + '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>'
    if opened:
        text = text.removeprefix(_opener("gemma4"))
    _as_tokens(tokenizer, text)
    assert _follows(tokenizer, cp.constraint_for(plan, opened), text), text


def test_a_forced_dsml_call_after_deepseek_v32_thinking(tokenizer):
    """DeepSeek V3.2: ``<think>`` reasoning, then its DSML call, ``｜DSML｜`` one token in each tag."""
    plan = cp.make_plan(ModelFormats("deepseek_v32", "think", True), [WEATHER], ToolChoice("required"), None)
    text = (THINKING["think"] + '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
            '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
            "</｜DSML｜function_calls>")
    _as_tokens(tokenizer, text)
    assert _follows(tokenizer, cp.constraint_for(plan, False), text), text
