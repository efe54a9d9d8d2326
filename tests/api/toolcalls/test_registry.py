"""The registry: names, lookup, detection from chat templates, argument validation."""

from __future__ import annotations

import pytest

from mlxctl.api.toolcalls import (
    ToolCall,
    ToolParser,
    detect_parser,
    get_parser,
    names,
    validate_arguments,
)
from mlxctl.errors import BadInputError

from .helpers import TOOLS

FORMATS = [
    "hermes",
    "qwen3_coder",
    "llama3_json",
    "mistral",
    "pythonic",
    "deepseek_v3",
    "gpt_oss",
    "glm4",
    "gemma",
    "kimi_k2",
    "granite",
    "minimax_m2",
    "seed_oss",
    "nemotron",
    "deepseek_v32",
]


def test_names_and_lookup():
    assert sorted(names()) == sorted(FORMATS)
    for name in names():
        cls = get_parser(name)
        assert issubclass(cls, ToolParser) and cls.name == name


def test_unknown_parser_names_the_known_ones():
    with pytest.raises(BadInputError) as info:
        get_parser("nope")
    assert "nope" in str(info.value)
    for name in FORMATS:
        assert name in str(info.value)


# Representative pieces of real chat templates (abridged).
TEMPLATES = {
    "hermes": (
        "{%- if tools %}<|im_start|>system\n# Tools\n\nYou are provided with function signatures "
        "within <tools></tools> XML tags:\n<tools>{% for tool in tools %}{{ tool | tojson }}"
        "{% endfor %}</tools>\n\nFor each function call, return a json object with function name "
        'and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": '
        '<function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>{% endif %}'
    ),
    "qwen3_coder": (
        "{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}{%- for args_name, args_value "
        "in tool_call.arguments|items %}{{- '<parameter=' + args_name + '>\\n' }}"
        "{{- args_value }}{{- '\\n</parameter>\\n' }}{%- endfor %}{{- '</function>\\n</tool_call>' }}"
    ),
    "glm4": (
        "{{- '<tool_call>' + tc.name -}}{% for k, v in _args.items() %}<arg_key>{{ k }}</arg_key>"
        "<arg_value>{{ v | tojson(ensure_ascii=False) if v is not string else v }}</arg_value>"
        "{% endfor %}</tool_call>{% endfor %}"
    ),
    "llama3_json": (
        "{{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}{{- \"Given the following functions, "
        "please respond with a JSON for a function call with its proper arguments that best answers "
        'the given prompt.\\n\\n" }}{{- \'Respond in the format {"name": function name, '
        '"parameters": dictionary of argument name and its value}.\' }}'
        "{%- if builtin_tools is defined %}{{- '<|python_tag|>' + tool_call.name }}{% endif %}"
    ),
    "mistral": (
        "{%- if message.tool_calls %}{{- '[TOOL_CALLS]' }}{%- for tool_call in message.tool_calls %}"
        "{{- tool_call.function.name + '[ARGS]' + tool_call.function.arguments|tojson }}"
        "{%- endfor %}{%- endif %}{{- '[AVAILABLE_TOOLS]' + tools|tojson + '[/AVAILABLE_TOOLS]' }}"
    ),
    "pythonic": (
        "{{- '<|header_start|>assistant<|header_end|>\\n\\n' -}}{%- if message.tool_calls %}"
        "{{- '<|python_start|>[' }}{%- for tool_call in message.tool_calls %}{{ tool_call.function.name }}("
        "{%- endfor %}{{- ')]<|python_end|>' }}{%- endif %}"
    ),
    "deepseek_v3": (
        "{%- for tool in message['tool_calls'] %}{%- if not ns.is_first %}{{'<｜Assistant｜>"
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + "
        "tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] + "
        "'\\n' + '```' + '<｜tool▁call▁end｜>'}}{%- endif %}{%- endfor %}"
    ),
    # V3.2 ships an encoder, not a template; community templates write its tags (and keep V3's)
    "deepseek_v32": (
        "{%- set dsml_token = '｜DSML｜' -%}{%- if message['tool_calls'] -%}{{- '\\n\\n<' + dsml_token + "
        "'function_calls>\\n' -}}{%- for tool in message['tool_calls'] -%}{{- '<' + dsml_token + 'invoke name=\"' "
        "+ tool['function']['name'] + '\">\\n' -}}{%- endfor -%}{%- endif -%}"
        "{%- if not ns.is_first %}{{'<｜Assistant｜><｜tool▁calls▁begin｜>'}}{%- endif %}"
    ),
    "gpt_oss": (
        '{{- "<|start|>assistant<|channel|>commentary to=" + "functions." + tool_call.name + '
        '" <|constrain|>json<|message|>" + tool_call.arguments|tojson + "<|call|>" }}'
        "{%- if add_generation_prompt %}<|start|>assistant{%- endif %}"
    ),
    "gemma": (
        "{%- for tool_call in message['tool_calls'] -%}{{- '<|tool_call>call:' + "
        "tool_call['function']['name'] + '{' -}}{%- for key, value in arguments | dictsort -%}"
        "{{- key + ':' + format_argument(value, escape_keys=False) -}}{%- endfor -%}"
        "{{- '}<tool_call|>' -}}{%- endfor -%}{%- macro format_argument(v) -%}<|\"|>{{ v }}<|\"|>"
        "{%- endmacro -%}"
    ),
    "kimi_k2": (
        "{%- if message['tool_calls'] -%}<|tool_calls_section_begin|>{%- for tool_call in "
        "message['tool_calls'] -%}<|tool_call_begin|>{{ tool_call['id'] }}"
        "<|tool_call_argument_begin|>{{ tool_call['function']['arguments'] }}<|tool_call_end|>"
        "{%- endfor -%}<|tool_calls_section_end|>{%- endif -%}"
    ),
    "granite": (
        "{%- if message['role'] == 'assistant_tool_call' %}{{- '<|start_of_role|>assistant"
        "<|end_of_role|><|tool_call|>' + message['content'] + '<|end_of_text|>\\n' }}{%- endif %}"
    ),
    "minimax_m2": (
        "{%- set toolcall_begin_token = '<minimax:tool_call>' -%}{%- set toolcall_end_token = "
        "'</minimax:tool_call>' -%}{{- '\\n' ~ toolcall_begin_token ~ '\\n' }}{%- for tool_call in "
        "message.tool_calls -%}{{- '<invoke name=\"' + tool_call.name + '\">' }}{%- for k, v in _args.items() %}"
        "{{- '<parameter name=\"' + k + '\">' }}{{- v | tojson(ensure_ascii=False) if v is not string else v }}"
        "{{- '</parameter>' }}{% endfor %}{{- '</invoke>' ~ '\\n' }}{%- endfor -%}{{- toolcall_end_token }}"
        "{%- if add_generation_prompt -%}{{- ']~b]ai' ~ '\\n' ~ '<think>' ~ '\\n' }}{%- endif -%}"
    ),
    "seed_oss": (
        "{%- if message.tool_calls %}{%- for tool_call in message.tool_calls %}{{ '\\n<seed:tool_call>\\n"
        "<function=' + tool_call.function.name + '>\\n' }}{%- for k, v in arguments.items() %}"
        "{{ '<parameter=' + k + '>' + v | string + '</parameter>\\n' }}{%- endfor %}"
        "{{ '</function>\\n</seed:tool_call>' }}{%- endfor %}{%- endif %}"
        "{{ bos_token + 'assistant\\n' }}{%- if thinking_budget == 0 %}{{ '<seed:think><seed:cot_budget_reflect>"
        "The current thinking budget is 0.</seed:cot_budget_reflect>\\n</seed:think>' }}{%- endif %}"
    ),
    "nemotron": (  # Nemotron-Nano-9B-v2
        "{%- elif message['role'] == 'assistant' -%}{%- if '</think>' in content -%}{%- set content = "
        "content.split('</think>')[1].strip() %}{%- endif -%}{{- '<SPECIAL_11>Assistant\\n' + content.strip() }}"
        "{%- if message.tool_calls -%}{{- '<TOOLCALL>[' -}}{%- for call in message.tool_calls -%}"
        "{{- '{\"name\": \"' + fn.name + '\", \"arguments\": ' -}}{{- fn.arguments | tojson -}}"
        "{{- '}' + (', ' if not loop.last else '') -}}{%- endfor -%}{{- ']</TOOLCALL>' -}}{%- endif -%}"
    ),
    # Llama-3.3-Nemotron-Super: a Llama 3 template (its headers, <|python_tag|>) that writes <TOOLCALL>
    "nemotron_llama": (
        "{%- elif message['role'] == 'assistant' and message.get('tool_calls') is not none -%}"
        "{{- '<|start_header_id|>assistant<|end_header_id|>' + '\\n\\n' + '<TOOLCALL>[' -}}"
        "{%- for tool_call in tool_calls -%}{{ '{' + '\"name\": \"' + tool_call.function.name + "
        "'\", \"arguments\": ' + tool_call.function.arguments | tojson + '}' }}{%- if not loop.last -%}"
        "{{ ', ' }}{%- else -%}{{ ']</TOOLCALL>' + '<|eot_id|>' }}{%- endif -%}{%- endfor -%}"
        "{%- set tool_response = '<TOOL_RESPONSE>[' + message['content'] | trim + ']</TOOL_RESPONSE>' -%}"
        "{{- '<|python_tag|>' if builtin_tools is defined else '' }}"
    ),
}
DETECTED_AS = {"nemotron_llama": "nemotron"}


@pytest.mark.parametrize("expected", sorted(TEMPLATES))
def test_detect_parser(expected):
    assert detect_parser(TEMPLATES[expected]) == DETECTED_AS.get(expected, expected)


@pytest.mark.parametrize(
    "template",
    [
        None,
        "",
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}",
        (
            "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}"
            "<end_of_turn>\n{% endfor %}"
        ),
    ],
)
def test_detect_parser_finds_nothing(template):
    assert detect_parser(template) is None


def _call(name, arguments):
    return ToolCall(name=name, arguments=arguments, id="call_" + "a" * 24)


def test_validate_accepts_good_arguments():
    assert validate_arguments(_call("get_weather", '{"city": "Paris", "days": 3}'), TOOLS) is None
    assert validate_arguments(_call("get_time", "{}"), TOOLS) is None
    bare = [{"name": "f", "parameters": {"type": "object"}}]  # a bare function object is read too
    assert validate_arguments(_call("f", '{"x": 1}'), bare) is None
    no_schema = [{"type": "function", "function": {"name": "g"}}]
    assert validate_arguments(_call("g", '{"anything": [1]}'), no_schema) is None


@pytest.mark.parametrize(
    "name, arguments, words",
    [
        ("get_weather", "{}", ["city", "required"]),
        ("get_weather", '{"city": 5}', ["city", "string"]),
        ("get_weather", '{"city": "x", "tags": ["a", 2]}', ["tags[1]", "string"]),
        ("get_weather", '{"city": "x", "days": "two"}', ["days", "integer"]),
        ("get_weather", "[1]", ["object"]),
        ("get_weather", "{nope", ["JSON"]),
        ("delete_all", "{}", ["unknown tool", "delete_all", "get_weather", "get_time"]),
    ],
)
def test_validate_names_the_problem(name, arguments, words):
    message = validate_arguments(_call(name, arguments), TOOLS)
    assert message is not None and "\n" not in message
    for word in words:
        assert word in message, message
