"""``--speculative``, ``--num-draft-tokens``, ``--grow-drafts``, ``--draft-model`` and
``--draft-dtype``, checked before any model loads."""

from __future__ import annotations

import typer

from mlxctl.cli.context import given_on_command_line
from mlxctl.engine.speculative import MAX_DRAFT_TOKENS, MODES, SpeculationConfig
from mlxctl.errors import BadInputError


def speculation_flags(ctx: typer.Context, mode: str, num_draft_tokens: int, draft_model: str | None = None,
                      draft_dtype: str = "auto", tensor_parallel: int = 1,
                      grow: bool | None = None) -> SpeculationConfig:
    """The engine's speculation settings from the flags; a one-line error for a bad value or a
    flag that would do nothing."""
    from mlxctl.models.loader import check_dtype

    if mode not in MODES:
        raise BadInputError(f"unknown --speculative mode {mode!r}", hint=f"choose one of: {', '.join(MODES)}")
    if not 1 <= num_draft_tokens <= MAX_DRAFT_TOKENS:
        raise BadInputError(f"--num-draft-tokens must be between 1 and {MAX_DRAFT_TOKENS}, got {num_draft_tokens}")
    for flag, name in (("--num-draft-tokens", "num_draft_tokens"), ("--draft-dtype", "draft_dtype")):
        if mode == "off" and given_on_command_line(ctx, name):
            raise BadInputError(f"{flag} needs --speculative", hint="add --speculative ngram or draft")
    if grow is not None and mode != "ngram":
        flag = "--grow-drafts" if grow else "--no-grow-drafts"
        raise BadInputError(f"{flag} needs --speculative ngram", hint="drafts grow by prompt lookup only")
    if mode == "draft" and not draft_model:
        raise BadInputError("--speculative draft needs --draft-model", hint="name a smaller model of the same family")
    if draft_model and mode != "draft":
        raise BadInputError("--draft-model needs --speculative draft")
    if mode != "off" and tensor_parallel > 1:
        raise BadInputError("--speculative does not run with --tensor-parallel yet", hint="drop one of them")
    try:
        check_dtype(draft_dtype)
    except BadInputError as exc:
        raise BadInputError(f"--draft-dtype: {exc}", hint=exc.hint) from None
    return SpeculationConfig(mode, num_draft_tokens, draft_model, draft_dtype, grow=grow)
