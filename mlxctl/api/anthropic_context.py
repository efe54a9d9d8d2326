"""Anthropic's ``context_management`` edits: accepted where they change nothing, else a 400.

An edit asks the server to clear parts of the conversation before it is rendered. We clear
nothing, so an edit is only accepted when clearing would leave this request's prompt as it is
(the field is then advisory, as Claude Code sends it on every request):

* ``clear_thinking_20251015`` with ``keep: "all"``, or with ``keep: {"type": "thinking_turns",
  "value": N}`` when no assistant turn older than the last N carries thinking blocks;
* anything else (``clear_tool_uses_20250919``, a ``clear_thinking`` that would drop thinking,
  unknown edits) is refused, naming the edit.
"""

from __future__ import annotations

from typing import Any

CLEAR_THINKING = "clear_thinking_20251015"


def _thinking_turns(messages: list[Any]) -> list[int]:
    """Indices of the assistant messages that carry thinking blocks."""
    return [i for i, m in enumerate(messages) if m.role == "assistant" and isinstance(m.content, list)
            and any(getattr(b, "type", None) in ("thinking", "redacted_thinking") for b in m.content)]


def _keeps_everything(keep: Any, messages: list[Any]) -> bool:
    if keep == "all":
        return True
    if isinstance(keep, dict) and keep.get("type") == "thinking_turns" and set(keep) == {"type", "value"} \
            and isinstance(keep["value"], int) and not isinstance(keep["value"], bool) and keep["value"] >= 0:
        assistants = [i for i, m in enumerate(messages) if m.role == "assistant"]
        kept = set(assistants[len(assistants) - keep["value"]:]) if keep["value"] else set()
        return all(i in kept for i in _thinking_turns(messages))
    return False


def check_edits(edits: list[Any], messages: list[Any]) -> None:
    """A ValueError naming the first edit that would change the prompt (see the module)."""
    for i, edit in enumerate(edits):
        kind = edit.get("type") if isinstance(edit, dict) else None
        where = f"edits[{i}] ({kind!r})"
        if kind != CLEAR_THINKING:
            raise ValueError(f"{where} is not supported: mlxctl clears nothing from the conversation, so it only "
                             f"accepts {CLEAR_THINKING} edits that keep every thinking block sent")
        if set(edit) - {"type", "keep"}:
            raise ValueError(f"{where}: unknown keys {sorted(set(edit) - {'type', 'keep'})}")
        if not _keeps_everything(edit.get("keep", {"type": "thinking_turns", "value": 1}), messages):
            raise ValueError(f"{where} would clear thinking blocks this request sends, which mlxctl does not do: "
                             "send keep: \"all\", or leave those blocks out")
