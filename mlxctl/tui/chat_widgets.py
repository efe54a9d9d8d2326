"""The transcript's widgets in `mlxctl chat`: a user's message and an assistant's answer.

:class:`AssistantTurn` streams an answer in (one ``MarkdownStream`` for the content and one for
the reasoning, which sits in a collapsed ``Collapsible``) and folds streamed tool-call fragments
into whole calls; :func:`stats_text` is the line under an answer (TTFT, tok/s, tokens).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Collapsible, Markdown, Static

from mlxctl.tui import fmt
from mlxctl.tui.chat_backend import CallDelta, Delta, Done


class UserTurn(Vertical):
    """A user's (or a tool result's) message; ``images``: a line for each image it carries."""

    def __init__(self, text: str, role: str = "user", images: Sequence[str] = ()):
        super().__init__(classes=f"turn {role}")
        self.text = text
        self.images = list(images)
        self.border_title = "you" if role == "user" else "tool result"

    def compose(self) -> ComposeResult:
        if self.images:
            yield Static(Text("\n".join(self.images)), classes="images")
        yield Markdown(self.text, classes="content")


class AssistantTurn(Vertical):
    """One answer: reasoning (collapsed), the content as Markdown, tool calls; streamed or whole."""

    def __init__(self, message: dict | None = None):
        super().__init__(classes="turn assistant")
        self.border_title = "assistant"
        message = message or {}
        self.reasoning = message.get("reasoning_content") or ""
        self.content = message.get("content") or ""
        self.calls: list[dict] = [dict(c) for c in message.get("tool_calls") or ()]
        self._content_stream = None
        self._reasoning_stream = None

    def compose(self) -> ComposeResult:
        if self.reasoning:
            yield Collapsible(Markdown(self.reasoning, classes="reasoning"), title="Reasoning", collapsed=True)
        yield Markdown(self.content, classes="content")
        yield Static(calls_text(self.calls), classes="calls")

    def on_mount(self) -> None:
        self.query_one(".calls").display = bool(self.calls)

    # streaming

    async def add(self, delta: Delta) -> None:
        if delta.reasoning:
            if self._reasoning_stream is None:
                if not self.query(Collapsible):
                    box = Collapsible(Markdown(classes="reasoning"), title="Reasoning …", collapsed=True)
                    await self.mount(box, before=self.query_one(".content"))
                self._reasoning_stream = Markdown.get_stream(self.query_one(".reasoning", Markdown))
            self.reasoning += delta.reasoning
            await self._reasoning_stream.write(delta.reasoning)
        if delta.content:
            if self._content_stream is None:
                self._content_stream = Markdown.get_stream(self.query_one(".content", Markdown))
            self.content += delta.content
            await self._content_stream.write(delta.content)
        if delta.calls:
            merge_calls(self.calls, delta.calls)
            calls = self.query_one(".calls", Static)
            calls.update(calls_text(self.calls))
            calls.display = True

    async def finish(self, note: str | None = None) -> None:
        """Flush the Markdown streams; ``note`` (stopped, an error) goes under the answer."""
        for stream in (self._reasoning_stream, self._content_stream):
            if stream is not None:
                await stream.stop()
        self._reasoning_stream = self._content_stream = None
        for box in self.query(Collapsible):
            box.title = "Reasoning"
        if note:
            self.border_subtitle = note

    def message(self) -> dict:
        out: dict = {"role": "assistant", "content": self.content}
        if self.reasoning:
            out["reasoning_content"] = self.reasoning
        if self.calls:
            out["tool_calls"] = [{"id": c.get("id") or f"call_{i}", "type": "function",
                                  "function": {"name": c["function"]["name"],
                                               "arguments": c["function"]["arguments"]}}
                                 for i, c in enumerate(self.calls)]
        return out


def merge_calls(calls: list[dict], deltas: list[CallDelta]) -> None:
    """Fold streamed call fragments into whole OpenAI-shaped calls, by index."""
    for d in deltas:
        while len(calls) <= d.index:
            calls.append({"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
        call = calls[d.index]
        if d.id:
            call["id"] = d.id
        if d.name:
            call["function"]["name"] = d.name
        call["function"]["arguments"] += d.arguments


def calls_text(calls: list[dict]) -> Text:
    text = Text()
    for call in calls:
        fn = call.get("function") or {}
        if text:
            text.append("\n")
        text.append("tool call ", style="bold")
        text.append(str(fn.get("name") or "?"), style="bold magenta")
        text.append(f" {fn.get('arguments') or '{}'}")
    return text


def stats_text(done: Done) -> str:
    parts = []
    if done.ttft_s is not None:
        parts.append(f"TTFT {done.ttft_s * 1000:,.0f} ms")
    if done.tokens_per_s is not None:
        parts.append(fmt.rate(done.tokens_per_s))
    if done.completion_tokens is not None:
        parts.append(f"{done.completion_tokens} tokens")
    if done.finish_reason:
        parts.append(done.finish_reason)
    return " · ".join(parts)
