"""Responses API streaming events, numbered in the order they are sent.

response.created -> response.in_progress -> then per output item, in the order the model
produces them: a reasoning item (response.reasoning_text.delta ...), the message
(response.content_part.added, response.output_text.delta ..., response.output_text.done,
response.content_part.done) and function calls (response.function_call_arguments.delta ...,
.done), each between response.output_item.added and response.output_item.done -> finally
response.completed (or response.incomplete when max_output_tokens cut it short).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlxctl.api.output_stream import REASONING, TEXT, Delta, Open, Segment
from mlxctl.api.responses_objects import ResponseDraft, new_id, reasoning_item, text_part


@dataclass
class ResponseEvents:
    """Builds one response's events from output segments (api/output_stream.py); each event
    carries the next ``sequence_number``. The items it closes (``items``) are the finished
    response's output."""

    draft: ResponseDraft
    sequence: int = 0
    items: list[dict] = field(default_factory=list)
    _open: dict | None = None  # the item being streamed
    cut: bool = False  # max_output_tokens cut the answer: its message item ends "incomplete"

    def _event(self, kind: str, **fields) -> dict:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event

    @property
    def _index(self) -> int:
        return len(self.items)

    def _where(self) -> dict:
        return {"item_id": self._open["id"], "output_index": self._index, "content_index": 0}

    def opening(self) -> list[dict]:
        body = self.draft.in_progress()
        return [self._event("response.created", response=body), self._event("response.in_progress", response=body)]

    def in_progress(self) -> dict:
        """A keep-alive: the response so far (the items closed), still in progress."""
        return self._event("response.in_progress", response=self.draft.body("in_progress", list(self.items)))

    def events(self, segments: list[Segment]) -> list[dict]:
        out: list[dict] = []
        for segment in segments:
            if isinstance(segment, Open):
                out += self._opened(segment)
            elif isinstance(segment, Delta):
                out.append(self._delta(segment))
            else:
                out += self._closed(segment)
        return out

    def closing(self, final: dict) -> list[dict]:
        done = "response.completed" if final["status"] == "completed" else "response.incomplete"
        return [self._event(done, response=final)]

    def failed(self, code: str, message: str) -> dict:
        """The stream's last event when the generation failed after it started, as the Responses
        API sends it: the response, status "failed", its ``error`` and the items closed so far."""
        body = self.draft.body("failed", list(self.items), error={"code": code, "message": message})
        return self._event("response.failed", response=body)

    def whole_item(self, item: dict, middle: list[tuple[str, dict]]) -> list[dict]:
        """An item complete when it is announced (mcp_list_tools, an mcp_call that ran): added,
        ``middle``'s (type, fields) events (item_id and output_index added), done."""
        where = {"item_id": item["id"], "output_index": self._index}
        out = [self._event("response.output_item.added", output_index=self._index, item=item)]
        out += [self._event(kind, **where, **fields) for kind, fields in middle]
        out.append(self._event("response.output_item.done", output_index=self._index, item=item))
        self.items.append(item)
        return out

    def _opened(self, part: Open) -> list[dict]:
        if part.part == REASONING:
            self._open = reasoning_item(new_id("rs"), None)
        elif part.part == TEXT:
            self._open = self.draft.message_item("", "in_progress")
        else:
            self._open = self.draft.call_item(new_id("fc"), part.call_id, part.name, "", "in_progress")
        out = [self._event("response.output_item.added", output_index=self._index, item=self._open)]
        if part.part == TEXT:
            out.append(self._event("response.content_part.added", **self._where(), part=text_part("")))
        return out

    def _delta(self, delta: Delta) -> dict:
        if delta.part == REASONING:
            return self._event("response.reasoning_text.delta", **self._where(), delta=delta.text)
        if delta.part == TEXT:
            return self._event("response.output_text.delta", **self._where(), delta=delta.text, logprobs=[])
        return self._event("response.function_call_arguments.delta", item_id=self._open["id"],
                           output_index=self._index, delta=delta.text)

    def _closed(self, part: Close) -> list[dict]:
        item, text, out = self._open, part.text, []
        if part.part == REASONING:
            done = reasoning_item(item["id"], text)
            out.append(self._event("response.reasoning_text.done", **self._where(), text=text))
        elif part.part == TEXT:
            done = self.draft.message_item(text, "incomplete" if self.cut else "completed")
            out += [self._event("response.output_text.done", **self._where(), text=text, logprobs=[]),
                    self._event("response.content_part.done", **self._where(), part=done["content"][0])]
        else:
            done = self.draft.call_item(item["id"], item["call_id"], item["name"], text, "completed",
                                        item.get("namespace"))
            out.append(self._event("response.function_call_arguments.done", item_id=item["id"],
                                   output_index=self._index, name=item["name"], arguments=text))
        out.append(self._event("response.output_item.done", output_index=self._index, item=done))
        self.items.append(done)
        self._open = None
        return out
