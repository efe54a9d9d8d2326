"""A forced call admits only the members an object schema declares, unless it allows others."""

from __future__ import annotations

import pytest

from mlxctl.api import chat_plan as cp
from mlxctl.api.chat_plan import ModelFormats, ToolChoice
from mlxctl.api.toolcalls.schema_relax import narrowed

from .test_grammar import _accepts, tokenizer  # noqa: F401 (the fixture)

pytest.importorskip("llguidance")

PLACE = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def _forced(parameters: dict, fmt: str = "hermes") -> str:
    tool = {"type": "function", "function": {"name": "f", "parameters": parameters}}
    return cp.constraint_for(cp.make_plan(ModelFormats(fmt), [tool], ToolChoice("required"), None)).value


def _call(arguments: str) -> str:
    return f'<tool_call>\n{{"name": "f", "arguments": {arguments}}}\n</tool_call>'


def test_a_forced_call_admits_no_member_the_schema_does_not_declare(tokenizer):  # noqa: F811
    grammar = _forced({"type": "object", "properties": {"place": {"$ref": "#/$defs/Place"}, "days": {"type": "integer"}},
                       "required": ["place"], "$defs": {"Place": PLACE}})
    assert _accepts(tokenizer, grammar, _call('{"place": {"city": "Paris"}, "days": 3}'))
    assert not _accepts(tokenizer, grammar, _call('{"place": {"city": "Paris"}, "note": "x"}'))
    assert not _accepts(tokenizer, grammar, _call('{"place": {"city": "Paris", "maxLength": 16}}'))


def test_members_the_schema_allows_stay_allowed(tokenizer):  # noqa: F811
    open_place = {**PLACE, "additionalProperties": True}
    assert _accepts(tokenizer, _forced(open_place), _call('{"city": "Paris", "note": "x"}'))
    typed = {**PLACE, "additionalProperties": {"type": "integer"}}
    assert _accepts(tokenizer, _forced(typed), _call('{"city": "Paris", "n": 3}'))
    assert not _accepts(tokenizer, _forced(typed), _call('{"city": "Paris", "n": "x"}'))
    # an object schema that declares no properties is any object, as the tool says
    assert _accepts(tokenizer, _forced({"type": "object"}), _call('{"anything": [1, 2]}'))


def test_objects_are_closed_wherever_they_are_nested():
    schema = {"type": "object", "properties": {"xs": {"type": "array", "items": PLACE},
                                               "pick": {"anyOf": [PLACE, {"type": "null"}]}}}
    closed = narrowed(schema)
    assert closed["additionalProperties"] is False
    assert closed["properties"]["xs"]["items"]["additionalProperties"] is False
    assert closed["properties"]["pick"]["anyOf"][0]["additionalProperties"] is False
    assert "additionalProperties" not in PLACE and "additionalProperties" not in schema  # not changed in place


@pytest.mark.parametrize("schema", [
    # composed objects: a member declared in one part is allowed by the whole
    {"allOf": [PLACE, {"properties": {"days": {"type": "string"}}}]},
    {"type": "object", "properties": {"a": {}}, "anyOf": [{"properties": {"b": {}}, "required": ["b"]}]},
    {"$ref": "#/$defs/P", "properties": {"days": {}}, "$defs": {"P": PLACE}},
    {"type": "object", "properties": {"a": {}}, "dependentSchemas": {"a": {"properties": {"b": {}}}}},
    # nothing to close
    {"type": "object"},
    {**PLACE, "patternProperties": {"^x-": {}}},
    {"not": PLACE},  # closing inside a negation would widen what it admits
])
def test_schemas_left_as_they_are(schema):
    assert narrowed(schema) is schema



def test_a_forced_integer_is_bounded_by_the_interoperable_range(tokenizer):  # noqa: F811
    grammar = _forced({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    assert _accepts(tokenizer, grammar, _call(f'{{"n": {2**53 - 1}}}'))
    assert _accepts(tokenizer, grammar, _call(f'{{"n": {-(2**53 - 1)}}}'))
    assert not _accepts(tokenizer, grammar, _call(f'{{"n": {2**53}}}'))
    assert not _accepts(tokenizer, grammar, _call('{"n": ' + "7" * 40 + "}"))


@pytest.mark.parametrize(("schema", "added"), [
    ({"type": "integer"}, {"minimum": -(2**53 - 1), "maximum": 2**53 - 1}),
    ({"type": ["integer", "null"], "minimum": 0}, {"maximum": 2**53 - 1}),
    ({"type": "integer", "exclusiveMaximum": 10}, {"minimum": -(2**53 - 1)}),
    ({"type": "integer", "minimum": 2**60}, {}),  # a bound beyond the range: the other side stays open
    ({"type": "integer", "enum": [1, 2]}, {}),
    ({"type": "number"}, {}),
])
def test_integer_bounds_added(schema, added):
    assert narrowed(schema) == {**schema, **added}
