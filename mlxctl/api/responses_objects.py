"""Responses API objects: the response, its one output message item, and that item's text part."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from mlxctl.api.responses_models import ResponsesRequest


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def text_part(text: str) -> dict:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


@dataclass
class ResponseDraft:
    """One response being made: its ids and the request fields the response object echoes."""

    req: ResponsesRequest
    id: str = field(default_factory=lambda: new_id("resp"))
    item_id: str = field(default_factory=lambda: new_id("msg"))
    created_at: int = field(default_factory=lambda: int(time.time()))

    def message_item(self, text: str, status: str) -> dict:
        content = [text_part(text)] if status != "in_progress" else []
        return {"id": self.item_id, "type": "message", "status": status, "role": "assistant",
                "content": content}

    def body(self, status: str, output: list[dict], usage: dict | None = None,
             incomplete: dict | None = None) -> dict:
        req = self.req
        return {
            "id": self.id, "object": "response", "created_at": self.created_at, "status": status,
            "error": None, "incomplete_details": incomplete, "instructions": req.instructions,
            "max_output_tokens": req.max_output_tokens, "model": req.model, "output": output,
            "parallel_tool_calls": False, "previous_response_id": req.previous_response_id,
            "reasoning": {"effort": None, "summary": None}, "store": req.store,
            "temperature": 1.0 if req.temperature is None else req.temperature,
            "text": {"format": {"type": "text"}}, "tool_choice": "none", "tools": [],
            "top_p": 1.0 if req.top_p is None else req.top_p, "truncation": "disabled",
            "usage": usage, "user": req.user, "metadata": req.metadata or {},
        }

    def in_progress(self) -> dict:
        return self.body("in_progress", [])
