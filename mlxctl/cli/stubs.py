"""Top-level verbs that exist in the tree but are not built yet.

Each is a real command with its docstring and main arguments, so ``--help``, completions and
the man page show the whole tool; running one exits with ``ExitStatus.NOT_IMPLEMENTED``.
When a verb gets built it moves to its own module and leaves ``COMMANDS`` here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mlxctl.cli.options import DEFAULT_URL, JsonOpt, ModelOpt, OutputPathOpt, UrlOpt
from mlxctl.errors import NotImplementedYetError

TextArgs = Annotated[
    Optional[list[str]],
    typer.Argument(
        metavar="TEXT", help="The text; read from stdin when omitted.", show_default=False
    ),
]
AudioArg = Annotated[
    Path, typer.Argument(metavar="AUDIO", help="Audio file to transcribe.", show_default=False)
]


def not_built(name: str) -> NotImplementedYetError:
    """The error a planned verb raises."""
    return NotImplementedYetError(f"'{name}' is not built yet (planned)")


def chat(model: ModelOpt = None) -> None:
    """Chat with a model in a terminal UI."""
    raise not_built("chat")


def embed(text: TextArgs = None, model: ModelOpt = None, json: JsonOpt = False) -> None:
    """Compute embedding vectors for TEXT."""
    raise not_built("embed")


def transcribe(audio: AudioArg, model: ModelOpt = None, json: JsonOpt = False) -> None:
    """Transcribe speech in AUDIO to text."""
    raise not_built("transcribe")


def speak(text: TextArgs = None, model: ModelOpt = None, output: OutputPathOpt = None) -> None:
    """Turn TEXT into speech."""
    raise not_built("speak")


IntervalOpt = Annotated[
    float,
    typer.Option("--interval", metavar="SECONDS", min=0.1, help="Seconds between polls of the server."),
]
TopKeyOpt = Annotated[
    Optional[str],
    typer.Option("--api-key", metavar="KEY", envvar="MLXCTL_API_KEY", show_default=False,
                 help="Bearer token for a server started with --api-key."),
]


def top(url: UrlOpt = DEFAULT_URL, interval: IntervalOpt = 1.0, api_key: TopKeyOpt = None) -> None:
    """Watch a running server live.

    Shows requests running and waiting, tokens per second, time to first token, prefix cache
    and memory use. Keys: q quit, p pause, r reset. Keeps retrying while the server is down.
    """
    import sys

    from mlxctl.errors import BadInputError
    from mlxctl.tui.client import base_url

    base = base_url(url)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise BadInputError("'top' needs a terminal", hint=f"for figures in scripts use curl {base}/v1/status")
    from mlxctl.tui.top import TopApp

    TopApp(url=base, interval=interval, api_key=api_key).run()


COMMANDS = {
    "chat": chat,
    "embed": embed,
    "transcribe": transcribe,
    "speak": speak,
    "top": top,
}
