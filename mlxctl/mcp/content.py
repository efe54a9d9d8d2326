"""A tool result's content blocks as the text a model reads back."""

from __future__ import annotations

import json
from typing import Any


def render_content(content: list[dict[str, Any]], structured: Any) -> str:
    """Text blocks as they are, other blocks as one-line notes; structured content if nothing else."""
    parts = [_render_block(item) for item in content]
    if not parts and structured is not None:
        return json.dumps(structured, ensure_ascii=False)
    return "\n".join(parts)


def _render_block(item: dict[str, Any]) -> str:
    kind = item.get("type")
    if kind == "text":
        return str(item.get("text", ""))
    if kind in ("image", "audio"):
        return f"[{kind}: {item.get('mimeType', 'unknown type')}, {_b64_size(item.get('data'))} bytes]"
    if kind == "resource_link":
        label = item.get("title") or item.get("name") or ""
        return f"[resource link: {label} <{item.get('uri', '')}>]".replace(":  <", ": <")
    if kind == "resource":
        return _render_resource(item.get("resource") or {})
    return f"[{kind or 'unknown'} content]"


def _render_resource(res: dict[str, Any]) -> str:
    if "text" in res:
        return str(res["text"])
    mime = res.get("mimeType", "unknown type")
    return f"[resource {res.get('uri', '')}: {mime}, {_b64_size(res.get('blob'))} bytes]"


def _b64_size(data: Any) -> int:
    if not isinstance(data, str):
        return 0
    stripped = data.rstrip("=")
    return len(stripped) * 3 // 4
