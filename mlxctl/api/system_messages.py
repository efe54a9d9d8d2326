"""System messages inside a conversation (``messages[].role: "system"`` after the first message).

Claude Code sends one mid-conversation when its Agent tool is on; every protocol's chat is
rendered through :func:`render_with_systems` (api/chat_request.py). Such a message is rendered
where it stands when the model's chat template takes it there: the template renders the
conversation without error and the message's text is in the prompt (ChatML templates such as
SmolLM2's and Qwen's do). Otherwise (a template that raises on a system message after the first,
or drops it) every system message is merged into the top-level system text instead: the
top-level ``system`` first, then each system message's text in conversation order, separated by
a blank line, as one system message at the start.
"""

from __future__ import annotations

from typing import Any, Callable

from mlxctl.errors import BadInputError

Render = Callable[[list[dict[str, Any]]], tuple[list[int], bool]]


def later_systems(messages: list[dict[str, Any]]) -> list[str]:
    """Texts of the system messages after the first message."""
    return [m["content"] for m in messages[1:] if m.get("role") == "system"]


def merged_systems(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation with every system message merged into one at the start."""
    texts = [m["content"] for m in messages if m.get("role") == "system" and m["content"]]
    rest = [m for m in messages if m.get("role") != "system"]
    return ([{"role": "system", "content": "\n\n".join(texts)}] if texts else []) + rest


def render_with_systems(render: Render, decode: Callable[[list[int]], str],
                        messages: list[dict[str, Any]]) -> tuple[list[int], bool]:
    """``render(messages)``, its system messages in place where the template renders them so,
    else merged (see the module)."""
    later = later_systems(messages)
    if not later:
        return render(messages)
    try:
        tokens, opens = render(messages)
    except BadInputError:
        return render(merged_systems(messages))
    text = decode(tokens)
    if all(s in text for s in later):
        return tokens, opens
    return render(merged_systems(messages))
