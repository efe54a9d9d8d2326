"""Every format against table vectors: whole, split in two at every boundary, char by char."""

from __future__ import annotations

import pytest

from mlxctl.api.toolcalls import get_parser

from .helpers import TOOLS, check_stream, normalized, splits, stream

W = "get_weather"
T = "get_time"
UNI = 'Zürich "Altstadt" 東京 é\\'  # unicode, escaped quotes and a backslash

# (format, output text, expected content, expected [(name, arguments)])
VECTORS = [
    # -- hermes ------------------------------------------------------------------------------
    (
        "hermes",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        None,
        [(W, {"city": "Paris"})],
    ),
    (
        "hermes",
        (
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n'
            '</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
        ),
        None,
        [(W, {"city": "Paris", "days": 2}), (T, {})],
    ),
    (
        "hermes",
        'Let me check.\n\n<tool_call>\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n</tool_call>',
        "Let me check.\n\n",
        [(T, {"tz": "UTC"})],
    ),
    (
        "hermes",
        'The JSON is {"name": "get_weather", "arguments": {}} and a < b <tool',
        'The JSON is {"name": "get_weather", "arguments": {}} and a < b <tool',
        [],
    ),
    (
        "hermes",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": }}\n</tool_call>\nSorry.',
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": }}\n</tool_call>\nSorry.',
        [],
    ),
    (
        "hermes",
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Par',
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Par',
        [],
    ),
    (
        "hermes",
        (
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Zürich \\"Altstadt\\" 東京 '
            '\\u00e9\\\\", "tags": ["a\\nb", "\t"]}}</tool_call>'
        ),
        None,
        [(W, {"city": UNI, "tags": ["a\nb", "\t"]})],
    ),
    (
        "hermes",
        '<tool_call>{"arguments": "{\\"city\\": \\"Rome\\"}", "name": "get_weather"}</tool_call>',
        None,
        [(W, {"city": "Rome"})],
    ),
    ("hermes", 'ok <tool_call>{"name": "get_time"}', "ok ", [(T, {})]),
    # -- qwen3_coder --------------------------------------------------------------------------
    (
        "qwen3_coder",
        (
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
            "<parameter=days>\n3\n</parameter>\n<parameter=metric>\ntrue\n</parameter>\n"
            '<parameter=tags>\n["a", "b"]\n</parameter>\n</function>\n</tool_call>'
        ),
        None,
        [(W, {"city": "Paris", "days": 3, "metric": True, "tags": ["a", "b"]})],
    ),
    (
        "qwen3_coder",
        (
            "I'll look.\n<tool_call>\n<function=get_time>\n</function>\n</tool_call>\n"
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n"
            "</tool_call>"
        ),
        "I'll look.\n\n",
        [(T, {}), (W, {"city": "Oslo"})],
    ),
    (
        "qwen3_coder",
        "Write <function=x> and <parameter=y> like this.",
        "Write <function=x> and <parameter=y> like this.",
        [],
    ),
    (
        "qwen3_coder",
        "<tool_call>\nget_weather(city='Paris')\n</tool_call> done",
        "<tool_call>\nget_weather(city='Paris')\n</tool_call> done",
        [],
    ),
    (
        "qwen3_coder",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis",
        [],
    ),
    (
        "qwen3_coder",
        (
            '<tool_call>\n<function=get_weather>\n<parameter=city>\nZürich "Altstadt" 東京 é\\\n'
            '</parameter>\n<parameter=opts>\n{"code": "print(\\"hi\\")\\n"}\n</parameter>\n</function>\n</tool_call>'
        ),
        None,
        [(W, {"city": UNI, "opts": {"code": 'print("hi")\n'}})],
    ),
    (
        "qwen3_coder",
        (
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nline 1\n\nline 3\n"
            "</parameter>\n<parameter=days>\nmany\n</parameter>\n</function>"
        ),
        None,
        [(W, {"city": "line 1\n\nline 3", "days": "many"})],
    ),
    # -- llama3_json --------------------------------------------------------------------------
    (
        "llama3_json",
        '{"name": "get_weather", "parameters": {"city": "Paris"}}',
        None,
        [(W, {"city": "Paris"})],
    ),
    (
        "llama3_json",
        (
            '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; '
            '{"name": "get_time", "arguments": {}}'
        ),
        None,
        [(W, {"city": "Paris"}), (T, {})],
    ),
    (
        "llama3_json",
        'Sure: {"name": "get_weather", "parameters": {"city": "Paris"}}',
        'Sure: {"name": "get_weather", "parameters": {"city": "Paris"}}',
        [],
    ),
    ("llama3_json", '{"name": "Alice", "age": 30}', '{"name": "Alice", "age": 30}', []),
    (
        "llama3_json",
        '{"name": "delete_all", "parameters": {}}',
        '{"name": "delete_all", "parameters": {}}',
        [],
    ),
    (
        "llama3_json",
        '{"name": "get_weather", "parameters": {"city": "Paris"}',
        '{"name": "get_weather", "parameters": {"city": "Paris"}',
        [],
    ),
    (
        "llama3_json",
        (
            '\n{"name": "get_weather", "parameters": {"city": "Zürich \\"Altstadt\\" 東京 '
            '\\u00e9\\\\"}}\n\nThat was the call.'
        ),
        "\n\nThat was the call.",
        [(W, {"city": UNI})],
    ),
    (
        "llama3_json",
        '{"name": "get_time", "parameters": {}}; {"name": "get_weather", "parameters": oops}',
        '; {"name": "get_weather", "parameters": oops}',
        [(T, {})],
    ),
    # -- mistral ------------------------------------------------------------------------------
    (
        "mistral",
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]',
        None,
        [(W, {"city": "Paris"})],
    ),
    (
        "mistral",
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{}',
        None,
        [(W, {"city": "Paris"}), (T, {})],
    ),
    (
        "mistral",
        (
            'Checking. [TOOL_CALLS] [{"name": "get_weather", "arguments": {"days": 1}}, '
            '{"name": "get_time", "arguments": {}}]'
        ),
        "Checking. ",
        [(W, {"days": 1}), (T, {})],
    ),
    ("mistral", 'A list [1, 2] and [ARGS] {"a": 1}.', 'A list [1, 2] and [ARGS] {"a": 1}.', []),
    (
        "mistral",
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": Paris}}]',
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": Paris}}]',
        [],
    ),
    (
        "mistral",
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Zürich \\"Altstadt\\" 東京 \\u00e9\\\\"}',
        None,
        [(W, {"city": UNI})],
    ),
    (
        "mistral",
        '[TOOL_CALLS]get_time[CALL_ID]a1b2c3d4e[ARGS]{"tz": "CET"}',
        None,
        [(T, {"tz": "CET"})],
    ),
    ("mistral", "[TOOL_CALLS]not a call", "[TOOL_CALLS]not a call", []),
    # -- pythonic -----------------------------------------------------------------------------
    ("pythonic", '[get_weather(city="Paris")]', None, [(W, {"city": "Paris"})]),
    (
        "pythonic",
        '[get_weather(city="Paris", days=2, metric=True, tags=["a"]), get_time()]',
        None,
        [(W, {"city": "Paris", "days": 2, "metric": True, "tags": ["a"]}), (T, {})],
    ),
    ("pythonic", "Calling: [get_time()]", "Calling: [get_time()]", []),
    ("pythonic", "[1, 2, 3] are the first numbers.", "[1, 2, 3] are the first numbers.", []),
    ("pythonic", '[get_weather(city="Paris"', '[get_weather(city="Paris"', []),
    (
        "pythonic",
        "[get_weather(city='Zürich \"Altstadt\" 東京 é\\\\', opts={'k': None, 'b': false})]",
        None,
        [(W, {"city": UNI, "opts": {"k": None, "b": False}})],
    ),
    (
        "pythonic",
        "[get_time()] is how you would call it.",
        "[get_time()] is how you would call it.",
        [],
    ),
    ("pythonic", '[get_weather("Paris")]', '[get_weather("Paris")]', []),
    ("pythonic", '<|python_start|>[get_time(tz="UTC")]<|python_end|>', None, [(T, {"tz": "UTC"})]),
    ("pythonic", "[see the docs](https://example.com)", "[see the docs](https://example.com)", []),
    # -- deepseek_v3 --------------------------------------------------------------------------
    (
        "deepseek_v3",
        (
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
            '```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
        ),
        None,
        [(W, {"city": "Paris"})],
    ),
    (
        "deepseek_v3",
        (
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
            '```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>'
            "get_time\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
        ),
        None,
        [(W, {"city": "Paris"}), (T, {})],
    ),
    (
        "deepseek_v3",
        (
            "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>"
            '{"tz": "UTC"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
        ),
        "Checking.",
        [(T, {"tz": "UTC"})],
    ),
    ("deepseek_v3", "No tools needed: ```json\n{}\n```", "No tools needed: ```json\n{}\n```", []),
    (
        "deepseek_v3",
        (
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{tz: UTC}"
            "<｜tool▁call▁end｜><｜tool▁calls▁end｜>Sorry."
        ),
        (
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{tz: UTC}<｜tool▁call▁end｜>"
            "<｜tool▁calls▁end｜>Sorry."
        ),
        [],
    ),
    (
        "deepseek_v3",
        (
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
            '{"city": "Zürich \\"Altstadt\\" 東京 \\u00e9\\\\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
        ),
        None,
        [(W, {"city": UNI})],
    ),
    # -- deepseek_v32 ---------------------------------------------------------------------------
    (
        "deepseek_v32",
        (
            '\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
            '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
            '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n'
            '<｜DSML｜parameter name="tags" string="false">["a", "b"]</｜DSML｜parameter>\n'
            "</｜DSML｜invoke>\n</｜DSML｜function_calls>"
        ),
        None,
        [(W, {"city": "Paris", "days": 3, "tags": ["a", "b"]})],
    ),
    (
        "deepseek_v32",  # two invokes in one block; an empty one (no parameters) as the encoder writes it
        (
            'Checking.<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
            '<｜DSML｜parameter name="city" string="true">a </b> "b" 東京\nc</｜DSML｜parameter>\n'
            '</｜DSML｜invoke>\n<｜DSML｜invoke name="get_time">\n\n</｜DSML｜invoke>\n</｜DSML｜function_calls>'
        ),
        "Checking.",
        [(W, {"city": 'a </b> "b" 東京\nc'}), (T, {})],
    ),
    (
        "deepseek_v32",  # string="true" keeps digits a string; string="false" that is not JSON goes by the schema
        (
            '<｜DSML｜function_calls><｜DSML｜invoke name="get_weather"><｜DSML｜parameter name="city" '
            'string="true">75001</｜DSML｜parameter><｜DSML｜parameter name="metric" string="false">True'
            "</｜DSML｜parameter></｜DSML｜invoke></｜DSML｜function_calls>Done."
        ),
        "Done.",
        [(W, {"city": "75001", "metric": True})],
    ),
    (
        "deepseek_v32",  # a bad string flag: the block is content
        (
            '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" '
            'string="yes">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>After.'
        ),
        (
            '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" '
            'string="yes">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>After.'
        ),
        [],
    ),
    (
        "deepseek_v32",  # cut off inside a value: content
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">Par',
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">Par',
        [],
    ),
    (
        "deepseek_v32",  # the block's end never came (the output ended): the complete call is kept
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_time">\n</｜DSML｜invoke>',
        None,
        [(T, {})],
    ),
    ("deepseek_v32", "Use <invoke> tags, or ｜DSML｜ ones.", "Use <invoke> tags, or ｜DSML｜ ones.", []),
    # -- gpt_oss ------------------------------------------------------------------------------
    (
        "gpt_oss",
        (
            "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>"
            'commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>'
        ),
        None,
        [(W, {"city": "Paris"})],
    ),
    (
        "gpt_oss",
        (
            "<|channel|>commentary<|message|>Checking both.<|end|><|start|>assistant to=functions.get_time"
            "<|channel|>commentary json<|message|>{}<|call|><|start|>assistant<|channel|>commentary "
            'to=functions.get_weather <|constrain|>json<|message|>{"days": 1}'
        ),
        "Checking both.",
        [(T, {}), (W, {"days": 1})],
    ),
    (
        "gpt_oss",
        (
            "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>"
            "It is {sunny}.<|return|>"
        ),
        "It is {sunny}.",
        [],
    ),
    ("gpt_oss", "Just text, with a <|fake| marker.", "Just text, with a <|fake| marker.", []),
    (
        "gpt_oss",
        "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{tz}<|call|>",
        "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{tz}<|call|>",
        [],
    ),
    (
        "gpt_oss",
        (
            "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
            '{"city": "Zürich \\"Altstadt\\" 東京 \\u00e9\\\\"}<|call|>'
        ),
        None,
        [(W, {"city": UNI})],
    ),
    # -- glm4 ---------------------------------------------------------------------------------
    (
        "glm4",
        (
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
            "<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>"
        ),
        None,
        [(W, {"city": "Paris", "days": 2})],
    ),
    (
        "glm4",
        (
            "Let me see.<tool_call>get_time</tool_call><tool_call>get_weather<arg_key>tags</arg_key>"
            '<arg_value>["x", "y"]</arg_value><arg_key>metric</arg_key><arg_value>false</arg_value></tool_call>'
        ),
        "Let me see.",
        [(T, {}), (W, {"tags": ["x", "y"], "metric": False})],
    ),
    ("glm4", "Use <arg_key>k</arg_key> tags.", "Use <arg_key>k</arg_key> tags.", []),
    (
        "glm4",
        "<tool_call>get weather now</tool_call> ok",
        "<tool_call>get weather now</tool_call> ok",
        [],
    ),
    (
        "glm4",
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Par",
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Par",
        [],
    ),
    (
        "glm4",
        (
            '<tool_call>get_weather<arg_key>city</arg_key><arg_value>Zürich "Altstadt" 東京 é\\'
            "</arg_value></tool_call>"
        ),
        None,
        [(W, {"city": UNI})],
    ),
    # -- gemma --------------------------------------------------------------------------------
    (
        "gemma",
        '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>',
        None,
        [(W, {"city": "Paris", "days": 3})],
    ),
    (
        "gemma",
        (
            "<|tool_call>call:get_time{}<tool_call|><|tool_call>call:get_weather{metric:true,"
            'tags:[<|"|>a<|"|>,<|"|>b<|"|>],opts:{depth:-1.5,x:null}}<tool_call|>'
        ),
        None,
        [(T, {}), (W, {"metric": True, "tags": ["a", "b"], "opts": {"depth": -1.5, "x": None}})],
    ),
    (
        "gemma",
        'Sure!\n<|tool_call>call:get_time{tz:<|"|>UTC<|"|>}<tool_call|>',
        "Sure!\n",
        [(T, {"tz": "UTC"})],
    ),
    ("gemma", "Write call:get_time{} to call it.", "Write call:get_time{} to call it.", []),
    (
        "gemma",
        '<|tool_call>call:get_time{tz:<|"|>UTC}<tool_call|> oops',
        '<|tool_call>call:get_time{tz:<|"|>UTC}<tool_call|> oops',
        [],
    ),
    (
        "gemma",
        '<|tool_call>call:get_weather{city:<|"|>Zürich "Altstadt" 東京 é\\<|"|>}<tool_call|>',
        None,
        [(W, {"city": UNI})],
    ),
    (
        "gemma",
        "<start_function_call>call:get_time{tz:<escape>CET<escape>}<end_function_call>",
        None,
        [(T, {"tz": "CET"})],
    ),
    # -- kimi_k2 ------------------------------------------------------------------------------
    (
        "kimi_k2",
        (
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
            '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>'
        ),
        None,
        [(W, {"city": "Paris"})],
    ),
    (
        "kimi_k2",
        (
            "I'll check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
            '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_call_begin|>'
            "functions.get_time:1<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>"
        ),
        "I'll check.",
        [(W, {"city": "Paris"}), (T, {})],
    ),
    ("kimi_k2", "functions.get_time:0 {}", "functions.get_time:0 {}", []),
    (
        "kimi_k2",
        (
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0"
            "<|tool_call_argument_begin|>{nope}<|tool_call_end|><|tool_calls_section_end|>"
        ),
        (
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0"
            "<|tool_call_argument_begin|>{nope}<|tool_call_end|><|tool_calls_section_end|>"
        ),
        [],
    ),
    (
        "kimi_k2",
        (
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
            '<|tool_call_argument_begin|>{"city": "Zürich \\"Altstadt\\" 東京 \\u00e9\\\\"}<|tool_call_end|>'
            "<|tool_calls_section_end|>"
        ),
        None,
        [(W, {"city": UNI})],
    ),
    # -- granite ------------------------------------------------------------------------------
    (
        "granite",
        '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
        None,
        [(W, {"city": "Paris"})],
    ),
    (
        "granite",
        (
            'Sure.<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
            '{"name": "get_time", "arguments": {}}]'
        ),
        "Sure.",
        [(W, {"city": "Paris"}), (T, {})],
    ),
    (
        "granite",
        '[{"name": "get_time", "arguments": {}}]',
        '[{"name": "get_time", "arguments": {}}]',
        [],
    ),
    (
        "granite",
        '<|tool_call|>[{"name": "get_time", "arguments": {"tz": UTC}}]',
        '<|tool_call|>[{"name": "get_time", "arguments": {"tz": UTC}}]',
        [],
    ),
    (
        "granite",
        (
            '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Zürich \\"Altstadt\\" '
            '東京 \\u00e9\\\\"}}]'
        ),
        None,
        [(W, {"city": UNI})],
    ),
    # -- minimax_m2 ---------------------------------------------------------------------------
    (
        "minimax_m2",
        (
            '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n'
            '<parameter name="days">3</parameter>\n<parameter name="metric">true</parameter>\n'
            '<parameter name="tags">["a", "b"]</parameter>\n</invoke>\n</minimax:tool_call>'
        ),
        None,
        [(W, {"city": "Paris", "days": 3, "metric": True, "tags": ["a", "b"]})],
    ),
    (
        "minimax_m2",
        (
            'Let me look.\n<minimax:tool_call>\n<invoke name="get_time">\n</invoke>\n'
            "<invoke name='get_weather'>\n<parameter name=city>Oslo</parameter>\n</invoke>\n</minimax:tool_call>"
        ),
        "Let me look.\n",
        [(T, {}), (W, {"city": "Oslo"})],
    ),
    (
        "minimax_m2",
        'Write <invoke name="x"> and <parameter name="y"> like this.',
        'Write <invoke name="x"> and <parameter name="y"> like this.',
        [],
    ),
    (
        "minimax_m2",
        '<minimax:tool_call>\n<invoke name="get_weather>\n</invoke>\n</minimax:tool_call> done',
        '<minimax:tool_call>\n<invoke name="get_weather>\n</invoke>\n</minimax:tool_call> done',
        [],
    ),
    (
        "minimax_m2",
        '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris',
        '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris',
        [],
    ),
    (
        "minimax_m2",
        (
            '<minimax:tool_call><invoke name="get_weather"><parameter name="city">\nZürich "Altstadt" 東京 é\\\n'
            '</parameter><parameter name="opts">{"code": "print(\\"hi\\")\\n"}</parameter></invoke>'
            "</minimax:tool_call>"
        ),
        None,
        [(W, {"city": UNI, "opts": {"code": 'print("hi")\n'}})],
    ),
    # -- seed_oss -----------------------------------------------------------------------------
    (
        "seed_oss",
        (
            "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n"
            "<parameter=days>3</parameter>\n<parameter=metric>True</parameter>\n"
            "<parameter=tags>['a', 'b']</parameter>\n</function>\n</seed:tool_call>"
        ),
        None,
        [(W, {"city": "Paris", "days": 3, "metric": True, "tags": ["a", "b"]})],
    ),
    (
        "seed_oss",
        (
            "I will check both.\n<seed:tool_call>\n<function=get_time>\n</function>\n\n"
            "<function=get_weather>\n<parameter=city>\nline 1\n\nline 3\n</parameter>\n</function>\n"
            "</seed:tool_call>"
        ),
        "I will check both.\n",
        [(T, {}), (W, {"city": "line 1\n\nline 3"})],
    ),
    (
        "seed_oss",
        "<tool_call>\n<function=get_time>\n</function>\n</tool_call>",  # Qwen3-Coder's block: text here
        "<tool_call>\n<function=get_time>\n</function>\n</tool_call>",
        [],
    ),
    (
        "seed_oss",
        "<seed:tool_call>\nget_weather(city='Paris')\n</seed:tool_call> done",
        "<seed:tool_call>\nget_weather(city='Paris')\n</seed:tool_call> done",
        [],
    ),
    (
        "seed_oss",
        "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n",
        "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n",
        [],
    ),
    (
        "seed_oss",
        (
            '<seed:tool_call>\n<function=get_weather>\n<parameter=city>Zürich "Altstadt" 東京 é\\</parameter>\n'
            "<parameter=days>many</parameter>\n</function>\n</seed:tool_call>"
        ),
        None,
        [(W, {"city": UNI, "days": "many"})],
    ),
    # -- nemotron -----------------------------------------------------------------------------
    (
        "nemotron",
        '<TOOLCALL>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</TOOLCALL>',
        None,
        [(W, {"city": "Paris"})],
    ),
    (
        "nemotron",
        (
            'Sure.\n\n<TOOLCALL>[{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}, '
            '{"name": "get_time", "arguments": {}}]</TOOLCALL>\nDone.'
        ),
        "Sure.\n\n\nDone.",
        [(W, {"city": "Paris", "days": 2}), (T, {})],
    ),
    (
        "nemotron",
        '<TOOLCALL>{"name": "get_time", "arguments": {}}</TOOLCALL>',
        None,
        [(T, {})],
    ),
    (
        "nemotron",
        '[{"name": "get_time", "arguments": {}}] <TOOLCALL',
        '[{"name": "get_time", "arguments": {}}] <TOOLCALL',
        [],
    ),
    (
        "nemotron",
        '<TOOLCALL>[{"name": "get_time", "arguments": {"tz": UTC}}]</TOOLCALL> Sorry.',
        '<TOOLCALL>[{"name": "get_time", "arguments": {"tz": UTC}}]</TOOLCALL> Sorry.',
        [],
    ),
    (
        "nemotron",
        '<TOOLCALL>[{"name": "get_weather", "arguments": {"city": "Par',
        '<TOOLCALL>[{"name": "get_weather", "arguments": {"city": "Par',
        [],
    ),
    (
        "nemotron",
        '<TOOLCALL>[{"name": "get_weather", "arguments": {"city": "Zürich \\"Altstadt\\" 東京 \\u00e9\\\\"}}]',
        None,
        [(W, {"city": UNI})],
    ),
]


def _id(vector) -> str:
    return f"{vector[0]}-{VECTORS.index(vector)}"


@pytest.mark.parametrize("vector", VECTORS, ids=[_id(v) for v in VECTORS])
def test_vector(vector):
    fmt, text, content, calls = vector
    cls = get_parser(fmt)
    whole = cls.parse(text, TOOLS)
    assert normalized(whole) == (content, calls)
    for pieces in splits(text):
        result, deltas = stream(cls, pieces)
        assert normalized(result) == (content, calls), pieces
        check_stream(result, deltas)


def test_every_format_has_vectors():
    from mlxctl.api.toolcalls import names

    assert {v[0] for v in VECTORS} == set(names())
