"""Definitions (``$defs`` / ``definitions``) of tool schemas moved to the root of a schema that
nests them.

A tool's parameters schema refers to its definitions from its own root (``#/$defs/Unit``, as
pydantic writes them for a nested model or an Enum). Nested under ``arguments`` of a call object
(or an array of them), those pointers no longer resolve, so the definitions of every tool are
hoisted to the combined schema's root ``$defs``; a name already taken there (by another tool, or
by the same tool's ``definitions`` beside its ``$defs``) is renamed (``Unit_2``, ...), and the
refs of that tool are rewritten to match. Refs that are not to a
definition (``#``, ``#/properties/...``, remote ones) are left as they are.
"""

from __future__ import annotations

import re
from typing import Any

_KINDS = ("$defs", "definitions")
_REF = re.compile(r"#/(\$defs|definitions)/([^/]+)(/.*)?")


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _fresh(name: str, root: dict) -> str:
    """``name`` where ``root`` lacks it, else ``name_N``. Never shared, even when equal: an equal
    definition may still refer to a different tool's namesakes."""
    candidate, n = name, 1
    while candidate in root:
        n += 1
        candidate = f"{name}_{n}"
    return candidate


def _rewrite(node: Any, names: dict[tuple[str, str], str]) -> Any:
    """``node`` with every ref to a renamed definition pointing at its root name."""
    if isinstance(node, list):
        return [_rewrite(v, names) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _rewrite(v, names) for k, v in node.items()}
    ref = node.get("$ref")
    match = _REF.fullmatch(ref) if isinstance(ref, str) else None
    if match and (match[1], _unescape(match[2])) in names:
        out["$ref"] = f"#/$defs/{_escape(names[match[1], _unescape(match[2])])}{match[3] or ''}"
    return out


def hoist(schema: dict, root: dict) -> dict:
    """``schema`` without its definitions, which join ``root`` (the combined ``$defs``, updated
    in place); its refs to them rewritten to the names they have there."""
    defs = {(kind, k): v for kind in _KINDS if isinstance(schema.get(kind), dict)
            for k, v in schema[kind].items()}
    if not defs:
        return schema
    names: dict[tuple[str, str], str] = {}
    for key in defs:
        names[key] = _fresh(key[1], root)
        root.setdefault(names[key], None)  # reserve the name for this tool's other definitions
    for key, value in defs.items():
        root[names[key]] = _rewrite(value, names)
    return _rewrite({k: v for k, v in schema.items() if k not in _KINDS}, names)
