"""A cap on how deeply JSON a client sends may nest (request bodies, tool-call arguments).

Without it a body of ten thousand ``[`` exhausts the parser's recursion (and whatever walks the
value afterwards: validation, chat templates, grammars), which would be a 500 instead of a 400.
"""

from __future__ import annotations

import json
from typing import Any

# arrays and objects inside one another: far more than a real request needs (a tool's parameter
# schema nests two levels per nested object, and OpenAI caps structured outputs at 10 objects
# deep), far less than what would exhaust the parser's or the handlers' recursion
MAX_JSON_DEPTH = 128


class JsonTooDeep(ValueError):
    def __init__(self) -> None:
        super().__init__(f"JSON nested too deep: more than {MAX_JSON_DEPTH} levels of arrays and objects")


def loads_bounded(text: str | bytes) -> Any:
    """``json.loads``, raising :class:`JsonTooDeep` past ``MAX_JSON_DEPTH`` (and
    ``json.JSONDecodeError`` / ``UnicodeDecodeError`` as it does)."""
    try:
        value = json.loads(text)
    except RecursionError:  # deeper than the interpreter's own limit, long past MAX_JSON_DEPTH
        raise JsonTooDeep() from None
    if nested_deeper_than(value, MAX_JSON_DEPTH):
        raise JsonTooDeep()
    return value


def nested_deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` has more than ``limit`` levels of arrays and objects (walked level by
    level, without recursion: a scalar is 0 deep, ``{}`` 1, ``[{}]`` 2)."""
    level = [value] if isinstance(value, (dict, list)) else []
    for _ in range(limit):
        if not level:
            return False
        level = [child for node in level for child in (node.values() if isinstance(node, dict) else node)
                 if isinstance(child, (dict, list))]
    return bool(level)
