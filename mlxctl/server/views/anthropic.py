"""POST /v1/messages and POST /v1/messages/count_tokens (Anthropic Messages API)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from mlxctl.api import anthropic_events as events
from mlxctl.api.anthropic_models import CountTokensRequest, MessagesRequest
from mlxctl.api.anthropic_translate import (
    chat_request,
    image_refs,
    message_body,
    new_message_id,
    prompt_tokens,
    stop_reason,
)
from mlxctl.api.anthropic_mcp import mcp_blocks
from mlxctl.api.chat_request import PreparedChat, prepare_chat
from mlxctl.api.chat_round import RoundResult
from mlxctl.api.chat_split import OutputSplitter
from mlxctl.api.openai_models import KeepAlive
from mlxctl.api.openai_pieces import Piece
from mlxctl.api.output_stream import ChoiceSegments
from mlxctl.engine.events import FinishEvent, Usage
from mlxctl.errors import MlxctlError
from mlxctl.server.body import parse_body
from mlxctl.server.errors import ApiError, error_body
from mlxctl.server.generate import generation
from mlxctl.server.images import content_field, image_token, load_images
from mlxctl.server.prompt_work import off_loop
from mlxctl.server.served_model import model_formats, sampling_defaults, use_model
from mlxctl.server.streaming import Sse, stream_sse
from mlxctl.vision import images_refused, vision_of


async def count_tokens(request: web.Request) -> web.Response:
    req = await parse_body(request, CountTokensRequest)
    if req.mcp_servers:
        raise ApiError(400, "count_tokens does not count MCP tools: leave mcp_servers out", param="mcp_servers")
    engine = await use_model(request, req.model)
    refs = _image_refs(req)
    if refs and (vision := vision_of(engine.model)) is None:
        raise ApiError(400, images_refused(engine.model).message, param=content_field(refs[0].where))
    tokens = prompt_tokens(engine.model.tokenizer, req, model_formats(request), image_token=image_token(engine))
    extra = vision.added_positions(await _counted_images(request, engine, refs)) if refs else 0
    return web.json_response({"input_tokens": len(tokens) + extra})


async def _counted_images(request: web.Request, engine: Any, refs: list) -> list:
    """The images count_tokens counts: loaded where their size decides their positions (the
    vision families with a layout or a grid: Idefics3's tiles, Pixtral's rows, Qwen-VL's dynamic
    resolution), else only their number."""
    vision = vision_of(engine.model)
    if vision.layout is not None or vision.grid is not None:
        return await load_images(request, engine, refs)
    return [None] * len(refs)


class MessagesBody(MessagesRequest):
    """/v1/messages' body plus Ollama's ``keep_alive`` (how long a pool model stays loaded
    after this request: 300, "5m", "1h", 0, -1), as /v1/chat/completions takes it."""

    keep_alive: KeepAlive = None
    mcp: bool | None = None  # extension: run the tools of `serve --mcp-config` servers (docs/mcp.md)


async def messages(request: web.Request) -> web.StreamResponse:
    req = await parse_body(request, MessagesBody)
    engine = await use_model(request, req.model, req.keep_alive)
    images = await load_images(request, engine, _image_refs(req))
    if req.mcp or req.mcp_servers:  # the server runs MCP tool calls (server/mcp_views.py)
        from mlxctl.server.mcp_views import messages_with_mcp

        return await messages_with_mcp(request, req, engine.model.tokenizer, tuple(images), image_token(engine))
    chat = chat_request(req, model_formats(request), image_token=image_token(engine),
                        defaults=sampling_defaults(request), images=tuple(images))
    prepared = await off_loop(prepare_chat, engine.model.tokenizer, model_formats(request), chat)
    if req.stream:
        expanded = vision_of(engine.model).added_positions(images) if images else 0
        stream = MessagesStream(req.model, len(prepared.tokens) + expanded, prepared.splitter())
        return await stream_sse(request, [prepared.job()], stream)
    return web.json_response(await _whole(request, req, prepared))


async def _whole(request: web.Request, req: MessagesRequest, prepared: PreparedChat) -> dict:
    async with generation(request, prepared.tokens, prepared.params, images=prepared.images) as stream:
        done = await stream.collect_async()
    result = prepared.splitter().whole(done.text)
    stop = stop_reason(done.finish_reason, done.stop_string, bool(result.calls))
    return message_body(new_message_id(), req.model, result, stop, done.usage)


def _image_refs(req: CountTokensRequest) -> list:
    try:
        return image_refs(req)
    except MlxctlError as err:
        raise ApiError(400, err.message, param=getattr(err, "param", None)) from err


def _sse(payload: dict) -> Sse:
    return Sse(payload, payload["type"])


class MessagesStream:
    """The Messages stream: message_start, content blocks, message_delta, message_stop
    (api/anthropic_events.py); ``event: ping`` keeps it alive. message_start waits for the
    first piece: the prompt is prefilled then, so its usage splits off the cached part as
    message_delta's does (pings keep the stream alive until then)."""

    def keepalive(self) -> Sse:
        return _sse(events.ping())

    def __init__(self, model: str, input_tokens: int, splitter: OutputSplitter | None):
        self.model, self.input_tokens = model, input_tokens
        self.output, self.blocks = ChoiceSegments(splitter), events.BlockStream()

    # the MCP loop's rounds (server/mcp_stream.py): each round's blocks, then its calls' blocks

    def begin_round(self, splitter: OutputSplitter, hidden: Callable[[str], bool], prompt_tokens: int) -> None:
        self.input_tokens = self.input_tokens or prompt_tokens
        self.output = ChoiceSegments(splitter, hidden=hidden)

    def ran(self, calls: list) -> list[Sse]:
        return [_sse(event) for call in calls for block in mcp_blocks(call) for event in self.blocks.whole(block)]

    def finished(self, result: RoundResult, usage: Usage, extension: dict) -> list[Sse]:
        stop = stop_reason(result.reason, result.stop_string, bool(result.calls))
        return [_sse({**events.message_delta(stop, usage), **extension}), _sse(events.message_stop())]

    def opening(self, streams: list) -> list[Sse]:
        self.stream, self.started = streams[0], False
        return []

    def pieces(self, choice: int, piece: Piece, finish: FinishEvent | None) -> list[Sse]:
        start = [] if self.started else [_sse(self._message_start())]
        self.started = True
        return start + [_sse(event) for event in self.blocks.events(self.output.segments(piece.text, finish is not None))]

    def _message_start(self) -> dict:
        return events.message_start(new_message_id(), self.model, self.input_tokens, self.stream.cached_tokens)

    def closing(self, finishes: list[FinishEvent]) -> list[Sse]:
        (finish,) = finishes
        stop = stop_reason(finish.reason, finish.stop_string, self.output.called)
        return [_sse(events.message_delta(stop, finish.usage)), _sse(events.message_stop())]

    def error(self, request: web.Request, err: ApiError) -> Sse:
        return _sse(error_body(request, err))
