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

from mlxctl.api.responses_objects import ResponseDraft, new_id, reasoning_item, text_part


@dataclass
class ResponseEvents:
    """Builds one response's events; each carries the next ``sequence_number``. The items it
    closes (``items``) are the finished response's output."""

    draft: ResponseDraft
    sequence: int = 0
    items: list[dict] = field(default_factory=list)
    _open: dict | None = None  # the item being streamed
    _text: str = ""  # its text so far (reasoning, message text or call arguments)
    _call: int | None = None  # the open function call's index among the parser's calls
    _blank: str = ""  # blank text held back: a message only if more text follows, or nothing is called

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

    def feed(self, split) -> list[dict]:
        out: list[dict] = []
        if split.reasoning:
            out += self._ensure("reasoning")
            out.append(self._event("response.reasoning_text.delta", **self._where(), delta=split.reasoning))
            self._text += split.reasoning
        if split.content:
            out += self._message_text(split.content)
        for delta in split.calls:
            if delta.id is not None:
                out += self._close()
                self._open, self._call, self._text = self.draft.call_item(new_id("fc"), delta.id, delta.name, "", "in_progress"), delta.index, ""
                out.append(self._event("response.output_item.added", output_index=self._index, item=self._open))
            if delta.arguments and self._call == delta.index:
                out.append(self._event("response.function_call_arguments.delta", item_id=self._open["id"],
                                       output_index=self._index, delta=delta.arguments))
                self._text += delta.arguments
        return out

    def finish(self) -> list[dict]:
        """Close the open item (an empty message when nothing at all was produced)."""
        called = any(item["type"] == "function_call" for item in [*self.items, self._open or {"type": None}])
        out = self._message_text("", final=True) if self._blank and not called else []
        if not self.items and self._open is None:
            out += self._ensure("message")
        self._blank = ""
        return out + self._close()

    def _message_text(self, text: str, final: bool = False) -> list[dict]:
        """Text for the message item; blank text does not open one (see ``output_items``) unless
        more text follows, or nothing else comes."""
        text, self._blank = self._blank + text, ""
        if not final and not text.strip() and (self._open is None or self._open["type"] != "message"):
            self._blank = text
            return []
        out = self._ensure("message")
        out.append(self._event("response.output_text.delta", **self._where(), delta=text, logprobs=[]))
        self._text += text
        return out

    def closing(self, final: dict) -> list[dict]:
        done = "response.completed" if final["status"] == "completed" else "response.incomplete"
        return [self._event(done, response=final)]

    def error(self, code: str, message: str) -> dict:
        return self._event("error", code=code, message=message, param=None)

    def _ensure(self, kind: str) -> list[dict]:
        if self._open is not None and self._open["type"] == kind:
            return []
        out = self._close()
        if kind == "reasoning":
            self._open = reasoning_item(new_id("rs"), None)
        else:
            self._open = self.draft.message_item("", "in_progress")
        out.append(self._event("response.output_item.added", output_index=self._index, item=self._open))
        if kind == "message":
            out.append(self._event("response.content_part.added", **self._where(), part=text_part("")))
        return out

    def _close(self) -> list[dict]:
        item, text = self._open, self._text
        if item is None:
            return []
        out = []
        if item["type"] == "reasoning":
            done = reasoning_item(item["id"], text)
            out.append(self._event("response.reasoning_text.done", **self._where(), text=text))
        elif item["type"] == "message":
            done = self.draft.message_item(text, "completed")
            out += [self._event("response.output_text.done", **self._where(), text=text, logprobs=[]),
                    self._event("response.content_part.done", **self._where(), part=done["content"][0])]
        else:
            done = self.draft.call_item(item["id"], item["call_id"], item["name"], text, "completed",
                                        item.get("namespace"))
            out.append(self._event("response.function_call_arguments.done", item_id=item["id"],
                                   output_index=self._index, name=item["name"], arguments=text))
        out.append(self._event("response.output_item.done", output_index=self._index, item=done))
        self.items.append(done)
        self._open, self._text, self._call = None, "", None
        return out
