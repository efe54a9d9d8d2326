"""Admission checks on a prompt against the model's context (never truncate silently)."""

from __future__ import annotations

from mlxctl.errors import BadInputError


def check_prompt(prompt_len: int, max_tokens: int | None, context_length: int) -> int:
    """Return how many new tokens the request may generate, or raise BadInputError."""
    if prompt_len == 0:
        raise BadInputError("the prompt is empty", param="prompt")
    if prompt_len >= context_length:
        raise BadInputError(
            f"the prompt has {prompt_len} tokens but the model's context is {context_length}: "
            "nothing was truncated; shorten the prompt"
        )
    room = context_length - prompt_len
    return room if max_tokens is None else min(max_tokens, room)
