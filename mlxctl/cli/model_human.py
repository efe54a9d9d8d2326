"""Human renderings shared by the `mlxctl model` commands: byte sizes and plain rich tables."""

from __future__ import annotations

from typing import Any


def human_bytes(n: int | None) -> str:
    if n is None:
        return "unknown"
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"


def render(table: Any) -> str:
    """A rich table as plain text at the terminal's width, trailing blanks stripped."""
    import io
    import shutil

    from rich.console import Console

    buffer = io.StringIO()
    width = shutil.get_terminal_size((100, 24)).columns
    Console(file=buffer, width=width, color_system=None, highlight=False).print(table)
    lines = [line.rstrip() for line in buffer.getvalue().splitlines()]
    return "\n".join(lines).strip("\n")
