"""A thinking budget is a grammar: at most N thinking tokens, then the end marker, then the answer."""

from __future__ import annotations

import json

import pytest

from mlxctl.api.chat_plan import ChatPlan, OutputFormat, ToolChoice, constraint_for
from mlxctl.engine.sampling import SamplingParams
from mlxctl.errors import BadInputError


def run(engine, plan: ChatPlan, max_tokens: int = 48):
    from mlxctl.api.prompt import chat_messages, render_chat

    tokenizer = engine.model.tokenizer
    prompt = render_chat(tokenizer, chat_messages("Think step by step about 17 + 25, then answer."))
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, constraint=constraint_for(plan))
    return engine.submit(prompt, params).collect()


@pytest.mark.parametrize("budget", [1, 6, 15])
def test_thinking_ends_within_the_budget(smollm2_engine, budget):
    done = run(smollm2_engine, ChatPlan(reasoning_parser="think", thinking_budget=budget))
    tokenizer = smollm2_engine.model.tokenizer
    assert "</think>" in done.text
    thinking = done.text.split("</think>")[0].removeprefix("<think>")
    assert len(tokenizer.encode(thinking, add_special_tokens=False)) <= budget + 1


def test_the_answer_after_the_budget_follows_the_output_format(smollm2_engine):
    plan = ChatPlan(reasoning_parser="think", thinking_budget=5,
                    output_format=OutputFormat("json_schema", json.dumps(
                        {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]})))
    done = run(smollm2_engine, plan, max_tokens=60)
    answer = json.loads(done.text.split("</think>", 1)[1])
    assert isinstance(answer["sum"], int)


def test_formats_without_an_opening_marker_are_refused():
    with pytest.raises(BadInputError, match="thinking budget is not supported"):
        constraint_for(ChatPlan(reasoning_parser="gpt_oss", thinking_budget=4))


def test_a_model_that_answers_without_thinking_is_still_constrained(smollm2_engine):
    """The output format applies whether or not the model opens a thinking block."""
    schema = {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"],
              "additionalProperties": False}
    plan = ChatPlan(reasoning_parser="think", output_format=OutputFormat("json_schema", json.dumps(schema)))
    done = run(smollm2_engine, plan, max_tokens=60)
    answer = done.text.split("</think>", 1)[-1]
    assert isinstance(json.loads(answer)["sum"], int)


def test_a_forced_tool_call_with_a_reasoning_format(smollm2_engine):
    from mlxctl.api.toolcalls import get_parser

    tools = [{"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}]
    plan = ChatPlan(tools=tools, choice=ToolChoice("required"), tool_parser="hermes", reasoning_parser="think")
    done = run(smollm2_engine, plan, max_tokens=60)
    content, calls = get_parser("hermes").parse(done.text.split("</think>", 1)[-1], tools)
    assert [c.name for c in calls] == ["add"] and set(json.loads(calls[0].arguments)) == {"a", "b"}
