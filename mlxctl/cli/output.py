"""Output modes for commands: human, json and quiet.

Commands never ``print``. The result goes to stdout through :meth:`Output.data` (one JSON
document in json mode); messages, progress and warnings go to stderr so pipes stay clean.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, TextIO

import typer


class Mode(enum.Enum):
    """How a command reports: text for people, one JSON document, or the data alone."""

    HUMAN = "human"
    JSON = "json"
    QUIET = "quiet"


@dataclass
class Output:
    """Where and how a command writes; the streams are injectable for tests."""

    mode: Mode = Mode.HUMAN
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    stdin: TextIO = field(default_factory=lambda: sys.stdin)
    _sent_json: bool = field(default=False, init=False, repr=False)

    @classmethod
    def from_flags(cls, *, json: bool = False, quiet: bool = False, **streams: TextIO) -> Output:
        """The mode for ``--json`` / ``--quiet``; asking for both is a usage error."""
        if json and quiet:
            raise typer.BadParameter("--json and --quiet cannot be used together")
        mode = Mode.JSON if json else Mode.QUIET if quiet else Mode.HUMAN
        return cls(mode, **streams)

    @property
    def is_json(self) -> bool:
        return self.mode is Mode.JSON

    def data(self, value: Any, *, human: str | None = None) -> None:
        """The command's result: JSON in json mode, else ``human`` or a plain rendering."""
        if self.is_json:
            self._json(value)
        else:
            self._line(self.stdout, human if human is not None else render_text(value))

    def text(self, chunk: str) -> None:
        """Stream raw text to stdout (tokens as they come); not for json mode."""
        if self.is_json:
            raise RuntimeError("Output.text() in json mode: collect the text and call data()")
        self.stdout.write(chunk)
        self.stdout.flush()

    def message(self, text: str) -> None:
        """A note for the person at the terminal (silent with --quiet)."""
        if self.mode is not Mode.QUIET:
            self._line(self.stderr, text)

    @property
    def shows_progress(self) -> bool:
        """Whether progress is shown: stderr is a terminal and not --quiet."""
        return self.mode is not Mode.QUIET and _isatty(self.stderr)

    def progress(self, text: str) -> None:
        """A progress line, shown only when stderr is a terminal and not --quiet."""
        if self.shows_progress:
            self._line(self.stderr, text)

    def warn(self, text: str) -> None:
        """A warning; shown in every mode."""
        self._line(self.stderr, f"mlxctl: warning: {text}")

    def read_stdin(self) -> str:
        """All of stdin as text."""
        return self.stdin.read()

    @property
    def stdin_is_tty(self) -> bool:
        return _isatty(self.stdin)

    def _json(self, value: Any) -> None:
        if self._sent_json:
            raise RuntimeError("json mode prints one document: call Output.data() once")
        self._sent_json = True
        document = json.dumps(value, indent=2, ensure_ascii=False, default=_jsonable)
        self._line(self.stdout, document)

    @staticmethod
    def _line(stream: TextIO, text: str) -> None:
        stream.write(text if text.endswith("\n") else text + "\n")
        stream.flush()


def render_text(value: Any) -> str:
    """A plain rendering: strings as they are, mappings as ``key: value``, lists by line."""
    if isinstance(value, str):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, Mapping):
        return "\n".join(f"{key}: {item}" for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return "\n".join(render_text(item) for item in value)
    return str(value)


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _isatty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
