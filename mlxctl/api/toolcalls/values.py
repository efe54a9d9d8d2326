"""Typed values from formats that write arguments as text (XML-style tags, Gemma's syntax).

Formats such as Qwen3-Coder and GLM write each argument's value as bare text; the tool's JSON
schema says what it is. :func:`convert_value` turns the text into the JSON value the schema asks
for, falling back to the text itself (a string) when it does not fit, so nothing is lost;
:func:`validate_arguments` reports such mismatches afterwards.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

_INT = re.compile(r"-?\d+")
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?")


def property_schema(parameters: dict | None, key: str) -> dict | None:
    """The schema of argument ``key`` in a function's parameters schema, if it says."""
    if not isinstance(parameters, dict):
        return None
    props = parameters.get("properties")
    if isinstance(props, dict) and isinstance(props.get(key), dict):
        return props[key]
    return None


def schema_types(schema: dict | None) -> list[str]:
    """The JSON types a schema allows, in its order (``anyOf``/``oneOf`` branches included)."""
    if not isinstance(schema, dict):
        return []
    kind = schema.get("type")
    types = [kind] if isinstance(kind, str) else [t for t in kind or [] if isinstance(t, str)]
    for branch_key in ("anyOf", "oneOf"):
        for branch in schema.get(branch_key) or []:
            types += [t for t in schema_types(branch) if t not in types]
    if not types and "enum" in schema:
        for value in schema["enum"]:
            name = _json_type(value)
            if name not in types:
                types.append(name)
    return types


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _structured(text: str, kind: type) -> Any:
    for load in (json.loads, ast.literal_eval):
        try:
            value = load(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, kind):
            return value
    return None


def convert_value(text: str, schema: dict | None) -> Any:
    """The JSON value of an argument written as ``text``, typed by its property ``schema``.

    Without a schema (or a type in it) the text stays a string.
    """
    types = schema_types(schema)
    stripped = text.strip()
    if not types or types == ["string"]:
        return text
    for kind in types:
        if kind == "null" and stripped.lower() in ("null", "none"):
            return None
        if kind == "integer" and _INT.fullmatch(stripped):
            return int(stripped)
        if kind == "number" and _NUMBER.fullmatch(stripped):
            number = float(stripped)
            return int(stripped) if _INT.fullmatch(stripped) else number
        if kind == "boolean" and stripped.lower() in ("true", "false"):
            return stripped.lower() == "true"
        if kind == "object":
            value = _structured(stripped, dict)
            if value is not None:
                return value
        if kind == "array":
            value = _structured(stripped, list)
            if value is not None:
                return value
    if "string" in types:
        return text
    try:
        return json.loads(stripped)
    except ValueError:
        return text


class ArgumentsWriter:
    """Writes an arguments object one member at a time, as JSON text fragments."""

    def __init__(self) -> None:
        self.count = 0

    def member(self, key: str, value: Any) -> str:
        lead = "{" if self.count == 0 else ", "
        self.count += 1
        return (
            f"{lead}{json.dumps(key, ensure_ascii=False)}: {json.dumps(value, ensure_ascii=False)}"
        )

    def close(self) -> str:
        return "}" if self.count else "{}"
