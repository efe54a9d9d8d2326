"""``--speculative`` and ``--num-draft-tokens``, checked before any model loads."""

from __future__ import annotations

import typer

from mlxctl.cli.context import given_on_command_line
from mlxctl.engine.speculative import SpeculationConfig
from mlxctl.errors import BadInputError


def speculation_flags(ctx: typer.Context, mode: str, num_draft_tokens: int, tensor_parallel: int = 1) -> SpeculationConfig:
    """The engine's speculation settings from the flags; a one-line error for a bad value or a
    flag that would do nothing."""
    try:
        config = SpeculationConfig(mode=mode, num_draft_tokens=num_draft_tokens)
    except BadInputError as exc:
        raise BadInputError(str(exc).replace("speculative mode", "--speculative mode")
                            .replace("num_draft_tokens", "--num-draft-tokens"), hint=exc.hint) from None
    if not config.enabled and given_on_command_line(ctx, "num_draft_tokens"):
        raise BadInputError("--num-draft-tokens needs --speculative", hint="add --speculative ngram")
    if config.enabled and tensor_parallel > 1:
        raise BadInputError("--speculative does not run with --tensor-parallel yet", hint="drop one of them")
    return config

