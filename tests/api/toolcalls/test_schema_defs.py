"""Forcing grammars over tools whose parameters use ``$defs`` / ``definitions`` (what pydantic
writes for a nested model or an Enum): the refs resolve once nested in a call object, and two
tools defining the same name differently each keep their own definition."""

from __future__ import annotations

import json

import pytest

from mlxctl.api.toolcalls import get_parser, names
from mlxctl.api.toolcalls.schema_defs import hoist
from tests.api.toolcalls.test_forcing_grammars import accepts, tokenizer  # noqa: F401 - fixture

pytest.importorskip("llguidance")


def _tool(name: str, schema: dict) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": schema}}


UNIT = {"enum": ["celsius", "fahrenheit"], "title": "Unit", "type": "string"}
PLACE = {"properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"], "type": "object"}
WEATHER = {  # as pydantic writes a model with a nested model and an Enum
    "$defs": {"Place": PLACE, "Unit": UNIT},
    "properties": {"place": {"$ref": "#/$defs/Place"}, "unit": {"$ref": "#/$defs/Unit"}},
    "required": ["place", "unit"],
    "type": "object",
}
SPEED = {  # another tool's "Unit", different, in draft-07's `definitions`
    "definitions": {"Unit": {"enum": ["kmh", "mph"], "type": "string"}},
    "properties": {"unit": {"$ref": "#/definitions/Unit"}},
    "required": ["unit"],
    "type": "object",
}
TOOLS = [_tool("get_weather", WEATHER), _tool("get_speed", SPEED)]
WEATHER_CALL = {"name": "get_weather", "arguments": {"place": {"city": "Paris"}, "unit": "celsius"}}
SPEED_CALL = {"name": "get_speed", "arguments": {"unit": "mph"}}
# hermes nests arguments in one call object; mistral and granite in an array of them
OBJECT_FORMATS = {"hermes": ("<tool_call>\n", "\n</tool_call>", False), "granite": ("<|tool_call|>", "", True),
                  "mistral": ("[TOOL_CALLS]", "", True)}


def test_hoisting_renames_a_taken_name_and_rewrites_its_refs():
    root: dict = {}
    weather, speed = hoist(WEATHER, root), hoist(SPEED, root)
    assert set(root) == {"Place", "Unit", "Unit_2"}
    assert root["Unit_2"]["enum"] == ["kmh", "mph"] and root["Unit"] == UNIT
    assert weather["properties"]["unit"] == {"$ref": "#/$defs/Unit"} and "$defs" not in weather
    assert speed["properties"]["unit"] == {"$ref": "#/$defs/Unit_2"} and "definitions" not in speed


@pytest.mark.parametrize("fmt", sorted(OBJECT_FORMATS))
def test_forced_calls_resolve_refs_of_every_tool(fmt, tokenizer):  # noqa: F811 - the fixture
    head, tail, array = OBJECT_FORMATS[fmt]
    grammar = get_parser(fmt).forcing_grammar(TOOLS, None, False)

    def text(call: dict) -> str:
        return head + json.dumps([call] if array else call) + tail

    assert accepts(tokenizer, grammar, text(WEATHER_CALL))
    assert accepts(tokenizer, grammar, text(SPEED_CALL))
    assert not accepts(tokenizer, grammar, text({**SPEED_CALL, "arguments": {"unit": "celsius"}}))
    assert not accepts(tokenizer, grammar, text({**WEATHER_CALL, "arguments": {"place": {}, "unit": "celsius"}}))


# their parsers type a text value by its property's own schema, which a $ref does not say: a forced
# call there is a 400 naming the parameter (grammar_text), not a grammar that reads back wrong
TEXT_VALUED = ("glm4", "qwen3_coder", "seed_oss", "minimax_m2")


@pytest.mark.parametrize("fmt", sorted(set(names()) - set(TEXT_VALUED)))
def test_every_format_compiles_a_forced_call_over_refs(fmt, tokenizer):  # noqa: F811 - the fixture
    from mlxctl.engine.constraints import ConstraintSpec, compile_constraint

    tools = [_tool("get_weather", WEATHER)]
    compile_constraint(ConstraintSpec("lark", get_parser(fmt).forcing_grammar(tools, "get_weather", False)), tokenizer)
