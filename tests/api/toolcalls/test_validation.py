"""Complete calls are checked against their tool's schema: kept with an error, or, for a strict
tool, rejected into content, the same whether the output is parsed whole or streamed."""

from __future__ import annotations

import copy
import json
import logging

import pytest

from mlxctl.api.toolcalls import add_validation_listener, get_parser, names

from .helpers import TOOLS, check_stream, splits, stream

STRICT = copy.deepcopy(TOOLS)
STRICT[0]["function"]["strict"] = True  # get_weather is strict, get_time is not


def calls_in(fmt: str, days: str) -> str:
    """A get_weather call with ``days`` written as given (``3`` fits the schema, ``"soon"`` not)."""
    value = json.loads(days)
    args = json.dumps({"city": "Paris", "days": value})
    return {
        "hermes": f'<tool_call>\n{{"name": "get_weather", "arguments": {args}}}\n</tool_call>',
        "llama3_json": f'{{"name": "get_weather", "parameters": {args}}}',
        "mistral": f"[TOOL_CALLS]get_weather[ARGS]{args}",
        "granite": f'<|tool_call|>[{{"name": "get_weather", "arguments": {args}}}]',
        "deepseek_v3": f"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{args}"
                       "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "kimi_k2": "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                   f"<|tool_call_argument_begin|>{args}<|tool_call_end|><|tool_calls_section_end|>",
        "gpt_oss": f"<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{args}<|call|>",
        "qwen3_coder": "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
                       f"<parameter=days>\n{value}\n</parameter>\n</function>\n</tool_call>",
        "glm4": "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
                f"<arg_key>days</arg_key><arg_value>{value}</arg_value></tool_call>",
        "pythonic": f"[get_weather(city='Paris', days={value!r})]",
        "gemma": '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:'
                 + (f"{value}" if isinstance(value, int) else f'<|"|>{value}<|"|>') + "}<tool_call|>",
        "minimax_m2": '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n'
                      f'<parameter name="days">{value}</parameter>\n</invoke>\n</minimax:tool_call>',
        "seed_oss": "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n"
                    f"<parameter=days>{value}</parameter>\n</function>\n</seed:tool_call>",
        "nemotron": f'<TOOLCALL>[{{"name": "get_weather", "arguments": {args}}}]</TOOLCALL>',
        "deepseek_v32": '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" '
                        'string="true">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name="days" '
                        f'string="{str(isinstance(value, str)).lower()}">{value}</｜DSML｜parameter>\n'
                        "</｜DSML｜invoke>\n</｜DSML｜function_calls>",
    }[fmt]


TIME_CALL = {  # a call of the non-strict tool after the strict one, where the format has room for it
    "hermes": '\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>',
    "mistral": "[TOOL_CALLS]get_time[ARGS]{}",
    "glm4": "<tool_call>get_time</tool_call>",
    "seed_oss": "\n<seed:tool_call>\n<function=get_time>\n</function>\n</seed:tool_call>",
    "nemotron": '<TOOLCALL>[{"name": "get_time", "arguments": {}}]</TOOLCALL>',
}


@pytest.fixture
def heard():
    events = []
    remove = add_validation_listener(lambda name, error, rejected: events.append((name, error, rejected)))
    yield events
    remove()


def test_every_format_has_a_vector():
    assert {f: calls_in(f, "3") for f in names()}


@pytest.mark.parametrize("fmt", names())
def test_a_call_off_the_schema_is_kept_with_its_error(fmt, heard, caplog):
    text = calls_in(fmt, '"soon"')
    with caplog.at_level(logging.WARNING, logger="mlxctl.toolcalls"):
        content, calls = get_parser(fmt).parse(text, TOOLS)
    assert content is None and [c.name for c in calls] == ["get_weather"]
    assert json.loads(calls[0].arguments)["days"] == "soon"
    assert "days" in calls[0].error and "integer" in calls[0].error
    assert heard == [("get_weather", calls[0].error, False)]
    assert any("kept" in r.getMessage() and "days" in r.getMessage() for r in caplog.records)
    for pieces in splits(text):
        result, deltas = stream(get_parser(fmt), pieces)
        check_stream(result, deltas)
        assert [c.error for c in result[1]] == [calls[0].error]


@pytest.mark.parametrize("fmt", names())
def test_a_valid_call_has_no_error(fmt, heard):
    for tools in (TOOLS, STRICT):
        content, calls = get_parser(fmt).parse(calls_in(fmt, "3"), tools)
        assert content is None and [(c.name, c.error) for c in calls] == [("get_weather", None)]
    assert heard == []


@pytest.mark.parametrize("fmt", names())
def test_a_strict_tools_call_off_the_schema_becomes_content(fmt, heard):
    text = calls_in(fmt, '"soon"')
    content, calls = get_parser(fmt).parse(text, STRICT)
    assert calls == []
    assert content.startswith(text[:12]) and "soon" in content  # the call's own text, not lost
    assert heard and all(h[0] == "get_weather" and h[2] for h in heard)
    for pieces in splits(text):
        result, deltas = stream(get_parser(fmt), pieces, STRICT)
        check_stream(result, deltas)
        assert result == (content, [])
        assert not any(d.calls for d in deltas)  # a rejected call is never announced


@pytest.mark.parametrize("fmt", sorted(TIME_CALL))
def test_a_rejected_call_leaves_the_next_call_index_0(fmt):
    text = calls_in(fmt, '"soon"') + TIME_CALL[fmt]
    for pieces in splits(text):
        result, deltas = stream(get_parser(fmt), pieces, STRICT)
        check_stream(result, deltas)
        assert [c.name for c in result[1]] == ["get_time"]
        assert {d.index for step in deltas for d in step.calls} == {0}


@pytest.mark.parametrize("fmt", names())
def test_a_strict_tools_valid_call_streams_whole_when_it_closes(fmt):
    text = calls_in(fmt, "3")
    for pieces in splits(text):
        result, deltas = stream(get_parser(fmt), pieces, STRICT)
        check_stream(result, deltas)
        with_calls = [d for d in deltas if d.calls]
        assert len(with_calls) == 1 and with_calls[0].calls[0].name == "get_weather"
        assert with_calls[0].calls[0].arguments == result[1][0].arguments


def test_an_unknown_tool_is_kept_and_flagged(heard):
    _, calls = get_parser("hermes").parse('<tool_call>{"name": "get_wether", "arguments": {}}</tool_call>', STRICT)
    assert [c.name for c in calls] == ["get_wether"] and "unknown tool" in calls[0].error
    assert heard[0][2] is False


def test_without_tools_nothing_is_checked(heard):
    _, calls = get_parser("hermes").parse(calls_in("hermes", '"soon"'), None)
    assert calls[0].error is None and heard == []
