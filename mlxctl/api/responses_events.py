"""Responses API streaming events, numbered in the order they are sent.

response.created -> response.in_progress -> response.output_item.added ->
response.content_part.added -> response.output_text.delta ... -> response.output_text.done ->
response.content_part.done -> response.output_item.done -> response.completed (or
response.incomplete when max_output_tokens cut it short).
"""

from __future__ import annotations

from dataclasses import dataclass

from mlxctl.api.responses_objects import ResponseDraft, text_part


@dataclass
class ResponseEvents:
    """Builds one response's events; each carries the next ``sequence_number``."""

    draft: ResponseDraft
    sequence: int = 0

    def _event(self, kind: str, **fields) -> dict:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event

    def _where(self) -> dict:
        return {"item_id": self.draft.item_id, "output_index": 0, "content_index": 0}

    def opening(self) -> list[dict]:
        body, item = self.draft.in_progress(), self.draft.message_item("", "in_progress")
        return [self._event("response.created", response=body),
                self._event("response.in_progress", response=body),
                self._event("response.output_item.added", output_index=0, item=item),
                self._event("response.content_part.added", **self._where(), part=text_part(""))]

    def delta(self, text: str) -> dict:
        return self._event("response.output_text.delta", **self._where(), delta=text, logprobs=[])

    def closing(self, final: dict) -> list[dict]:
        """``final`` is the finished response body, its one output item holding the whole text."""
        item = final["output"][0]
        part = item["content"][0]
        done = "response.completed" if final["status"] == "completed" else "response.incomplete"
        return [self._event("response.output_text.done", **self._where(), text=part["text"], logprobs=[]),
                self._event("response.content_part.done", **self._where(), part=part),
                self._event("response.output_item.done", output_index=0, item=item),
                self._event(done, response=final)]

    def error(self, code: str, message: str) -> dict:
        return self._event("error", code=code, message=message, param=None)
