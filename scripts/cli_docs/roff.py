"""Escaping text for roff (man pages)."""

from __future__ import annotations


def escape(text: str) -> str:
    """Text safe inside a roff line: backslashes and hyphens escaped."""
    return text.replace("\\", "\\e").replace("-", "\\-")


def line(text: str) -> str:
    """A text line that roff will not read as a request (leading ``.`` or ``'``)."""
    text = escape(text)
    return "\\&" + text if text.startswith((".", "'")) else text


def paragraphs(text: str) -> list[str]:
    """Roff lines for help text: blank-line separated paragraphs, each joined into one line."""
    out: list[str] = []
    for block in text.strip().split("\n\n"):
        words = " ".join(block.split())
        if words:
            out += [".PP", line(words)]
    return out


def quoted(text: str) -> str:
    """An argument to a macro such as ``.SS``: double quotes inside doubled."""
    return '"' + escape(text).replace('"', '""') + '"'
