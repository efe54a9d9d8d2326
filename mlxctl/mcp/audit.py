"""What one tool call came to, and its audit trail: one JSON line to the log and an optional file."""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

log = logging.getLogger("mlxctl.mcp")


@dataclass
class ToolResult:
    """What one tool call came to, ready to hand back to a model as the tool message."""

    text: str
    is_error: bool
    server: str | None
    tool: str | None
    duration_s: float
    name: str = ""  # the qualified name the call asked for
    structured: Any = None  # the server's structuredContent, if it sent any

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "server": self.server,
            "tool": self.tool,
            "text": self.text,
            "is_error": self.is_error,
            "duration_s": self.duration_s,
        }


def write_audit(result: ToolResult, arguments: Any, path: Path | None, lock: threading.Lock) -> None:
    """Log the call as one JSON line, and append that line to ``path`` when there is one."""
    line = json.dumps(_record(result, arguments), ensure_ascii=False, default=str)
    log.info("mcp call %s", line)
    if path is None:
        return
    try:
        with lock, open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    except OSError as exc:
        log.error("cannot write MCP audit log %s: %s", path, exc)


def _record(result: ToolResult, arguments: Any) -> dict[str, Any]:
    return {
        "time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "name": result.name,
        "server": result.server,
        "tool": result.tool,
        "arguments": arguments,
        "is_error": result.is_error,
        "duration_s": result.duration_s,
        "result_chars": len(result.text),
    }
