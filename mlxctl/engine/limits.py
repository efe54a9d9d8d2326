"""Admission checks on a prompt against the model's context (never truncate silently)."""

from __future__ import annotations

import dataclasses
from typing import Any

from mlxctl.errors import BadInputError, ContextOverflowError


def check_prompt(prompt_len: int, max_tokens: int | None, context_length: int, field: str | None = None) -> int:
    """Return how many new tokens the request may generate, or raise BadInputError.

    ``field`` names where ``max_tokens`` came from (a request field such as ``max_tokens`` or
    ``max_output_tokens``, or a CLI flag): a value the client asked for that does not fit what
    the prompt leaves of the context is refused, naming it (as OpenAI, Anthropic and vLLM do).
    Without ``field`` the value is a default, capped to that room; None means "up to the context"."""
    if prompt_len == 0:
        raise BadInputError("the prompt is empty", param="prompt")
    if prompt_len >= context_length:
        raise ContextOverflowError(
            f"the prompt has {prompt_len} tokens but the model's context is {context_length}: "
            "nothing was truncated; shorten the prompt",
            prompt_tokens=prompt_len, context_length=context_length,
        )
    room = context_length - prompt_len
    if max_tokens is None:
        return room
    if field is not None and max_tokens > room:
        raise ContextOverflowError(
            f"{field} is {max_tokens} but the prompt has {prompt_len} tokens and the model's context is "
            f"{context_length}: at most {room} new tokens fit",
            prompt_tokens=prompt_len, context_length=context_length, max_tokens=max_tokens, param=field,
        )
    return min(max_tokens, room)


def with_context_cap(loaded: Any, cap: int | None, at_most: bool = False) -> Any:
    """``loaded`` with ``--max-model-len`` as its context: every request is checked against it
    (``check_prompt``) and ``/v1/models`` reports it. A cap above the model's own context is
    refused (positions past what it was trained on are not a setting to slip in silently), unless
    ``at_most``: serve's flag as the default of a pool model, which keeps a shorter context of its own."""
    if cap is None:
        return loaded
    own = loaded.context_length
    if at_most and cap >= own:
        return loaded
    if cap > own:
        raise BadInputError(f"--max-model-len {cap} is more than {loaded.name}'s context ({own} tokens)",
                            hint=f"use at most {own}")
    return dataclasses.replace(loaded, context_length=cap)
