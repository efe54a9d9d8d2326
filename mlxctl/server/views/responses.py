"""POST /v1/responses and GET/DELETE /v1/responses/{response_id} (OpenAI Responses API)."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from mlxctl.api.chat_request import prepare_chat
from mlxctl.api.chat_round import RoundResult
from mlxctl.api.responses_mcp import is_mcp_tool, mcp_call_item
from mlxctl.api.chat_split import OutputSplitter, SplitResult
from mlxctl.api.openai_models import KeepAlive
from mlxctl.api.openai_pieces import Piece
from mlxctl.api.output_stream import ChoiceSegments
from mlxctl.api.response_store import StoredResponse
from mlxctl.api.responses_events import ResponseEvents
from mlxctl.api.responses_models import ResponsesRequest
from mlxctl.api.responses_objects import ResponseDraft, new_id
from mlxctl.api.responses_translate import (
    chat_request,
    conversation,
    finished_body,
    image_refs,
    with_reply,
)
from mlxctl.engine.events import FinishEvent, FinishReason, Usage
from mlxctl.server.body import parse_body
from mlxctl.server.errors import ApiError
from mlxctl.server.generate import generation
from mlxctl.server.images import image_token, load_images
from mlxctl.server.response_keys import store_of
from mlxctl.server.prompt_work import off_loop
from mlxctl.server.served_model import model_formats, sampling_defaults, use_model
from mlxctl.server.streaming import Sse, stream_sse


def _stored(request: web.Request, response_id: str, param: str | None = None) -> StoredResponse:
    stored = store_of(request.app).get(response_id)
    if stored is None:
        raise ApiError(404, f"response with id '{response_id}' not found", param=param,
                       code="previous_response_not_found" if param else None)
    return stored


async def retrieve(request: web.Request) -> web.Response:
    return web.json_response(_stored(request, request.match_info["response_id"]).body)


async def delete(request: web.Request) -> web.Response:
    response_id = request.match_info["response_id"]
    if not store_of(request.app).delete(response_id):
        raise ApiError(404, f"response with id '{response_id}' not found")
    return web.json_response({"id": response_id, "object": "response.deleted", "deleted": True})


class ResponsesBody(ResponsesRequest):
    """/v1/responses' body plus Ollama's ``keep_alive`` (how long a pool model stays loaded
    after this request: 300, "5m", "1h", 0, -1), as /v1/chat/completions takes it."""

    keep_alive: KeepAlive = None


async def create(request: web.Request) -> web.StreamResponse:
    req = await parse_body(request, ResponsesBody)
    engine = await use_model(request, req.model, req.keep_alive)
    previous = _stored(request, req.previous_response_id, "previous_response_id").messages \
        if req.previous_response_id else ()
    loaded = await load_images(request, engine, image_refs(req))
    messages = conversation(req, previous, loaded, image_token(engine))
    if any(is_mcp_tool(t) for t in req.tools or ()):  # the server runs MCP tool calls (server/mcp_views.py)
        from mlxctl.server.mcp_views import responses_with_mcp

        return await responses_with_mcp(request, req, engine.model.tokenizer, messages)
    chat = chat_request(req, messages, model_formats(request), sampling_defaults(request))
    prepared, draft = await off_loop(prepare_chat, engine.model.tokenizer, model_formats(request), chat), ResponseDraft(req)
    if req.stream:
        stream = ResponsesStream(draft, prepared.splitter(), engine.model.tokenizer)
        resp = await stream_sse(request, [prepared.job()], stream)
        if stream.body is not None:
            remember(request, draft, stream.body, with_reply(messages, stream.result))
        return resp
    async with generation(request, prepared.tokens, prepared.params, images=prepared.images) as gen:
        done = await gen.collect_async()
    result = prepared.splitter().whole(done.text)
    body = finished_body(draft, done.finish_reason, result, done.usage, tokenizer=engine.model.tokenizer)
    remember(request, draft, body, with_reply(messages, result))
    return web.json_response(body)


def remember(request: web.Request, draft: ResponseDraft, body: dict, messages: tuple) -> None:
    if draft.req.store:
        store_of(request.app).put(draft.id, StoredResponse(body, messages))


def _sse(event: dict) -> Sse:
    return Sse(event, event["type"])


class ResponsesStream:
    """The Responses stream (api/responses_events.py); ``body`` and ``result``: the finished
    response and its split output, once it has closed."""

    def keepalive(self) -> Sse:
        """``response.in_progress`` again: Codex's idle timer counts events, not SSE comments."""
        return _sse(self.events.in_progress())

    def __init__(self, draft: ResponseDraft, splitter: OutputSplitter | None, tokenizer: object = None):
        self.draft, self.splitter, self.tokenizer = draft, splitter, tokenizer
        self.output, self.events = ChoiceSegments(splitter), ResponseEvents(draft)
        self.listed: list[dict] = []  # the MCP loop's mcp_list_tools items, sent after the opening
        self.body: dict | None = None
        self.result: SplitResult | None = None

    def opening(self, streams: list) -> list[Sse]:
        opening = self.events.opening()
        listed = [e for item in self.listed for e in self.events.whole_item(item, [
            ("response.mcp_list_tools.in_progress", {}), ("response.mcp_list_tools.completed", {})])]
        return [_sse(event) for event in [*opening, *listed]]

    # the MCP loop's rounds (server/mcp_stream.py): mcp_list_tools first, each round's items, then
    # its mcp_call items

    def begin_round(self, splitter: OutputSplitter, hidden: Callable[[str], bool], prompt_tokens: int) -> None:
        if self.splitter is not None:
            self.draft.item_id = new_id("msg")
        self.splitter, self.output = splitter, ChoiceSegments(splitter, hidden=hidden)

    def ran(self, calls: list) -> list[Sse]:
        out = []
        for call in calls:
            item = mcp_call_item(call)
            middle = [("response.mcp_call.in_progress", {}),
                      ("response.mcp_call_arguments.done", {"arguments": item["arguments"]}),
                      ("response.mcp_call.failed" if item["status"] == "failed" else "response.mcp_call.completed", {})]
            out += [_sse(event) for event in self.events.whole_item(item, middle)]
        return out

    def finished(self, result: RoundResult, usage: Usage, extension: dict) -> list[Sse]:
        body = finished_body(self.draft, result.reason, result.split(), usage, self.events.items, self.tokenizer)
        self.body, self.result = {**body, **extension}, result.split()
        return [_sse(event) for event in self.events.closing(self.body)]

    def pieces(self, choice: int, piece: Piece, finish: FinishEvent | None) -> list[Sse]:
        self.events.cut = finish is not None and finish.reason is FinishReason.LENGTH
        return [_sse(event) for event in self.events.events(self.output.segments(piece.text, finish is not None))]

    def closing(self, finishes: list[FinishEvent]) -> list[Sse]:
        (finish,) = finishes
        result = self.splitter.result()
        body = finished_body(self.draft, finish.reason, result, finish.usage, self.events.items, self.tokenizer)
        self.body, self.result = body, result
        return [_sse(event) for event in self.events.closing(body)]

    def error(self, request: web.Request, err: ApiError) -> Sse:
        return _sse(self.events.failed("timeout" if err.status == 504 else "server_error", err.message))
