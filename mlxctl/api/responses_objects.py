"""Responses API objects: the response, its one output message item, and that item's text part."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from mlxctl.api.responses_models import ResponsesRequest
from mlxctl.api.responses_tools import namespaced, not_offered


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def text_part(text: str) -> dict:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def reasoning_item(item_id: str, text: str | None) -> dict:
    """A reasoning output item; ``text`` None while it streams."""
    content = [] if text is None else [{"type": "reasoning_text", "text": text}]
    return {"id": item_id, "type": "reasoning", "summary": [], "content": content}


def function_call_item(item_id: str, call_id: str, name: str, arguments: str, status: str) -> dict:
    return {"id": item_id, "type": "function_call", "status": status, "call_id": call_id, "name": name,
            "arguments": arguments}


def output_items(draft: "ResponseDraft", result, status: str) -> list[dict]:
    """A finished choice (reasoning, content, calls) as output items, in that order."""
    items = [reasoning_item(new_id("rs"), result.reasoning)] if result.reasoning else []
    if result.content or not (result.calls or result.reasoning):
        items.append(draft.message_item(result.content or "", status))
    return items + [draft.call_item(new_id("fc"), c.id, c.name, c.arguments, "completed") for c in result.calls]


@dataclass
class ResponseDraft:
    """One response being made: its ids and the request fields the response object echoes."""

    req: ResponsesRequest
    id: str = field(default_factory=lambda: new_id("resp"))
    item_id: str = field(default_factory=lambda: new_id("msg"))
    created_at: int = field(default_factory=lambda: int(time.time()))

    def call_item(self, item_id: str, call_id: str, name: str, arguments: str, status: str,
                  namespace: str | None = None) -> dict:
        """A function_call item; a namespaced function's (``name`` its flat name, or its own name
        with ``namespace``) names the function and its namespace apart, as OpenAI does."""
        item = function_call_item(item_id, call_id, name, arguments, status)
        if namespace is None:
            namespace, item["name"] = namespaced(self.req.tools).get(name, (None, name))
        if namespace is not None:
            item["namespace"] = namespace
        return item

    def message_item(self, text: str, status: str) -> dict:
        content = [text_part(text)] if status != "in_progress" else []
        return {"id": self.item_id, "type": "message", "status": status, "role": "assistant",
                "content": content}

    def body(self, status: str, output: list[dict], usage: dict | None = None,
             incomplete: dict | None = None, error: dict | None = None) -> dict:
        req = self.req
        return {
            "id": self.id, "object": "response", "created_at": self.created_at, "status": status,
            "error": error, "incomplete_details": incomplete, "instructions": req.instructions,
            "max_output_tokens": req.max_output_tokens, "model": req.model, "output": output,
            "parallel_tool_calls": req.parallel_tool_calls is not False,
            "previous_response_id": req.previous_response_id,
            "reasoning": {"effort": req.reasoning.effort if req.reasoning else None, "summary": None},
            "store": req.store, "temperature": 1.0 if req.temperature is None else req.temperature,
            "text": {"format": req.text.format.model_dump() if req.text and req.text.format else {"type": "text"}},
            "tool_choice": req.tool_choice if req.tool_choice is not None else ("auto" if req.tools else "none"),
            "tools": list(req.tools or []),
            "top_p": 1.0 if req.top_p is None else req.top_p, "truncation": "disabled",
            "usage": usage, "user": req.user, "metadata": req.metadata or {},
            **({"tools_not_offered": hosted} if (hosted := not_offered(req.tools)) else {}),
        }

    def in_progress(self) -> dict:
        return self.body("in_progress", [])
