"""POST /api/chat and POST /api/generate (Ollama), streamed as NDJSON (Ollama's default) or not.

The request becomes the OpenAI chat request (api/ollama_translate.py) and so the same job: the
chat template, tools, reasoning, structured output and images of /v1/chat/completions. The
output goes through the same splitter (reasoning, content, whole tool calls) into Ollama's
lines (api/ollama_output.py).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pydantic
from aiohttp import web

from mlxctl.api.chat_plan import ChatPlan
from mlxctl.api.chat_split import OutputSplitter, new_splitter
from mlxctl.api.ollama_models import OllamaChatRequest, OllamaGenerateRequest, OllamaOptions
from mlxctl.api.ollama_output import OllamaOutput
from mlxctl.api.ollama_translate import chat_request, generate_request, length_params, raw_job, with_context
from mlxctl.api.openai_pieces import Piece
from mlxctl.api.openai_translate import Job, chat_jobs
from mlxctl.engine.events import FinishEvent
from mlxctl.server.body import parse_body, validation_error
from mlxctl.server.errors import ApiError
from mlxctl.server.generate import generation
from mlxctl.server.images import image_token, load_images
from mlxctl.server.keys import POOL
from mlxctl.server.prompt_work import off_loop
from mlxctl.server.served_model import model_formats, sampling_defaults, served_names, use_model
from mlxctl.server.streaming import NDJSON, TIMEOUT_MESSAGE, Sse, stream_sse
from mlxctl.vision import vision_of
from mlxctl.vision.fetch import ImageRef


async def chat(request: web.Request) -> web.StreamResponse:
    started = time.perf_counter()
    body = await parse_body(request, OllamaChatRequest)
    engine, output = await _model(request, body, started, chat=True)
    if not body.messages:
        return web.json_response(output.loaded(_load_reason(request, body)))
    formats = model_formats(request)
    translated = _translated(chat_request, body, formats.reasoning_parser)
    refs = [ImageRef(f"messages.{i}.images.{j}", data=data)
            for i, m in enumerate(body.messages) for j, data in enumerate(m.images or ())]
    images = await load_images(request, engine, refs)
    jobs, plan = await off_loop(chat_jobs, translated, engine.model.tokenizer, formats, images=images,
                                image_token=image_token(engine), defaults=sampling_defaults(request))
    return await _respond(request, body.stream, _sized(jobs[0], body.options, engine), plan, output)


async def generate(request: web.Request) -> web.StreamResponse:
    started = time.perf_counter()
    body = await parse_body(request, OllamaGenerateRequest)
    engine, output = await _model(request, body, started, chat=False)
    if not body.prompt and not body.images:
        return web.json_response(output.loaded(_load_reason(request, body)))
    formats, tokenizer = model_formats(request), engine.model.tokenizer
    if body.raw or body.template:
        job, plan = raw_job(body, tokenizer, formats, sampling_defaults(request))
    else:
        translated = _translated(generate_request, body, formats.reasoning_parser)
        images = await load_images(request, engine, [ImageRef(f"images.{j}", data=d) for j, d in
                                                     enumerate(body.images or ())])
        jobs, plan = await off_loop(chat_jobs, translated, tokenizer, formats, images=images,
                                    image_token=image_token(engine), defaults=sampling_defaults(request))
        job = jobs[0]
    job = with_context(job, body.context, engine.vocab_size)
    return await _respond(request, body.stream, _sized(job, body.options, engine), plan, output)


def ollama_name(request: web.Request, name: str) -> str:
    """Ollama's ``name:latest`` is ``name`` (Ollama adds the tag to names given without one)."""
    if name.endswith(":latest") and name not in served_names(request.app):
        return name.removesuffix(":latest")
    return name


async def _model(request: web.Request, body: Any, started: float, chat: bool) -> tuple[Any, OllamaOutput]:
    """The request's engine, loaded, and its output (the load time is Ollama's load_duration)."""
    engine = await use_model(request, ollama_name(request, body.model), body.keep_alive)
    return engine, OllamaOutput(body.model, chat, started, time.perf_counter() - started)


def _load_reason(request: web.Request, body: Any) -> str:
    """A request with nothing to generate loads the model, or with keep_alive 0 unloads a pool
    model once it is released (a pinned primary model stays loaded)."""
    from mlxctl.server.residency import parse_keep_alive

    pooled = ollama_name(request, body.model) in request.app[POOL].models
    return "unload" if pooled and body.keep_alive is not None and parse_keep_alive(body.keep_alive) == 0 else "load"


def _translated(translate: Any, body: Any, reasoning: str | None) -> Any:
    try:
        return translate(body, reasoning)
    except pydantic.ValidationError as exc:
        raise validation_error(exc) from exc


def _sized(job: Job, options: OllamaOptions | None, engine: Any) -> Job:
    """The job with Ollama's num_predict and num_ctx applied (images count expanded)."""
    vision = vision_of(engine.model) if job.images else None
    prompt = len(job.tokens) + (vision.added_positions(job.images) if vision else 0)
    params = length_params(job.params, options, prompt, engine.model.context_length)
    return dataclasses.replace(job, params=params)


async def _respond(request: web.Request, stream: bool, job: Job, plan: ChatPlan,
                   output: OllamaOutput) -> web.StreamResponse:
    splitter = new_splitter(plan, job.reasoning_open)
    if stream:
        return await stream_sse(request, [job], OllamaStream(splitter, output), NDJSON)
    try:
        async with generation(request, job.tokens, job.params, job.cache_salt, job.images) as running:
            done = await running.collect_async()
    except TimeoutError as exc:
        raise ApiError(504, TIMEOUT_MESSAGE) from exc
    splitter.feed(done.text)
    splitter.finish()
    return web.json_response(output.whole(splitter.result(), done))


class OllamaStream:
    """A job's NDJSON lines: one per piece, the statistics on the last. An error after the 200 is
    a last ``{"error": ...}`` line, as Ollama sends it."""

    def keepalive(self) -> None:
        return None  # never sent: NDJSON carries no keep-alives

    def __init__(self, splitter: OutputSplitter, output: OllamaOutput):
        self.splitter, self.output = splitter, output

    def opening(self, streams: list) -> list[Sse]:
        return []

    def pieces(self, choice: int, piece: Piece, finish: FinishEvent | None) -> list[Sse]:
        lines = [line] if piece.text and (line := self.output.chunk(self.splitter.feed(piece.text))) is not None else []
        if finish is not None:
            lines.append(self.output.final(self.splitter.finish(), finish))
        return [Sse(line) for line in lines]

    def closing(self, finishes: list[FinishEvent]) -> list[Sse]:
        return []

    def error(self, request: web.Request, err: ApiError) -> Sse:
        return Sse({"error": err.message})

