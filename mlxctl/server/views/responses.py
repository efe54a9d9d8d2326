"""POST /v1/responses and GET/DELETE /v1/responses/{response_id} (OpenAI Responses API)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from mlxctl.api.chat_plan import with_plan
from mlxctl.api.chat_split import OutputSplitter, new_splitter
from mlxctl.api.response_store import StoredResponse
from mlxctl.api.responses_events import ResponseEvents
from mlxctl.api.responses_models import ResponsesRequest
from mlxctl.api.responses_objects import ResponseDraft
from mlxctl.api.responses_translate import (
    conversation,
    conversation_images,
    finished_body,
    image_refs,
    prompt_tokens,
    sampling_params,
    with_reply,
)
from mlxctl.engine.sampling import SamplingParams
from mlxctl.errors import MlxctlError
from mlxctl.api.openai_models import KeepAlive
from mlxctl.server.body import parse_body
from mlxctl.server.errors import ApiError
from mlxctl.server.generate import generation
from mlxctl.server.images import image_token, load_images
from mlxctl.server.keepalive import kept_alive
from mlxctl.server.keys import SETTINGS
from mlxctl.server.response_keys import store_of
from mlxctl.server.served_model import model_formats, sampling_defaults, use_model
from mlxctl.server.sse import open_sse, send
from mlxctl.server.text_chunks import TextChunks


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
    tokens, plan, opens = prompt_tokens(engine.model.tokenizer, req, messages, model_formats(request))
    params, splitter = with_plan(sampling_params(req, sampling_defaults(request)), plan, opens), new_splitter(plan, opens)
    draft, images = ResponseDraft(req), conversation_images(messages)
    if req.stream:
        return await _stream(request, draft, messages, (tokens, images), params, splitter)
    async with generation(request, tokens, params, images=images) as stream:
        done = await stream.collect_async()
    splitter.feed(done.text)
    splitter.finish()
    result = splitter.result()
    body = finished_body(draft, done.finish_reason, result, done.usage)
    _remember(request, draft, body, with_reply(messages, result))
    return web.json_response(body)


def _remember(request: web.Request, draft: ResponseDraft, body: dict, messages: tuple) -> None:
    if draft.req.store:
        store_of(request.app).put(draft.id, StoredResponse(body, messages))


async def _emit(resp: web.StreamResponse, event: dict) -> None:
    await send(resp, event, event=event["type"])


async def _stream(request: web.Request, draft: ResponseDraft, messages: list, prompt: tuple[list[int], tuple],
                  params: SamplingParams, splitter: OutputSplitter) -> Any:
    """``prompt``: the tokens and the images for their placeholders."""
    events, resp = ResponseEvents(draft), None
    tokens, images = prompt
    try:
        async with generation(request, tokens, params, images=images) as stream:
            resp = await open_sse(request)
            chunks = TextChunks(stream, max(1, request.app[SETTINGS].stream_interval))
            await _stream_events(resp, events, kept_alive(request, resp, chunks), splitter)
            result = splitter.result()
            body = finished_body(draft, chunks.finish.reason, result, chunks.finish.usage, events.items)
            for event in events.closing(body):
                await _emit(resp, event)
        _remember(request, draft, body, with_reply(messages, result))
    except (MlxctlError, TimeoutError) as err:
        if resp is None:
            raise
        await _emit(resp, _error_event(events, err))
    except ConnectionError:
        pass  # the client went away; the generation was aborted on the way out
    return resp


async def _stream_events(resp: web.StreamResponse, events: ResponseEvents, chunks: AsyncIterator[str],
                         splitter: OutputSplitter) -> None:
    for event in events.opening():
        await _emit(resp, event)
    async for text in chunks:
        for event in events.feed(splitter.feed(text)):
            await _emit(resp, event)
    for event in events.feed(splitter.finish()) + events.finish():
        await _emit(resp, event)


def _error_event(events: ResponseEvents, err: Exception) -> dict:
    if isinstance(err, TimeoutError):
        return events.error("timeout", "the request ran past the server's time limit")
    return events.error("server_error", err.message)
