"""Tool-call parsers by name, guessed from a chat template, and argument checks against schemas."""

from __future__ import annotations

import functools
import json

from mlxctl.api.toolcalls.base import (  # noqa: F401 - add_validation_listener is re-exported
    ToolCall,
    ToolParser,
    add_validation_listener,
    parameters_schema,
    tool_functions,
)
from mlxctl.api.toolcalls.deepseek_v3 import DeepSeekV3Parser
from mlxctl.api.toolcalls.deepseek_v32 import DeepSeekV32Parser
from mlxctl.api.toolcalls.gemma import GemmaParser
from mlxctl.api.toolcalls.glm4 import Glm4Parser
from mlxctl.api.toolcalls.gpt_oss import GptOssParser
from mlxctl.api.toolcalls.granite import GraniteParser
from mlxctl.api.toolcalls.hermes import HermesParser
from mlxctl.api.toolcalls.kimi_k2 import KimiK2Parser
from mlxctl.api.toolcalls.llama3_json import Llama3JsonParser
from mlxctl.api.toolcalls.minimax_m2 import MiniMaxM2Parser
from mlxctl.api.toolcalls.mistral import MistralParser
from mlxctl.api.toolcalls.nemotron import NemotronParser
from mlxctl.api.toolcalls.pythonic import PythonicParser
from mlxctl.api.toolcalls.qwen3_coder import Qwen3CoderParser
from mlxctl.api.toolcalls.seed_oss import SeedOssParser
from mlxctl.errors import BadInputError

_PARSERS: dict[str, type[ToolParser]] = {
    cls.name: cls
    for cls in (
        HermesParser,
        Qwen3CoderParser,
        Llama3JsonParser,
        MistralParser,
        PythonicParser,
        DeepSeekV3Parser,
        GptOssParser,
        Glm4Parser,
        GemmaParser,
        KimiK2Parser,
        GraniteParser,
        MiniMaxM2Parser,
        SeedOssParser,
        NemotronParser,
        DeepSeekV32Parser,
    )
}

# (format, markers any of which in a chat template means the format), most specific first: several
# templates also hold a more generic format's marker (Qwen3-Coder's and GLM's have <tool_call>).
_DETECTION: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("gpt_oss", ("<|channel|>",)),
    ("kimi_k2", ("<|tool_calls_section_begin|>", "<|tool_call_begin|>")),
    ("deepseek_v32", ("｜DSML｜",)),  # V3.2: its templates may keep V3's markers too
    ("deepseek_v3", ("<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>")),
    ("glm4", ("<arg_key>",)),
    ("minimax_m2", ("<minimax:tool_call>",)),
    ("seed_oss", ("<seed:tool_call>",)),
    ("qwen3_coder", ("<function=",)),
    ("gemma", ("<|tool_call>", "<start_function_call>")),
    ("granite", ("<|tool_call|>",)),
    ("nemotron", ("<TOOLCALL>",)),
    ("mistral", ("[TOOL_CALLS]",)),
    ("hermes", ("<tool_call>",)),
    ("llama3_json", ('"parameters": dictionary of argument name', "<|python_tag|>")),
    ("pythonic", ("<|python_start|>", "[func_name1(", "[func_name(")),
)


def names() -> list[str]:
    """The registry names of every tool-call format."""
    return list(_PARSERS)


def get_parser(name: str) -> type[ToolParser]:
    """The parser class of format ``name``."""
    try:
        return _PARSERS[name]
    except KeyError:
        raise BadInputError(
            f"unknown tool-call parser {name!r}; known: {', '.join(names())}"
        ) from None


def detect_parser(chat_template: str | None) -> str | None:
    """The tool-call format a chat template writes, from its distinctive markers, or None."""
    if not chat_template:
        return None
    for name, markers in _DETECTION:
        if any(marker in chat_template for marker in markers):
            return name
    return None


def _one_line(text: str) -> str:
    return " ".join(text.split())


@functools.lru_cache(maxsize=256)
def _validator(schema_text: str):
    """A checked validator for a schema (given as JSON text, the cache key), or the schema's error."""
    import jsonschema

    schema = json.loads(schema_text)
    try:
        validator_cls = jsonschema.validators.validator_for(schema)
        validator_cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        return _one_line(exc.message)
    return validator_cls(schema)


def validate_arguments(call: ToolCall, tools: list[dict]) -> str | None:
    """Check a call's arguments against its tool's JSON schema: a one-line error, or None if OK."""
    import jsonschema

    functions = tool_functions(tools)
    fn = functions.get(call.name)
    if fn is None:
        known = ", ".join(functions) or "none"
        return f"unknown tool {call.name!r} (known: {known})"
    try:
        arguments = json.loads(call.arguments)
    except ValueError as exc:
        return f"arguments of {call.name!r} are not valid JSON: {exc}"
    if not isinstance(arguments, dict):
        return f"arguments of {call.name!r} are not a JSON object"
    schema = parameters_schema(fn)
    if not schema:
        return None
    validator = _validator(json.dumps(schema, sort_keys=True))
    if isinstance(validator, str):
        return f"the schema of tool {call.name!r} is invalid: {validator}"
    error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    if error is None:
        return None
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    at = f" at {where.lstrip('.')}" if where else ""
    return f"arguments of {call.name!r}{at}: {_one_line(error.message)}"
