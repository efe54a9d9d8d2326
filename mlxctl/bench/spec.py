"""One request to send: its prompt or messages, its limits, and the checks on its reply."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlxctl.bench.checks import Checks

OPTIONAL_FIELDS = ("ignore_eos", "stream_options")  # extensions a server may refuse with a 400


@dataclass(frozen=True)
class RequestSpec:
    """A request independent of the server it goes to."""

    name: str
    prompt: str | None = None
    messages: tuple[dict[str, Any], ...] | None = None
    max_tokens: int = 128
    temperature: float = 0.0
    ignore_eos: bool = False
    checks: Checks | None = None

    def body(self, endpoint: str, model: str) -> dict[str, Any]:
        """The streamed JSON body for ``chat`` or ``completions``, usage asked for."""
        body: dict[str, Any] = {"model": model, **self._input(endpoint)}
        body |= {"max_tokens": self.max_tokens, "temperature": self.temperature, "stream": True}
        body["stream_options"] = {"include_usage": True}
        if self.ignore_eos:
            body["ignore_eos"] = True
        return body

    def _input(self, endpoint: str) -> dict[str, Any]:
        if endpoint == "chat":
            return {"messages": list(self.messages or ({"role": "user", "content": self.prompt},))}
        return {"prompt": self.prompt if self.prompt is not None else _flatten(self.messages or ())}


def _flatten(messages: tuple[dict[str, Any], ...]) -> str:
    """Messages as plain text for the completions endpoint (no chat template)."""
    return "\n".join(str(message.get("content", "")) for message in messages)
