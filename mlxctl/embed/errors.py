"""Errors of the embedding path that callers (CLI, server) want to tell apart."""

from __future__ import annotations

from mlxctl.errors import BadInputError


class InputTooLongError(BadInputError):
    """An input with more tokens than the model takes (and truncation was not asked for)."""

    def __init__(self, index: int, tokens: int, limit: int, model: str, hint: str | None = None):
        super().__init__(
            f"input {index} has {tokens} tokens, more than the {limit} that {model} takes", hint=hint
        )
        self.index, self.tokens, self.limit = index, tokens, limit
