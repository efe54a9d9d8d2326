"""Streaming behaviour: early release of content, incremental arguments, and property tests."""

from __future__ import annotations

import itertools
import json
import keyword

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mlxctl.api.toolcalls import get_parser, names

from .helpers import TOOLS, check_stream, normalized, stream

# The texts that open a call in each marker-based format.
START_MARKERS = {
    "hermes": ["<tool_call>"],
    "qwen3_coder": ["<tool_call>"],
    "glm4": ["<tool_call>"],
    "mistral": ["[TOOL_CALLS]"],
    "granite": ["<|tool_call|>"],
    "deepseek_v3": ["<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>"],
    "deepseek_v32": ["<｜DSML｜function_calls>"],
    "kimi_k2": [
        "<|tool_calls_section_begin|>",
        "<|tool_call_section_begin|>",
        "<|tool_call_begin|>",
    ],
    "gemma": ["<|tool_call>", "<start_function_call>"],
    "gpt_oss": ["<|start|>", "<|channel|>"],
    "minimax_m2": ["<minimax:tool_call>"],
    "seed_oss": ["<seed:tool_call>"],
    "nemotron": ["<TOOLCALL>"],
}


@pytest.mark.parametrize("fmt", sorted(START_MARKERS))
def test_content_is_held_back_only_for_a_marker_prefix(fmt):
    for marker in START_MARKERS[fmt]:
        for k in range(1, len(marker)):
            parser = get_parser(fmt)(TOOLS)
            assert parser.feed("Hello, " + marker[:k]).content == "Hello, "
            # the prefix turns out not to be a marker: released at once
            assert parser.feed("\x00").content == marker[:k] + "\x00"
            assert parser.finish().content == ""
            assert parser.result() == ("Hello, " + marker[:k] + "\x00", [])


@pytest.mark.parametrize("fmt", ["llama3_json", "pythonic"])
def test_whole_output_formats_release_prose_at_once(fmt):
    parser = get_parser(fmt)(TOOLS)
    assert parser.feed("  ").content == ""  # may still become a call
    assert parser.feed("The answer: {[").content == "  The answer: {["
    assert parser.feed(" more").content == " more"


# An output cut just inside the arguments of a call, and the fragment streamed by then.
PARTIAL = {
    "hermes": ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par', '{"city": "Par'),
    "llama3_json": ('{"name": "get_weather", "parameters": {"city": "Par', '{"city": "Par'),
    "mistral": ('[TOOL_CALLS]get_weather[ARGS]{"city": "Par', '{"city": "Par'),
    "granite": (
        '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Par',
        '{"city": "Par',
    ),
    "deepseek_v3": (
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"ci',
        '{"ci',
    ),
    "kimi_k2": (
        (
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
            '<|tool_call_argument_begin|>{"city": "P'
        ),
        '{"city": "P',
    ),
    "gpt_oss": (
        '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city"',
        '{"city"',
    ),
    # per parameter: the first parameter is sent when it closes
    "qwen3_coder": (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=da",
        '{"city": "Paris"',
    ),
    "glm4": (
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>da",
        '{"city": "Paris"',
    ),
    "minimax_m2": (
        '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n<para',
        '{"city": "Paris"',
    ),
    "seed_oss": (
        "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n<parameter=da",
        '{"city": "Paris"',
    ),
    "nemotron": ('<TOOLCALL>[{"name": "get_weather", "arguments": {"city": "Par', '{"city": "Par'),
    "deepseek_v32": (
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" '
        'string="true">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name="da',
        '{"city": "Paris"',
    ),
}


@pytest.mark.parametrize("fmt", sorted(PARTIAL))
def test_arguments_stream_before_the_call_ends(fmt):
    text, expected = PARTIAL[fmt]
    delta = get_parser(fmt)(TOOLS).feed(text)
    assert delta.calls and delta.calls[0].name == "get_weather" and delta.calls[0].id
    assert "".join(c.arguments for c in delta.calls) == expected


def test_dropped_call_is_not_in_the_result_and_later_calls_keep_going():
    text = (
        '<tool_call>{"name": "get_weather", "arguments": {"city": 1 2}}</tool_call>'
        '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>'
    )
    result, deltas = stream(get_parser("hermes"), [text[:50], text[50:]])
    content, calls = result
    assert content == '<tool_call>{"name": "get_weather", "arguments": {"city": 1 2}}</tool_call>'
    assert [c.name for c in calls] == ["get_time"]
    indices = {d.index for delta in deltas for d in delta.calls}
    assert indices == {0, 1}  # call 0 was announced, then given up; get_time is call 1
    check_stream(result, deltas)


@pytest.mark.parametrize("fmt", sorted(PARTIAL))
def test_whole_calls_never_announce_a_cut_off_call(fmt):
    text, _ = PARTIAL[fmt]
    parser = get_parser(fmt)(TOOLS)
    parser.whole_calls = True  # as the server's APIs parse: a client gets only calls it can run
    deltas = [parser.feed(text), parser.finish()]
    assert not any(d.calls for d in deltas)
    assert "".join(d.content for d in deltas) == text
    assert parser.result() == (text, [])


def test_whole_calls_release_each_call_at_once_with_contiguous_indices():
    text = (
        '<tool_call>{"name": "get_weather", "arguments": {"city": 1 2}}</tool_call>'
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    )
    parser = get_parser("hermes")(TOOLS)
    parser.whole_calls = True
    deltas = [parser.feed(ch) for ch in text] + [parser.finish()]
    calls = [c for d in deltas for c in d.calls]
    assert [(c.index, c.name, c.arguments) for c in calls] == [(0, "get_weather", '{"city": "Paris"}')]
    check_stream(parser.result(), deltas)


def test_ids_are_fresh_per_call_and_per_parse():
    text = "[TOOL_CALLS]get_time[ARGS]{}[TOOL_CALLS]get_time[ARGS]{}"
    ids = [c.id for _ in range(3) for c in get_parser("mistral").parse(text, TOOLS)[1]]
    assert len(ids) == 6 and len(set(ids)) == 6


def test_feed_after_finish_and_result_before_finish_are_errors():
    parser = get_parser("hermes")(None)
    with pytest.raises(RuntimeError):
        parser.result()
    parser.finish()
    assert parser.finish().content == ""  # idempotent
    with pytest.raises(RuntimeError):
        parser.feed("x")


# -- property tests ---------------------------------------------------------------------------

KEYS = st.from_regex(r"[a-z_][a-z0-9_]{0,7}", fullmatch=True).filter(
    lambda k: not keyword.iskeyword(k)
)
TEXT = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12
) | st.sampled_from(['a "quoted" \\ word', "ünï 東京 ✓", "line\nbreak\ttab", "{[<|>]}", ""])
SCALARS = (
    TEXT
    | st.integers(-(10**6), 10**6)
    | st.booleans()
    | st.none()
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=6,
)
ARGS = st.dictionaries(KEYS, VALUES, max_size=4)

_JSON_TYPES = {
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    list: "array",
    dict: "object",
    type(None): "null",
}


def _tools_for(args):
    properties = {k: {"type": _JSON_TYPES[type(v)]} for k, v in args.items()}
    return [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": properties},
            },
        }
    ]


def _gemma_value(value):
    if isinstance(value, str):
        return '<|"|>' + value + '<|"|>'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ",".join(_gemma_value(v) for v in value) + "]"
    return "{" + ",".join(f"{k}:{_gemma_value(v)}" for k, v in value.items()) + "}"


def _xml_value(value):
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _inline_value(value):
    """A value as Seed-OSS and MiniMax-M2 write it: inline, or between newlines when it starts or
    ends with one (their parsers drop one newline at each end as layout)."""
    text = _xml_value(value)
    return f"\n{text}\n" if text.startswith("\n") or text.endswith("\n") else text


def render(fmt, args):
    """One call of get_weather with ``args``, written in format ``fmt`` (None: not writable)."""
    j = json.dumps(args, ensure_ascii=False)
    if fmt == "hermes":
        return '<tool_call>\n{"name": "get_weather", "arguments": ' + j + "}\n</tool_call>"
    if fmt == "llama3_json":
        return '<|python_tag|>{"name": "get_weather", "parameters": ' + j + "}"
    if fmt == "mistral":
        return "[TOOL_CALLS]get_weather[ARGS]" + j
    if fmt == "granite":
        return '<|tool_call|>[{"name": "get_weather", "arguments": ' + j + "}]"
    if fmt == "deepseek_v3":
        return (
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
            + j
            + "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
        )
    if fmt == "kimi_k2":
        return (
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
            "<|tool_call_argument_begin|>" + j + "<|tool_call_end|><|tool_calls_section_end|>"
        )
    if fmt == "gpt_oss":
        return (
            "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
            + j
            + "<|call|>"
        )
    if fmt == "pythonic":
        return "[get_weather(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")]"
    if fmt == "qwen3_coder":
        params = "".join(
            f"<parameter={k}>\n{_xml_value(v)}\n</parameter>\n" for k, v in args.items()
        )
        return f"<tool_call>\n<function=get_weather>\n{params}</function>\n</tool_call>"
    if fmt == "glm4":
        params = "".join(
            f"<arg_key>{k}</arg_key><arg_value>{_xml_value(v)}</arg_value>" for k, v in args.items()
        )
        return f"<tool_call>get_weather{params}</tool_call>"
    if fmt == "gemma":
        return "<|tool_call>call:get_weather" + _gemma_value(args) + "<tool_call|>"
    if fmt == "minimax_m2":
        params = "".join(f'<parameter name="{k}">{_inline_value(v)}</parameter>\n' for k, v in args.items())
        return f'<minimax:tool_call>\n<invoke name="get_weather">\n{params}</invoke>\n</minimax:tool_call>'
    if fmt == "seed_oss":
        params = "".join(f"<parameter={k}>{_inline_value(v)}</parameter>\n" for k, v in args.items())
        return f"<seed:tool_call>\n<function=get_weather>\n{params}</function>\n</seed:tool_call>"
    if fmt == "nemotron":
        return '<TOOLCALL>[{"name": "get_weather", "arguments": ' + j + "}]</TOOLCALL>"
    if fmt == "deepseek_v32":
        params = "\n".join(
            f'<｜DSML｜parameter name="{k}" string="{str(isinstance(v, str)).lower()}">{_xml_value(v)}</｜DSML｜parameter>'
            for k, v in args.items()
        )
        return (f'<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n{params}\n</｜DSML｜invoke>\n'
                "</｜DSML｜function_calls>")
    raise AssertionError(fmt)


def _writable(fmt, args):
    """XML and Gemma values cannot hold their own closing tags (the formats have no escapes)."""
    strings = []

    def walk(v):
        if isinstance(v, str):
            strings.append(v)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)

    walk(args)
    forbidden = {
        "qwen3_coder": ["</parameter>", "<parameter=", "</function>", "</tool_call>"],
        "glm4": ["</arg_value>"],
        "minimax_m2": ["</parameter>", "<parameter name=", "</invoke>", "</minimax:tool_call>"],
        "seed_oss": ["</parameter>", "<parameter=", "</function>", "</seed:tool_call>"],
        "gemma": ['<|"|>', "<tool_call|>"],
        "deepseek_v32": ["</｜DSML｜parameter>"],
    }.get(fmt, [])
    return not any(f in s for s in strings for f in forbidden)


def _cuts(text, data):
    points = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=6)))
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fmt=st.sampled_from(sorted(names())),
    args=ARGS,
    before=st.sampled_from(["", "Sure. "]),
    data=st.data(),
)
def test_roundtrip_any_arguments_any_split(fmt, args, before, data):
    assume(_writable(fmt, args))
    if fmt in ("llama3_json", "pythonic"):
        before = ""  # the whole output must be the calls
    text = before + render(fmt, args)
    tools = _tools_for(args)
    expected = (before or None, [("get_weather", args)])
    assert normalized(get_parser(fmt).parse(text, tools)) == expected
    result, deltas = stream(get_parser(fmt), _cuts(text, data), tools)
    assert normalized(result) == expected
    check_stream(result, deltas)


PROSE = st.lists(
    st.sampled_from(
        list("ab {}[]()<>|\"':;,=\n\\`▁｜") + ["tool_call", "call:", "ARGS", "function"]
    ),
    max_size=30,
).map("".join)


@settings(max_examples=60, deadline=None)
@given(fmt=st.sampled_from(sorted(names())), pieces=st.lists(PROSE, max_size=5))
def test_prose_is_never_a_call(fmt, pieces):
    text = "".join(pieces)
    markers = START_MARKERS.get(fmt, [])
    assume(not any(m in text for m in markers))
    assert get_parser(fmt).parse(text, TOOLS) == (text, [])
    result, deltas = stream(get_parser(fmt), pieces)
    assert result == (text, [])
    check_stream(result, deltas)


MANGLE = st.sampled_from(list('{}[]"\\:,<>| \nx') + ["</tool_call>", "]", '<|"|>', "<|call|>"])


def _mangle(text, ops):
    for pos, op, piece in ops:
        pos = min(pos, len(text))
        if op == "cut":
            text = text[:pos]
        elif op == "del":
            text = text[:pos] + text[pos + 1 :]
        else:
            text = text[:pos] + piece + text[pos:]
    return text


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fmt=st.sampled_from(sorted(names())),
    args=ARGS,
    data=st.data(),
    ops=st.lists(
        st.tuples(st.integers(0, 400), st.sampled_from(["cut", "del", "ins"]), MANGLE),
        min_size=1,
        max_size=3,
    ),
)
def test_mangled_output_is_consistent_and_nothing_is_lost(fmt, args, data, ops):
    assume(_writable(fmt, args))
    text = _mangle(render(fmt, args) + render(fmt, args), ops)
    tools = _tools_for(args)
    whole = get_parser(fmt).parse(text, tools)
    result, deltas = stream(get_parser(fmt), _cuts(text, data), tools)
    assert normalized(result) == normalized(whole)
    check_stream(result, deltas)
    if fmt != "gpt_oss" and not any(delta.calls for delta in deltas):
        assert result == (text, [])  # no call was ever announced: all of it is content
