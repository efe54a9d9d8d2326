"""POST /v1/messages and POST /v1/messages/count_tokens (Anthropic Messages API)."""

from __future__ import annotations

from aiohttp import web

from mlxctl.api import anthropic_events as events
from mlxctl.api.anthropic_models import CountTokensRequest, MessagesRequest
from mlxctl.api.anthropic_translate import (
    image_refs,
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
from mlxctl.api.openai_models import KeepAlive
from mlxctl.server.body import parse_body
from mlxctl.server.errors import ApiError, error_body
from mlxctl.server.generate import generation
from mlxctl.server.images import content_field, image_token, load_images
from mlxctl.server.keepalive import kept_alive
from mlxctl.server.keys import SETTINGS
from mlxctl.server.served_model import model_formats, sampling_defaults, use_model
from mlxctl.server.sse import open_sse, send
from mlxctl.server.text_chunks import TextChunks
from mlxctl.vision import images_refused, vision_of


async def count_tokens(request: web.Request) -> web.Response:
    req = await parse_body(request, CountTokensRequest)
    engine = await use_model(request, req.model)
    refs = _image_refs(req)
    if refs and (vision := vision_of(engine.model)) is None:
        raise ApiError(400, images_refused(engine.model).message, param=content_field(refs[0].where))
    tokens, _, _ = prompt_tokens(engine.model.tokenizer, req, model_formats(request), image_token=image_token(engine))
    extra = len(refs) * (vision.tokens_per_image - 1) if refs else 0  # each image's placeholder, expanded
    return web.json_response({"input_tokens": len(tokens) + extra})


class MessagesBody(MessagesRequest):
    """/v1/messages' body plus Ollama's ``keep_alive`` (how long a pool model stays loaded
    after this request: 300, "5m", "1h", 0, -1), as /v1/chat/completions takes it."""

    keep_alive: KeepAlive = None


async def messages(request: web.Request) -> web.StreamResponse:
    req = await parse_body(request, MessagesBody)
    engine = await use_model(request, req.model, req.keep_alive)
    images = await load_images(request, engine, _image_refs(req))
    tokens, plan, opens = prompt_tokens(engine.model.tokenizer, req, model_formats(request),
                                        image_token=image_token(engine))
    params = with_plan(sampling_params(req, sampling_defaults(request)), plan, opens)
    splitter = new_splitter(plan, opens)
    if req.stream:
        return await _stream(request, req, tokens, params, splitter, images)
    async with generation(request, tokens, params, images=images) as stream:
        done = await stream.collect_async()
    splitter.feed(done.text)
    splitter.finish()
    result = splitter.result()
    stop = stop_reason(done.finish_reason, done.stop_string, bool(result.calls))
    return web.json_response(message_body(new_message_id(), req.model, result, stop, done.usage))


async def _emit(resp: web.StreamResponse, payload: dict) -> None:
    await send(resp, payload, event=payload["type"])


def _expanded(request: web.Request) -> int:
    """Prompt tokens one image adds beyond its placeholder."""
    from mlxctl.server.served_model import engine_of

    return vision_of(engine_of(request).model).tokens_per_image - 1


def _image_refs(req: CountTokensRequest) -> list:
    try:
        return image_refs(req)
    except MlxctlError as err:
        raise ApiError(400, err.message, param=getattr(err, "param", None)) from err


async def _stream(request: web.Request, req: MessagesRequest, tokens: list[int],
                  params: SamplingParams, splitter: OutputSplitter, images: tuple = ()) -> web.StreamResponse:
    resp = None
    try:
        async with generation(request, tokens, params, images=images) as stream:
            resp = await open_sse(request)
            chunks = TextChunks(stream, _interval(request))
            prompt_len = len(tokens) + sum(_expanded(request) for _ in images)  # placeholders expanded
            await _stream_events(request, resp, req, prompt_len, chunks, splitter)
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

    async for text in kept_alive(request, resp, chunks, lambda: _emit(resp, events.ping())):
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
