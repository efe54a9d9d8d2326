"""`mlxctl model qualify`: check that a model loads, chats, calls tools and answers in JSON."""

from __future__ import annotations

from typing import Annotated

import typer

from mlxctl.cli.context import output_for
from mlxctl.cli.options import JsonOpt, ServerKeyOpt
from mlxctl.cli.output import Output
from mlxctl.errors import BadInputError

QualifyModelArg = Annotated[
    str | None,
    typer.Argument(
        metavar="MODEL",
        help="The model to load (store name, catalog name, folder, .gguf file or Hugging Face "
        "repo id); with --url, which served model to check (default: the first listed).",
        show_default=False,
    ),
]
QualifyUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--url",
        metavar="URL",
        help="Check a running OpenAI-compatible server instead of loading MODEL here.",
        show_default=False,
    ),
]


def qualify(
    ctx: typer.Context,
    model: QualifyModelArg = None,
    url: QualifyUrlOpt = None,
    api_key: ServerKeyOpt = None,
    json: JsonOpt = False,
) -> None:
    """Check that MODEL loads, chats, calls tools and answers in JSON here; print a scorecard.

    Checks: it loads (time); the chat template renders; greedy generation is deterministic; a
    forced tool call is parsed and, given the tool's result, the model answers in text; JSON
    mode gives valid JSON; then TTFT, decode tokens/s and peak memory. In process the model is
    served on a loopback port so every check goes through the OpenAI API, as with --url.
    Exits 7 when a check fails.
    """
    _qualify(output_for(ctx, json=json), model, url, api_key)


def _qualify(out: Output, model: str | None, url: str | None, api_key: str | None) -> None:
    from mlxctl.errors import CheckFailedError
    from mlxctl.models.qualify import qualify_model, qualify_url, scorecard_text

    if url is not None:
        card = qualify_url(url, model=model, api_key=api_key, progress=out.progress)
    elif model is not None and (kind := _media_kind(model)) is not None:
        from mlxctl.models.qualify_media import qualify_kind

        card = qualify_kind(kind, model, progress=out.progress)
    elif model is not None:
        from mlxctl.server.runner import served_engine

        card = qualify_model(model, serve=served_engine, progress=out.progress)
    else:
        raise BadInputError("give a MODEL to load, or --url of a running server")
    out.data(card.as_dict(), human=scorecard_text(card))
    if not card.passed:
        names = ", ".join(c.name for c in card.failed)
        raise CheckFailedError(f"{card.model} failed {len(card.failed)} of {len(card.checks)} "
                               f"checks: {names}")  # fmt: skip


def _media_kind(ref: str) -> str | None:
    """embed, stt or tts for catalog (or store) models of those kinds; None for chat models."""
    from mlxctl.models.catalog import catalog_entry

    entry = catalog_entry(ref)
    kind = getattr(entry, "kind", None)
    return kind if kind in ("embed", "stt", "tts") else None
