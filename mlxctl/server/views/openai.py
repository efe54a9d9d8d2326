"""POST /v1/chat/completions and POST /v1/completions (OpenAI), streamed or not."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

from aiohttp import web

from mlxctl.api.openai_models import (
    ChatCompletionRequest,
    CompletionRequest,
    SamplingFields,
)
from mlxctl.api.openai_output import (
    ChatOutput,
    CompletionOutput,
    OpenAIOutput,
    total_usage,
)
from mlxctl.api.openai_pieces import whole
from mlxctl.api.openai_translate import Job, chat_jobs, chat_media_refs, completion_jobs
from mlxctl.api.tool_loop import wants_mcp
from mlxctl.server.body import parse_body
from mlxctl.server.errors import ApiError
from mlxctl.server.images import image_token, load_images
from mlxctl.server.mcp_views import chat_with_mcp
from mlxctl.server.prompt_work import off_loop
from mlxctl.server.served_model import model_formats, sampling_defaults, use_model
from mlxctl.server.streaming import TIMEOUT_MESSAGE, open_generations
from mlxctl.server.views.openai_stream import stream_response


async def chat_completions(request: web.Request) -> web.StreamResponse:
    body = await parse_body(request, ChatCompletionRequest)
    engine = await use_model(request, body.model, body.keep_alive)
    tokenizer = engine.model.tokenizer
    refs = chat_media_refs(body)  # images and videos
    images = await load_images(request, engine, refs)
    if wants_mcp(body):  # "mcp": true or a {"type": "mcp"} tool: the server runs MCP tool calls
        return await chat_with_mcp(request, body, tokenizer, images, image_token(engine))
    jobs, plan = await off_loop(chat_jobs, body, tokenizer, model_formats(request), images=images,
                                image_token=image_token(engine), defaults=sampling_defaults(request))
    output = ChatOutput(body.model, tokenizer, body.include_usage, plan, jobs[0].reasoning_open)
    return await _respond(request, body, jobs, output)


async def completions(request: web.Request) -> web.StreamResponse:
    body = await parse_body(request, CompletionRequest)
    engine = await use_model(request, body.model, body.keep_alive)
    jobs = await off_loop(completion_jobs, body, engine.model.tokenizer, engine.vocab_size, sampling_defaults(request))
    tokenizer = engine.model.tokenizer
    return await _respond(request, body, jobs, CompletionOutput(body.model, tokenizer, body.include_usage))


async def _respond(request: web.Request, body: SamplingFields, jobs: list[Job],
                   output: OpenAIOutput) -> web.StreamResponse:
    if body.stream:
        return await stream_response(request, jobs, output, body.n)
    try:
        async with AsyncExitStack() as stack:
            streams = await open_generations(request, stack, jobs)
            results = await asyncio.gather(*(s.collect_async() for s in streams))
    except TimeoutError as exc:
        raise ApiError(504, TIMEOUT_MESSAGE) from exc
    pieces = [whole(result, job.echo) for result, job in zip(results, jobs)]
    return web.json_response(output.response(pieces, total_usage([r.usage for r in results], body.n)))
