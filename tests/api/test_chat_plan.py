"""chat_plan (tools, tool choice, output formats, plans, template messages, constraints) and
chat_split's OutputSplitter with real parsers, without a model."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from mlxctl.api import chat_plan as cp
from mlxctl.api.chat_plan import ChatPlan, ModelFormats, OutputFormat, ToolChoice
from mlxctl.api.chat_split import OutputSplitter, new_splitter
from mlxctl.api.reasoning import ThinkParser
from mlxctl.api.toolcalls import get_parser, names
from mlxctl.api.toolcalls.hermes import HermesParser
from mlxctl.api.toolcalls.schema_relax import enforceable_tools
from mlxctl.engine.constraints import ConstraintSpec
from mlxctl.engine.sampling import SamplingParams
from mlxctl.errors import BadInputError

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": SCHEMA}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
TOOLS = [WEATHER, TIME]
PLAIN = ModelFormats()  # a template without tools or thinking: Hermes system prompt, hermes parser
QWEN = ModelFormats("hermes", "think", True)
USER = {"role": "user", "content": "Weather in Paris?"}
AUTO = ToolChoice("auto")


def fails(call, *words: str) -> str:
    with pytest.raises(BadInputError) as err:
        call()
    for word in words:
        assert word in err.value.message, err.value.message
    return err.value.message


# -- tools, per API ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("given", "expected"), [
    (None, []),
    ([], []),
    ([WEATHER], [WEATHER]),
    ([{"type": "function", "function": {"name": "f"}}],  # no parameters: an empty object schema
     [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]),
    ([{"type": "function", "function": {"name": "a.b-c_1", "parameters": SCHEMA, "strict": True, "description": ""}}],
     [{"type": "function", "function": {"name": "a.b-c_1", "parameters": SCHEMA, "strict": True}}]),  # empty description dropped
    ([{"type": "function", "function": {"name": "f", "parameters": SCHEMA, "strict": False}}],
     [{"type": "function", "function": {"name": "f", "parameters": SCHEMA}}]),
])
def test_openai_tools(given, expected):
    assert cp.openai_tools(given) == expected


@pytest.mark.parametrize(("given", "words"), [
    (["get_weather"], ["tools[0]", '"type": "function"']),
    ([WEATHER, {"type": "code_interpreter"}], ["tools[1]", '"type": "function"']),
    ([{"type": "function"}], ["tools[0]"]),
    ([{"type": "function", "function": {"parameters": SCHEMA}}], ["tools[0].function.name", "None"]),
    ([{"type": "function", "function": {"name": ""}}], ["tools[0].function.name"]),
    ([{"type": "function", "function": {"name": "get weather"}}], ["tools[0].function.name", "'get weather'"]),
    ([{"type": "function", "function": {"name": "x" * 65}}], ["tools[0].function.name", "1-64"]),
    ([{"type": "function", "function": {"name": "f", "parameters": "object"}}],
     ["tools[0].function.parameters", "JSON schema object"]),
    ([WEATHER, {"type": "function", "function": {"name": "f", "parameters": {"type": "nonsense"}}}],
     ["tools[1].function.parameters", "not a valid JSON schema"]),
    ([{"type": "function", "function": {"name": "f", "parameters": {"required": "city"}}}],
     ["tools[0].function.parameters", "not a valid JSON schema"]),
    ([WEATHER, WEATHER], ["two tools", "'get_weather'"]),
])
def test_openai_tools_refused(given, words):
    fails(lambda: cp.openai_tools(given), *words)


def test_responses_tools_are_flat():
    given = [{"type": "function", "name": "get_weather", "description": "Weather", "parameters": SCHEMA, "strict": True},
             {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}}]
    strict_weather = {"type": "function", "function": {**WEATHER["function"], "strict": True}}
    assert cp.responses_tools(given) == [strict_weather, TIME]


def test_anthropic_tools_keep_strict():
    given = [{"name": "get_weather", "description": "Weather", "input_schema": SCHEMA, "strict": True}]
    assert cp.anthropic_tools(given)[0]["function"]["strict"] is True


def test_the_hermes_system_prompt_does_not_show_strict():
    strict = [{"type": "function", "function": {**WEATHER["function"], "strict": True}}]
    system = cp.template_messages(plan(tools=strict), PLAIN, [USER])[0][0]["content"]
    assert "strict" not in system and '"name": "get_weather"' in system


@pytest.mark.parametrize(("given", "words"), [
    ([{"type": "frobnicate"}], ["tools[0]", "only function, namespace and hosted tools", "'frobnicate'"]),
    ([WEATHER["function"]], ["tools[0]", "None"]),  # a bare function without its type
    (["f"], ["tools[0]", "'str'"]),
    ([{"type": "function", "parameters": SCHEMA}], ["tools[0].name"]),
    ([{"type": "function", "name": "f"}, {"type": "function", "name": "g", "parameters": {"type": 3}}],
     ["tools[1].parameters", "not a valid JSON schema"]),
    ([{"type": "function", "name": "f"}, {"type": "function", "name": "f"}], ["two tools", "'f'"]),
])
def test_responses_tools_refused(given, words):
    fails(lambda: cp.responses_tools(given), *words)


@pytest.mark.parametrize("kind", [{}, {"type": "custom"}])
def test_anthropic_tools_take_input_schema(kind):
    given = [{**kind, "name": "get_weather", "description": "Weather", "input_schema": SCHEMA,
              "cache_control": {"type": "ephemeral"}},
             {"name": "get_time", "input_schema": {"type": "object", "properties": {}}}]
    assert cp.anthropic_tools(given) == TOOLS


@pytest.mark.parametrize(("given", "words"), [
    ([{"type": "bash_20250124", "name": "bash"}], ["tools[0]", "custom", "'bash_20250124'"]),
    ([{"name": "f", "input_schema": SCHEMA}, {"name": "g"}], ["tools[1].input_schema is required"]),
    ([{"name": "f", "parameters": SCHEMA}], ["tools[0].input_schema is required"]),
    ([{"name": "bad name", "input_schema": SCHEMA}], ["tools[0].name"]),
    ([{"name": "f", "input_schema": {"type": "nonsense"}}], ["tools[0].parameters", "not a valid JSON schema"]),
    ([{"name": "f", "input_schema": SCHEMA}, {"name": "f", "input_schema": SCHEMA}], ["two tools"]),
])
def test_anthropic_tools_refused(given, words):
    fails(lambda: cp.anthropic_tools(given), *words)


# -- tool choice --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("choice", "tools", "expected"), [
    (None, TOOLS, ToolChoice("auto")),
    (None, [], ToolChoice("none")),
    ("auto", TOOLS, ToolChoice("auto")),
    ("auto", [], ToolChoice("auto")),
    ("none", TOOLS, ToolChoice("none")),
    ("required", TOOLS, ToolChoice("required")),
    ({"type": "function", "function": {"name": "get_time"}}, TOOLS, ToolChoice("named", "get_time")),  # chat
    ({"type": "function", "name": "get_time"}, TOOLS, ToolChoice("named", "get_time")),  # responses
])
def test_openai_choice(choice, tools, expected):
    assert cp.openai_choice(choice, tools) == expected


@pytest.mark.parametrize(("choice", "tools", "words"), [
    ("required", [], ["requires a tool call", "no tools"]),
    ({"type": "function", "function": {"name": "nope"}}, TOOLS, ["'nope'", "get_weather, get_time"]),
    ({"type": "function", "name": "nope"}, [], ["'nope'", "none given"]),
    ("any", TOOLS, ["tool_choice must be", "'any'"]),
    ({"type": "tool", "name": "get_time"}, TOOLS, ["tool_choice must be"]),
])
def test_openai_choice_refused(choice, tools, words):
    fails(lambda: cp.openai_choice(choice, tools), *words)


@pytest.mark.parametrize(("choice", "tools", "expected"), [
    (None, TOOLS, ToolChoice("auto")),
    (None, [], ToolChoice("none")),
    ({"type": "auto"}, TOOLS, ToolChoice("auto")),
    ({"type": "auto", "disable_parallel_tool_use": True}, TOOLS, ToolChoice("auto")),
    ({"type": "any"}, TOOLS, ToolChoice("required")),
    ({"type": "none"}, TOOLS, ToolChoice("none")),
    ({"type": "tool", "name": "get_weather"}, TOOLS, ToolChoice("named", "get_weather")),
])
def test_anthropic_choice(choice, tools, expected):
    assert cp.anthropic_choice(choice, tools) == expected


@pytest.mark.parametrize(("choice", "tools", "words"), [
    ({"type": "any"}, [], ["no tools"]),
    ({"type": "tool", "name": "nope"}, TOOLS, ["'nope'"]),
    ({"type": "tool"}, TOOLS, ["None"]),
    ({"type": "required"}, TOOLS, ["tool_choice.type", "'required'"]),
])
def test_anthropic_choice_refused(choice, tools, words):
    fails(lambda: cp.anthropic_choice(choice, tools), *words)


def test_uses_tools():
    assert ChatPlan(TOOLS, ToolChoice("auto")).uses_tools
    assert not ChatPlan(TOOLS, ToolChoice("none")).uses_tools
    assert not ChatPlan([], ToolChoice("auto")).uses_tools


# -- output formats -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("fmt", "expected"), [
    (None, None),
    ({"type": "text"}, None),
    ({"type": "json_object"}, OutputFormat("json_object")),
    ({"type": "json_schema", "json_schema": {"name": "c", "schema": SCHEMA, "strict": True}},
     OutputFormat("json_schema", json.dumps(SCHEMA), True)),
    ({"type": "json_schema", "json_schema": {"name": "c", "schema": SCHEMA}},
     OutputFormat("json_schema", json.dumps(SCHEMA), False)),
    ({"type": "json_schema", "json_schema": {"name": "c"}}, OutputFormat("json_schema", "{}", False)),
])
def test_openai_response_format(fmt, expected):
    assert cp.openai_response_format(fmt) == expected


@pytest.mark.parametrize(("fmt", "words"), [
    ({"type": "json_schema"}, ["response_format.json_schema"]),
    ({"type": "json_schema", "json_schema": {"schema": "object"}}, ["response_format.json_schema"]),
    ({"type": "xml"}, ["response_format.type", "'xml'"]),
    ({}, ["response_format.type", "None"]),
])
def test_openai_response_format_refused(fmt, words):
    fails(lambda: cp.openai_response_format(fmt), *words)


@pytest.mark.parametrize(("fmt", "expected"), [
    (None, None),
    ({"type": "text"}, None),
    ({"type": "json_object"}, OutputFormat("json_object")),
    ({"type": "json_schema", "name": "c", "schema": SCHEMA, "strict": True},
     OutputFormat("json_schema", json.dumps(SCHEMA), True)),
    ({"type": "json_schema", "name": "c", "schema": SCHEMA}, OutputFormat("json_schema", json.dumps(SCHEMA), False)),
])
def test_responses_text_format(fmt, expected):
    assert cp.responses_text_format(fmt) == expected


@pytest.mark.parametrize(("fmt", "words"), [
    ({"type": "json_schema", "schema": ["object"]}, ["text.format.schema"]),
    ({"type": "yaml"}, ["text.format.type", "'yaml'"]),
])
def test_responses_text_format_refused(fmt, words):
    fails(lambda: cp.responses_text_format(fmt), *words)


@pytest.mark.parametrize(("spec", "expected"), [
    (None, None),
    ({}, None),
    ({"json": SCHEMA}, OutputFormat("json_schema", json.dumps(SCHEMA))),
    ({"json": '{"type": "object"}'}, OutputFormat("json_schema", '{"type": "object"}')),
    ({"regex": r"\d{3}-\d{4}"}, OutputFormat("regex", r"\d{3}-\d{4}")),
    ({"grammar": 'start: "a"'}, OutputFormat("lark", 'start: "a"')),
    ({"choice": ["yes", "no"]}, OutputFormat("lark", 'start: "yes" | "no"')),
    ({"choice": ['say "hi"']}, OutputFormat("lark", r'start: "say \"hi\""')),
    ({"regex": "a", "choice": None}, OutputFormat("regex", "a")),  # None counts as not given
])
def test_structured_outputs(spec, expected):
    assert cp.structured_outputs(spec) == expected


@pytest.mark.parametrize(("spec", "words"), [
    ({"regex": "a", "choice": ["a"]}, ["exactly one of json, regex, grammar or choice"]),
    ({"json_schema": SCHEMA}, ["unknown key", "'json_schema'"]),
    ({"choice": None}, ["exactly one"]),
    ({"choice": []}, ["structured_outputs.choice", "non-empty list of strings"]),
    ({"choice": ["a", 1]}, ["structured_outputs.choice"]),
    ({"choice": "yes"}, ["structured_outputs.choice"]),
    ({"regex": ""}, ["structured_outputs.regex", "non-empty string"]),
    ({"grammar": ["start"]}, ["structured_outputs.grammar", "non-empty string"]),
])
def test_structured_outputs_refused(spec, words):
    fails(lambda: cp.structured_outputs(spec), *words)


# -- make_plan --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("formats", "tools", "choice", "parser"), [
    (PLAIN, TOOLS, ToolChoice("auto"), "hermes"),  # the default, with a tools system prompt
    (ModelFormats("llama3_json"), TOOLS, ToolChoice("required"), "llama3_json"),
    (QWEN, TOOLS, ToolChoice("named", "get_time"), "hermes"),
    (QWEN, TOOLS, ToolChoice("none"), None),  # nothing to parse
    (QWEN, [], ToolChoice("auto"), None),
])
def test_make_plan_picks_the_tool_parser(formats, tools, choice, parser):
    plan = cp.make_plan(formats, tools, choice, None)
    assert (plan.tool_parser, plan.reasoning_parser, plan.choice) == (parser, formats.reasoning_parser, choice)


@pytest.mark.parametrize("mode", ["auto", "none"])
def test_make_plan_keeps_a_format_beside_optional_tools(mode):
    plan = cp.make_plan(PLAIN, TOOLS, ToolChoice(mode), OutputFormat("regex", "a"))
    assert plan.output_format == OutputFormat("regex", "a")


def test_make_plan_thinking_budget_needs_a_reasoning_format():
    fails(lambda: cp.make_plan(PLAIN, [], ToolChoice("none"), None, thinking_budget=0),
          "thinking budget", "no reasoning format")
    assert cp.make_plan(QWEN, [], ToolChoice("none"), None, thinking_budget=0).thinking_budget == 0


@pytest.mark.parametrize(("choice", "parallel", "expected"), [
    (ToolChoice("required"), True, True),
    (ToolChoice("required"), False, False),
    (ToolChoice("named", "get_time"), True, False),  # a named tool is called once
    (ToolChoice("auto"), True, False),  # nothing is forced
])
def test_make_plan_parallel_only_widens_a_required_call(choice, parallel, expected):
    assert cp.make_plan(PLAIN, TOOLS, choice, None, parallel=parallel).parallel is expected


def test_make_plan_copies_template_kwargs():
    kwargs = {"enable_thinking": False}
    plan = cp.make_plan(QWEN, [], ToolChoice("none"), None, template_kwargs=kwargs)
    kwargs["enable_thinking"] = True
    assert plan.template_kwargs == {"enable_thinking": False}


# -- formats of a model --------------------------------------------------------------------------------

QWEN3_TEMPLATE = ("{%- if tools %}<tools>{% for tool in tools %}{{ tool | tojson }}{% endfor %}</tools>"
                  "<tool_call>{%- endif %}{{ '<think>' }}...</think>")
GPT_OSS_TEMPLATE = "{% if tools %}...{% endif %}<|start|>assistant<|channel|>analysis<|message|>"
CHATML = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
SEED_OSS_TEMPLATE = ("{%- if tools %}...{%- endif %}{{ '<seed:tool_call>\\n<function=' + name + '>\\n' }}"
                     "{{ '<seed:bos>assistant\\n<seed:think>' }}")


@pytest.mark.parametrize(("template", "flags", "expected"), [
    (QWEN3_TEMPLATE, {}, ModelFormats("hermes", "think", True)),
    ({"default": CHATML, "tool_use": QWEN3_TEMPLATE}, {}, ModelFormats("hermes", "think", True)),
    (GPT_OSS_TEMPLATE, {}, ModelFormats("gpt_oss", "gpt_oss", True)),
    (SEED_OSS_TEMPLATE, {}, ModelFormats("seed_oss", "seed_oss", True)),
    (CHATML, {}, ModelFormats(None, None, False)),
    (None, {}, ModelFormats(None, None, False)),
    (QWEN3_TEMPLATE, {"tool_flag": "none", "reasoning_flag": "none"}, ModelFormats(None, None, True)),
    (CHATML, {"tool_flag": "mistral", "reasoning_flag": "deepseek_r1"}, ModelFormats("mistral", "deepseek_r1", False)),
])
def test_model_formats_detect(template, flags, expected):
    assert ModelFormats.detect(SimpleNamespace(chat_template=template), **flags) == expected


@pytest.mark.parametrize(("flags", "words"), [
    ({"tool_flag": "hermes2"}, ["unknown tool-call parser", "'hermes2'"]),
    ({"reasoning_flag": "thinky"}, ["unknown reasoning parser", "'thinky'"]),
])
def test_model_formats_detect_refuses_unknown_flags(flags, words):
    fails(lambda: ModelFormats.detect(SimpleNamespace(chat_template=CHATML), **flags), *words)


def test_model_formats_as_dict_reports_the_default_parser():
    assert PLAIN.as_dict() == {"tool_call_parser": "hermes", "tool_call_parser_detected": False,
                               "reasoning_parser": None, "template_renders_tools": False}
    assert QWEN.as_dict()["tool_call_parser_detected"] is True


# -- template messages ------------------------------------------------------------------------------------

CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
HISTORY = [{"role": "system", "content": "Be brief."}, USER,
           {"role": "assistant", "content": "", "tool_calls": [CALL]},
           {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"}]
HERMES_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def plan(formats=PLAIN, tools=TOOLS, choice=AUTO, **kw) -> ChatPlan:
    return cp.make_plan(formats, tools, choice, None, **kw)


def test_a_template_with_tools_gets_them_as_kwargs():
    p = plan(QWEN, template_kwargs={"enable_thinking": False})
    messages, kwargs = cp.template_messages(p, QWEN, HISTORY)
    assert messages == HISTORY  # calls and results rendered by the template itself
    assert kwargs == {"enable_thinking": False, "tools": TOOLS}


def test_a_template_without_tools_gets_a_hermes_system_prompt():
    messages, kwargs = cp.template_messages(plan(), PLAIN, [USER])
    assert kwargs == {}
    system, user = messages
    assert user == USER and system["role"] == "system"
    listed = system["content"].split("<tools>\n")[1].split("\n</tools>")[0].splitlines()
    assert [json.loads(line) for line in listed] == [t["function"] for t in TOOLS]
    assert "<tool_call></tool_call>" in system["content"]


def test_the_hermes_system_prompt_keeps_the_callers_system_prompt_first():
    messages, _ = cp.template_messages(plan(), PLAIN, HISTORY[:2])
    assert len(messages) == 2 and messages[1] == USER
    assert messages[0]["content"].startswith("Be brief.\n\nYou can call functions.")


def test_calls_and_results_are_flattened_for_a_template_without_tools():
    messages, _ = cp.template_messages(plan(), PLAIN, HISTORY)
    assert messages[1:] == [
        USER,
        {"role": "assistant", "content": HERMES_CALL},
        {"role": "tool", "content": "<tool_response>\nSunny\n</tool_response>"},
    ]


def test_flattening_keeps_the_assistant_text_and_every_call():
    second = {**CALL, "function": {"name": "get_time", "arguments": {}}}
    turn = {"role": "assistant", "content": "Checking.", "tool_calls": [CALL, second]}
    messages, _ = cp.template_messages(plan(), PLAIN, [USER, turn])
    assert messages[2]["content"] == (f"Checking.\n{HERMES_CALL}\n"
                                      '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>')


@pytest.mark.parametrize(("tools", "choice"), [(TOOLS, ToolChoice("none")), ([], ToolChoice("none"))])
def test_without_tools_in_play_nothing_is_described_but_history_is_flattened(tools, choice):
    p = plan(tools=tools, choice=choice, template_kwargs={"x": 1})
    messages, kwargs = cp.template_messages(p, PLAIN, HISTORY)
    assert kwargs == {"x": 1}
    assert messages[0] == HISTORY[0] and messages[2]["content"] == HERMES_CALL
    assert "tool_calls" not in messages[2] and "tool_call_id" not in messages[3]
    messages, kwargs = cp.template_messages(p, QWEN, HISTORY)
    assert messages == HISTORY and "tools" not in kwargs


# -- constraint_for ---------------------------------------------------------------------------------------


def test_required_call_is_a_hermes_lark_grammar():
    spec = cp.constraint_for(plan(choice=ToolChoice("required")))
    assert isinstance(spec, ConstraintSpec)
    assert (spec.kind, spec.strict, spec.activate_after) == ("lark", True, None)
    assert spec.value == get_parser("hermes").forcing_grammar(enforceable_tools(TOOLS, None), None, False)
    assert '"<tool_call>\\n"' in spec.value and "get_weather" in spec.value and "get_time" in spec.value
    spec.check()


def test_forced_calls_match_one_token_markers_by_id_and_output_formats_do_not():
    thinking = cp.make_plan(QWEN, TOOLS, ToolChoice("required"), None)
    assert cp.constraint_for(plan(choice=ToolChoice("required"))).token_markers
    assert cp.constraint_for(thinking).token_markers  # the thinking grammar around the call too
    lark = cp.make_plan(PLAIN, [], ToolChoice("none"), OutputFormat("lark", 'start: "<tool_call>"'))
    assert not cp.constraint_for(lark).token_markers  # a user's grammar is compiled as written


def test_named_call_allows_only_that_tool():
    spec = cp.constraint_for(plan(choice=ToolChoice("named", "get_time")))
    assert "get_time" in spec.value and "get_weather" not in spec.value


def test_llama3_json_model_gets_its_own_grammar():
    spec = cp.constraint_for(plan(ModelFormats("llama3_json"), choice=ToolChoice("required")))
    assert spec.value == get_parser("llama3_json").forcing_grammar(enforceable_tools(TOOLS, None), None, False)
    assert "<tool_call>" not in spec.value


def test_every_tool_call_format_has_a_forcing_grammar():
    assert all(callable(getattr(get_parser(fmt), "forcing_grammar", None)) for fmt in names())


@pytest.mark.parametrize("fmt", names())
def test_each_format_forces_calls_with_its_own_grammar(fmt):
    for choice, parallel in ((ToolChoice("required"), True), (ToolChoice("named", "get_time"), False)):
        spec = cp.constraint_for(plan(ModelFormats(fmt), choice=choice, parallel=parallel))
        tools = enforceable_tools(TOOLS, choice.name)  # objects closed (schema_relax)
        expected = get_parser(fmt).forcing_grammar(tools, choice.name, choice.mode == "required" and parallel)
        assert (spec.kind, spec.value, spec.activate_after) == ("lark", expected, None)
        spec.check()


@pytest.mark.parametrize("choice", [ToolChoice("required"), ToolChoice("named", "f")])
def test_a_forced_call_the_format_cannot_write_is_refused(choice):
    # a pythonic call is a Python call: a parameter named `class` cannot be written
    tool = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"class": {"type": "string"}}, "required": ["class"]}}}
    p = cp.make_plan(ModelFormats("pythonic"), [tool], choice, None)
    fails(lambda: cp.constraint_for(p), "pythonic", "'f'", "parameter 'class'", "not a Python identifier")


@pytest.mark.parametrize(("p", "expected"), [
    (plan(choice=ToolChoice("auto")), None),
    (plan(tools=[], choice=ToolChoice("none")), None),
    (cp.make_plan(PLAIN, [], ToolChoice("none"), OutputFormat("regex", r"\d+")), ConstraintSpec("regex", r"\d+")),
    (cp.make_plan(PLAIN, TOOLS, ToolChoice("auto"), OutputFormat("json_schema", "{}", False)),
     ConstraintSpec("json_schema", "{}", False)),
    (cp.make_plan(PLAIN, TOOLS, ToolChoice("none"), OutputFormat("json_object")), ConstraintSpec("json_object")),
])
def test_output_format_constraints(p, expected):
    assert cp.constraint_for(p) == expected


@pytest.mark.parametrize(("formats", "kwargs", "thinking_grammar", "after"), [
    (QWEN, {}, True, None),  # text markers: the grammar covers an optional thinking block itself
    (QWEN, {"enable_thinking": True}, True, None),
    (QWEN, {"enable_thinking": None}, True, None),  # only False switches thinking off
    (QWEN, {"enable_thinking": False}, False, None),
    (ModelFormats("hermes", "gpt_oss", True), {}, False, "<|channel|>final<|message|>"),  # special tokens: wait
    (ModelFormats("hermes", "mistral"), {"reasoning_effort": "low"}, True, None),
    (PLAIN, {}, False, None),
    (PLAIN, {"enable_thinking": True}, False, None),  # no reasoning parser: nothing to wait for
])
@pytest.mark.parametrize("what", ["required", "format"])
def test_constraints_and_thinking(formats, kwargs, thinking_grammar, after, what):
    if what == "required":
        p = cp.make_plan(formats, TOOLS, ToolChoice("required"), None, template_kwargs=kwargs)
    else:
        p = cp.make_plan(formats, [], ToolChoice("none"), OutputFormat("json_object"), template_kwargs=kwargs)
    spec = cp.constraint_for(p)
    assert spec.activate_after == after
    assert (spec.kind == "lark" and ("\nthink[" in spec.value or "\nthink:" in spec.value)) == thinking_grammar


HARMONY = ModelFormats("gpt_oss", "gpt_oss", True)
HARMONY_CALL = '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}'
ANALYSIS = "<|channel|>analysis<|message|>The user wants the weather.<|end|><|start|>assistant"


def test_a_harmony_forced_call_may_follow_an_analysis_message():
    p = cp.make_plan(HARMONY, TOOLS, ToolChoice("required"), None)
    spec = cp.constraint_for(p)
    assert (spec.kind, spec.activate_after) == ("lark", None)  # calls never follow <|channel|>final
    assert _accepts(spec.value, HARMONY_CALL)
    assert _accepts(spec.value, ANALYSIS + HARMONY_CALL)
    assert not _accepts(spec.value, "<|channel|>analysis<|message|>a<|end|>b<|end|><|start|>assistant" + HARMONY_CALL)
    assert not _accepts(spec.value, "<|channel|>final<|message|>It is sunny.")
    assert not _accepts(spec.value, ANALYSIS)  # the call is required
    opened = cp.constraint_for(p, reasoning_open=True).value  # the prompt ends inside an analysis message
    assert _accepts(opened, ANALYSIS.removeprefix("<|channel|>analysis<|message|>") + HARMONY_CALL)
    assert not _accepts(opened, HARMONY_CALL)
    # a structured format still waits for the final channel
    fmt = cp.constraint_for(cp.make_plan(HARMONY, [], ToolChoice("none"), OutputFormat("json_object")))
    assert fmt.activate_after == "<|channel|>final<|message|>"


def test_a_prompt_that_opened_thinking_makes_the_thinking_block_mandatory():
    p = cp.make_plan(QWEN, [], ToolChoice("none"), OutputFormat("json_object"))
    optional, opened = cp.constraint_for(p).value, cp.constraint_for(p, reasoning_open=True).value
    assert _accepts(optional, '{"a": 1}') and _accepts(optional, '<think>\nHmm.\n</think>\n\n{"a": 1}')
    assert not _accepts(opened, '{"a": 1}')
    assert _accepts(opened, 'Hmm, JSON.\n</think>\n\n{"a": 1}')
    assert not _accepts(opened, 'Hmm.</think>{"a": 1} and more')


@pytest.mark.parametrize("formats", [QWEN, ModelFormats("hermes", "mistral"), ModelFormats("hermes", "deepseek_r1"),
                                     ModelFormats("hermes", "seed_oss")])
def test_a_model_may_close_its_thinking_itself_before_the_enforced_answer(formats):
    # The thinking lexeme ends at the first end marker: a greedy one would swallow the marker's
    # first characters and refuse the model's own end of thinking.
    from mlxctl.api import reasoning

    parser = reasoning.get_parser(formats.reasoning_parser)
    opener, end = parser.open_markers[0], parser.end_marker
    spec = cp.constraint_for(cp.make_plan(formats, TOOLS, ToolChoice("required"), None))
    thought = f"{opener}The user wants the weather; get_weather it is.{end}\n\n"
    assert _accepts(spec.value, thought + HERMES_CALL)
    assert _accepts(spec.value, HERMES_CALL)
    assert not _accepts(spec.value, thought + "It is sunny.")
    assert not _accepts(spec.value, f"{opener}a{end}b{end}" + HERMES_CALL)  # thinking ends at its first end


def test_a_thinking_budget_forces_the_end_marker_after_n_tokens():
    spec = cp.constraint_for(cp.make_plan(QWEN, [], ToolChoice("none"), OutputFormat("json_object"),
                                          thinking_budget=5))
    assert _accepts(spec.value, '<think>hello</think>{"a": 1}')  # 5 byte-tokens, then the marker
    assert not _accepts(spec.value, '<think>hello world</think>{"a": 1}')


def test_with_plan_sets_the_constraint_only_when_there_is_one():
    params = SamplingParams(max_tokens=5, temperature=0)
    assert cp.with_plan(params, plan()) is params
    forced = cp.with_plan(params, plan(choice=ToolChoice("required")))
    assert forced.constraint.kind == "lark" and (forced.max_tokens, forced.temperature) == (5, 0)


@pytest.mark.parametrize(("formats", "kept"), [
    (ModelFormats("minimax_m2", "think"), True),  # <minimax:tool_call> is a special token
    (ModelFormats("hermes", "seed_oss"), True),  # so is <seed:think>
    (ModelFormats("seed_oss", None), True),
    (ModelFormats("nemotron", "think"), False),  # <TOOLCALL> is plain text in Nemotron's vocabulary
    (QWEN, False),
])
def test_formats_whose_markers_are_special_tokens_keep_them_in_the_text(formats, kept):
    params = cp.with_plan(SamplingParams(max_tokens=5), cp.make_plan(formats, TOOLS, AUTO, None))
    assert params.skip_special_tokens is not kept


llg = pytest.importorskip("llguidance")


class _ByteTokenizer:
    """One token per byte, so any text can be fed to a matcher."""

    eos_token_id = 256
    bos_token_id = None
    tokens = tuple([bytes([i]) for i in range(256)] + [b"<eos>"])
    special_token_ids = (256,)

    def __call__(self, text):
        return list(text.encode() if isinstance(text, str) else text)


def _accepts(grammar: str, text: str) -> bool:
    tokenizer = llg.LLTokenizer(llg.TokenizerWrapper(_ByteTokenizer()))
    matcher = llg.LLMatcher(tokenizer, llg.LLMatcher.grammar_from_lark(grammar), log_level=0)
    assert not matcher.is_error(), matcher.get_error()
    return bool(matcher.consume_tokens(list(text.encode()))) and not matcher.is_error() and matcher.is_accepting()


@pytest.mark.parametrize("parallel", [False, True])
def test_a_forced_call_is_one_call_unless_parallel(parallel):
    spec = cp.constraint_for(plan(choice=ToolChoice("required"), parallel=parallel))
    one = HERMES_CALL
    two = f'{HERMES_CALL}\n<tool_call>\n{{"name": "get_time", "arguments": {{}}}}\n</tool_call>'
    assert _accepts(spec.value, one)
    assert _accepts(spec.value, two) is parallel
    assert not _accepts(spec.value, "It is sunny.")
    assert not _accepts(spec.value, '<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>')  # no city


# -- OutputSplitter with real parsers -------------------------------------------------------------------

THOUGHT_AND_CALL = ('<think>\nThe user wants the weather.\n</think>\n\nLet me check. '
                    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>')


def split_all(splitter: OutputSplitter, pieces) -> tuple:
    """Feed the pieces, finish; return (streamed reasoning, content, {index: (name, args)}, result)."""
    steps = [splitter.feed(p) for p in pieces] + [splitter.finish()]
    calls: dict[int, list] = {}
    for step in steps:
        for d in step.calls:
            if d.id is not None:
                assert d.index not in calls and d.name
                calls[d.index] = [d.name, ""]
            calls[d.index][1] += d.arguments
    streamed = ("".join(s.reasoning for s in steps), "".join(s.content for s in steps),
                {i: tuple(c) for i, c in calls.items()})
    return streamed, splitter.result()


def shape(result) -> tuple:
    return result.reasoning, result.content, [(c.name, json.loads(c.arguments)) for c in result.calls]


def both() -> OutputSplitter:
    return OutputSplitter(ThinkParser(), HermesParser(TOOLS))


def test_reasoning_then_text_then_a_call():
    streamed, result = split_all(both(), [THOUGHT_AND_CALL])
    assert shape(result) == ("The user wants the weather.\n", "\nLet me check. ",
                             [("get_weather", {"city": "Paris"})])
    assert streamed == (result.reasoning, result.content, {0: ("get_weather", result.calls[0].arguments)})


@pytest.mark.parametrize("text", [
    THOUGHT_AND_CALL,
    "<think>Short.</think>The answer is 4.",
    "No thinking at all, <tool_call> almost.",
    f"<think>\nhmm <tool_call> is not a call in here\n</think>{HERMES_CALL}\n{HERMES_CALL}",
])
def test_every_split_gives_the_same_result(text):
    _, whole = split_all(both(), [text])
    expected = shape(whole)
    cuts = [[text[:i], text[i:]] for i in range(len(text) + 1)] + [list(text)]
    for pieces in cuts:
        streamed, result = split_all(both(), pieces)
        assert shape(result) == expected, pieces
        assert streamed[0] == (result.reasoning or "")
        assert streamed[1] == (result.content or "") or (result.content is None and not streamed[1].strip())
        assert [streamed[2][i] for i in sorted(streamed[2])] == [(c.name, c.arguments) for c in result.calls]


GEMMA4_THOUGHT_AND_CALL = ('<|channel>thought\nThe user wants <|tool_call> the weather.<channel|>'
                           '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>')


@pytest.mark.parametrize("text", [GEMMA4_THOUGHT_AND_CALL, "<|channel>thought\nShort.<channel|>It is 4.", "No thought."])
def test_gemma4_thinking_and_calls_at_every_split(text):
    from mlxctl.api.reasoning import Gemma4Parser
    from mlxctl.api.toolcalls.gemma import GemmaParser

    def gemma4() -> OutputSplitter:
        return OutputSplitter(Gemma4Parser(), GemmaParser(TOOLS))

    expected = shape(split_all(gemma4(), [text])[1])
    if text == GEMMA4_THOUGHT_AND_CALL:
        assert expected == ("The user wants <|tool_call> the weather.", None, [("get_weather", {"city": "Paris"})])
    for pieces in [[text[:i], text[i:]] for i in range(len(text) + 1)] + [list(text)]:
        streamed, result = split_all(gemma4(), pieces)
        assert shape(result) == expected, pieces
        assert streamed[0] == (result.reasoning or "")


def test_a_tool_marker_inside_thinking_is_reasoning():
    _, result = split_all(both(), ["<think>\nhmm <tool_call> is not a call in here\n</think>Done."])
    assert shape(result) == ("hmm <tool_call> is not a call in here\n", "Done.", [])


def test_passthrough_without_parsers():
    splitter = OutputSplitter()
    assert splitter.passthrough
    streamed, result = split_all(splitter, ["<think>a</think>", HERMES_CALL])
    assert shape(result) == (None, "<think>a</think>" + HERMES_CALL, [])
    assert streamed[1] == result.content


def test_new_splitter_follows_the_plan():
    assert new_splitter(None, False).passthrough
    p = plan(QWEN, choice=ToolChoice("auto"))
    _, result = split_all(new_splitter(p, reasoning_open=True), ["Thinking.</think>" + HERMES_CALL])
    assert shape(result) == ("Thinking.", None, [("get_weather", {"city": "Paris"})])
    _, result = split_all(new_splitter(p, reasoning_open=False), ["Thinking.</think>Hi"])
    assert shape(result) == (None, "Thinking.</think>Hi", [])  # a stray close marker is content
    only_reasoning = cp.make_plan(QWEN, [], ToolChoice("none"), None)
    splitter = new_splitter(only_reasoning, reasoning_open=False)
    assert splitter.tools is None and isinstance(splitter.reasoning, ThinkParser)


@pytest.mark.parametrize("choice", [ToolChoice("required"), ToolChoice("named", "get_weather")])
def test_a_forced_call_with_an_output_format_enforces_the_call(choice):
    """openai-agents / instructor send a format with a forced call: that turn's output is the call."""
    fmt = OutputFormat("json_schema", json.dumps({"type": "object"}), True)
    forced = cp.make_plan(QWEN, TOOLS, choice, fmt)
    assert forced.output_format is None
    assert cp.constraint_for(forced) == cp.constraint_for(cp.make_plan(QWEN, TOOLS, choice, None))
    assert cp.make_plan(QWEN, TOOLS, ToolChoice("auto"), fmt).output_format == fmt  # not forced: kept
