"""`mlxctl run`: one prompt in, streamed tokens out (composes in pipes)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from mlxctl.errors import NotImplementedYetError


def run(
    prompt: Annotated[Optional[list[str]], typer.Argument(help="The prompt; read from stdin when omitted or '-'.")] = None,
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Model reference: catalog name, folder, .gguf file or Hugging Face repo id.")] = None,
) -> None:
    """Generate a completion for PROMPT and stream it to stdout."""
    raise NotImplementedYetError("run: not built yet")
