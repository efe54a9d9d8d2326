"""POST /v1/messages and POST /v1/messages/count_tokens (Anthropic Messages API)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from mlxctl.api import anthropic_events as events
from mlxctl.api.anthropic_models import CountTokensRequest, MessagesRequest
from mlxctl.api.anthropic_translate import (
    message_body,
    new_message_id,
    prompt_tokens,
    sampling_params,
    stop_reason,
)
from mlxctl.api.chat_plan import with_plan
from mlxctl.api.chat_split import OutputSplitter
from mlxctl.api.chat_split import new_splitter
from mlxctl.engine.sampling import SamplingParams
from mlxctl.errors import MlxctlError
from mlxctl.server.body import parse_body
from mlxctl.server.errors import ApiError, error_body
from mlxctl.server.generate import generation
from mlxctl.server.keys import SETTINGS
from mlxctl.server.served_model import model_formats, use_model
from mlxctl.server.sse import open_sse, send
from mlxctl.server.text_chunks import TextChunks


async def count_tokens(request: web.Request) -> web.Response:
    req = await parse_body(request, CountTokensRequest)
    tokenizer = (await use_model(request, req.model)).model.tokenizer
    tokens, _, _ = prompt_tokens(tokenizer, req, model_formats(request))
    return web.json_response({"input_tokens": len(tokens)})


async def messages(request: web.Request) -> web.StreamResponse:
    req = await parse_body(request, MessagesRequest)
    tokenizer = (await use_model(request, req.model)).model.tokenizer
    tokens, plan, opens = prompt_tokens(tokenizer, req, model_formats(request))
    params = with_plan(sampling_params(req), plan, opens)
    splitter = new_splitter(plan, opens)
    if req.stream:
        return await _stream(request, req, tokens, params, splitter)
    async with generation(request, tokens, params) as stream:
        done = await stream.collect_async()
    splitter.feed(done.text)
    splitter.finish()
    result = splitter.result()
    stop = stop_reason(done.finish_reason, done.stop_string, bool(result.calls))
    return web.json_response(message_body(new_message_id(), req.model, result, stop, done.usage))


async def _emit(resp: web.StreamResponse, payload: dict) -> None:
    await send(resp, payload, event=payload["type"])


async def _stream(request: web.Request, req: MessagesRequest, tokens: list[int],
                  params: SamplingParams, splitter: OutputSplitter) -> web.StreamResponse:
    resp = None
    try:
        async with generation(request, tokens, params) as stream:
            resp = await open_sse(request)
            chunks = TextChunks(stream, _interval(request))
            await _stream_events(request, resp, req, len(tokens), chunks, splitter)
    except (MlxctlError, TimeoutError) as err:
        if resp is None:
            raise
        await _emit(resp, error_body(request, _api_error(err)))
    except ConnectionError:
        pass  # the client went away; the generation was aborted on the way out
    return resp


async def _stream_events(request: web.Request, resp: web.StreamResponse, req: MessagesRequest,
                         input_tokens: int, chunks: TextChunks, splitter: OutputSplitter) -> None:
    await _emit(resp, events.message_start(new_message_id(), req.model, input_tokens))
    blocks, pinged = events.BlockStream(), False

    async def emit_all(payloads: list[dict]) -> None:
        nonlocal pinged
        for payload in payloads:
            await _emit(resp, payload)
            if not pinged and payload["type"] == "content_block_start":  # Anthropic's order
                await _emit(resp, events.ping())
                pinged = True

    async for text in chunks:
        await emit_all(blocks.feed(splitter.feed(text)))
    await emit_all(blocks.feed(splitter.finish()) + blocks.close())
    stop = stop_reason(chunks.finish.reason, chunks.finish.stop_string, blocks.called)
    await emit_all([events.message_delta(stop, chunks.finish.usage), events.message_stop()])


def _interval(request: web.Request) -> int:
    return max(1, request.app[SETTINGS].stream_interval)


def _api_error(err: Exception) -> ApiError:
    if isinstance(err, TimeoutError):
        return ApiError(504, "the request ran past the server's time limit")
    return ApiError.from_mlxctl(err)
