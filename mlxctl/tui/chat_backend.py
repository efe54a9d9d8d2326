"""Where `mlxctl chat` gets its answers: an engine in this process, or a running daemon.

Both backends stream one answer as :class:`Delta` pieces (reasoning, content, tool-call
fragments) followed by one :class:`Done` with the token count and timings:

* :class:`EngineBackend` prepares the messages as every server endpoint does
  (``api.chat_request.prepare_chat``: the model's chat template, its reasoning format from
  ``ModelFormats.detect``), submits them to an :class:`~mlxctl.engine.engine.Engine` with
  ``loop=`` (so the stream is read with ``async for``) and splits the text with the prepared
  splitter. It can start its own engine (``open_engine``) or use one already started.
* :class:`DaemonBackend` posts to ``/v1/chat/completions`` with ``stream: true`` (httpx) and
  reads the ``reasoning_content`` / ``content`` / ``tool_calls`` deltas of the SSE chunks.

A temperature or top_p the settings leave unset takes the model's default: the engine's from
its generation_config.json (else run's built-ins), the daemon's by leaving it out of the request
(:mod:`mlxctl.tui.chat_sampling`); ``sampling_text`` says which values are in use.

Every failure a user can cause or meet (nothing listening, a refused key, a model that does not
load, an error mid-stream) is a :class:`BackendError` with a one-line message.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from mlxctl.errors import MlxctlError
from mlxctl.tui.chat_sampling import daemon_line, engine_line, engine_sampling
from mlxctl.tui.client import base_url
from mlxctl.tui.conversation import ChatSettings

Progress = Callable[[str], None]


class BackendError(Exception):
    """Why an answer could not be had, in one line."""


@dataclass
class CallDelta:
    """A fragment of one tool call (OpenAI streaming shape: id and name come first)."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass
class Delta:
    reasoning: str = ""
    content: str = ""
    calls: list[CallDelta] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.reasoning or self.content or self.calls)


@dataclass
class Done:
    finish_reason: str | None
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    ttft_s: float | None = None  # request sent -> first token
    tokens_per_s: float | None = None  # decode speed after the first token


Event = Delta | Done


class Backend(Protocol):
    model: str | None  # the model answers come from (None until connected)
    where: str  # "in-process" or the daemon's URL
    can_list_models: bool  # True: pick from models(); False: any model reference, loaded here

    async def connect(self, progress: Progress | None = None) -> None: ...
    async def models(self) -> list[str]: ...
    async def switch_model(self, name: str, progress: Progress | None = None) -> None: ...
    def stream(self, messages: list[dict], settings: ChatSettings) -> AsyncIterator[Event]: ...
    def sampling_text(self, settings: ChatSettings) -> str | None: ...  # the sampling in use (None: not known yet)
    async def aclose(self) -> None: ...


def speed(tokens: int | None, first_s: float | None, end_s: float) -> float | None:
    """Tokens per second after the first token (None with fewer than two tokens)."""
    if tokens is None or first_s is None or tokens < 2 or end_s <= first_s:
        return None
    return (tokens - 1) / (end_s - first_s)


# -- in-process -------------------------------------------------------------------------------


class EngineBackend:
    """Answers from an engine in this process.

    ``engine``: one already started (not shut down here); otherwise ``connect()`` starts one on
    ``model`` with ``open_model`` (default :func:`mlxctl.generation.open_engine`), and engines
    started that way are shut down when replaced or closed. ``reasoning_parser``: ``auto`` (from
    the chat template), ``none`` or a parser name, as ``serve --reasoning-parser``.
    """

    where = "in-process"
    can_list_models = False

    def __init__(self, model: str | None = None, *, engine: Any = None, reasoning_parser: str = "auto",
                 open_model: Callable[..., Any] | None = None):
        self.engine = engine
        self._owned = False
        self.ref = model
        self.reasoning_parser = reasoning_parser
        self._open_model = open_model
        self.formats: Any = None
        self.model = engine.model.name if engine is not None and engine.model is not None else None

    async def connect(self, progress: Progress | None = None) -> None:
        if self.engine is None:
            self.engine = await self._open(self.ref, progress)
            self._owned = True
        self._adopt()

    async def models(self) -> list[str]:
        return [self.model] if self.model else []

    async def switch_model(self, name: str, progress: Progress | None = None) -> None:
        """Start an engine on ``name``; the old one keeps serving if that fails."""
        engine = await self._open(name, progress)
        old, owned = self.engine, self._owned
        self.engine, self._owned, self.ref = engine, True, name
        self._adopt()
        if old is not None and owned:
            await asyncio.to_thread(old.shutdown)

    async def _open(self, ref: str | None, progress: Progress | None) -> Any:
        opener = self._open_model
        if opener is None:
            from mlxctl.generation import open_engine as opener
        try:
            return await asyncio.to_thread(opener, ref, progress=progress)
        except MlxctlError as exc:
            raise BackendError(_with_hint(exc)) from None
        except Exception as exc:  # noqa: BLE001 - a model that does not load is a message, not a crash
            raise BackendError(f"cannot load {ref or 'the default model'}: {type(exc).__name__}: {exc}") from None

    def _adopt(self) -> None:
        from mlxctl.api.chat_plan import ModelFormats

        loaded = self.engine.model
        self.model = loaded.name
        try:
            self.formats = ModelFormats.detect(loaded.tokenizer, "none", self.reasoning_parser)
        except MlxctlError as exc:
            raise BackendError(_with_hint(exc)) from None

    @property
    def reasoning_format(self) -> str | None:
        return self.formats.reasoning_parser if self.formats is not None else None

    def sampling_text(self, settings: ChatSettings) -> str | None:
        """``sampling: ...`` for the loaded model: what is set, else its generation_config.json, else run's."""
        if self.engine is None or self.engine.model is None:
            return None
        return engine_line(settings, self.engine.model)

    async def stream(self, messages: list[dict], settings: ChatSettings) -> AsyncIterator[Event]:
        from mlxctl.api.chat_plan import ToolChoice, make_plan
        from mlxctl.api.chat_request import ChatRequest, prepare_chat
        from mlxctl.engine.events import FinishEvent
        from mlxctl.engine.sampling import SamplingParams

        if self.engine is None:
            raise BackendError("no model is loaded")
        engine, loaded = self.engine, self.engine.model
        sampling = {name: value for name, value, _ in engine_sampling(settings, loaded)}
        params = SamplingParams(max_tokens=settings.max_tokens, max_tokens_field="max_tokens",  # as a server refuses it
                                seed=settings.seed, **sampling)
        try:
            plan = make_plan(self.formats, [], ToolChoice("none"), None)
            prepared = prepare_chat(loaded.tokenizer, self.formats, ChatRequest(_template_messages(messages), plan, params))
            stream = engine.submit(prepared.tokens, prepared.params, loop=asyncio.get_running_loop())
        except MlxctlError as exc:
            raise BackendError(_with_hint(exc)) from None
        splitter = prepared.splitter()
        try:
            async for event in stream:
                if isinstance(event, FinishEvent):
                    split = splitter.feed(event.text) if event.text else None
                    tail = splitter.finish()
                    if split is not None:
                        split.extend(tail)
                    else:
                        split = tail
                    if piece := _delta(split):
                        yield piece
                    timings = event.timings
                    yield Done(event.reason.value, event.usage.completion_tokens, event.usage.prompt_tokens,
                               timings.ttft_s if event.usage.completion_tokens else None,
                               timings.decode_tps or None)
                elif event.text and (piece := _delta(splitter.feed(event.text))):
                    yield piece
        except MlxctlError as exc:
            raise BackendError(_with_hint(exc)) from None
        finally:
            if stream.finish is None:  # cancelled (stop, quit): free the engine's slot
                stream.abort()

    async def aclose(self) -> None:
        if self.engine is not None and self._owned:
            engine, self.engine = self.engine, None
            await asyncio.to_thread(engine.shutdown)


def _delta(split: Any) -> Delta | None:
    calls = [CallDelta(c.index, c.id, c.name, c.arguments) for c in split.calls]
    piece = Delta(split.reasoning, split.content, calls)
    return piece or None


def _template_messages(messages: list[dict]) -> list[dict]:
    """OpenAI messages as chat templates read them: a call's arguments as an object."""
    from mlxctl.api.chat_split import arguments_object

    out = []
    for message in messages:
        m = {k: v for k, v in message.items() if k != "reasoning_content"}
        if m.get("tool_calls"):
            m["tool_calls"] = [{**c, "function": {**c["function"],
                                                  "arguments": arguments_object(c["function"]["arguments"])}}
                               for c in m["tool_calls"]]
        out.append(m)
    return out


def _with_hint(exc: MlxctlError) -> str:
    return f"{exc.message} ({exc.hint})" if exc.hint else exc.message


# -- a daemon ---------------------------------------------------------------------------------


class DaemonBackend:
    """Answers from a running `mlxctl serve` (or any OpenAI-compatible server) at ``url``."""

    can_list_models = True

    def __init__(self, url: str, *, api_key: str | None = None, model: str | None = None,
                 timeout: float = 600.0, transport: httpx.AsyncBaseTransport | None = None):
        self.where = base_url(url)
        self.model = model
        self._models: list[str] = []
        self._sampling: dict[str, Any] = {}  # each model's /v1/models sampling_defaults (None: not reported)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(base_url=self.where, headers=headers, transport=transport,
                                         timeout=httpx.Timeout(timeout, connect=5.0))
        self.connected = False
        self.warning: str | None = None  # said once after connect (a --model the daemon lacks)

    async def connect(self, progress: Progress | None = None) -> None:
        """Ask the daemon for its models; keep ``model`` if it is one of them, else take the first."""
        names = await self.models()
        if not names:
            raise BackendError(f"{self.where} serves no models")
        if self.model not in names:
            if self.model is not None:
                self.warning = f"{self.where} does not serve {self.model!r}; using {names[0]!r} (F2 picks another)"
            self.model = names[0]
        self.connected = True

    async def models(self) -> list[str]:
        response = await self._request("GET", "/v1/models")
        try:
            data = response.json()["data"]
            self._models = [str(m["id"]) for m in data]
            self._sampling = {str(m["id"]): m.get("sampling_defaults") for m in data}
        except (ValueError, KeyError, TypeError):
            raise BackendError(f"{self.where}/v1/models is not an OpenAI model list") from None
        return list(self._models)

    async def switch_model(self, name: str, progress: Progress | None = None) -> None:
        if name not in (self._models or await self.models()):
            raise BackendError(f"{self.where} does not serve {name!r}; it serves {', '.join(self._models)}")
        self.model = name

    def sampling_text(self, settings: ChatSettings) -> str | None:
        """``sampling: ...``: what is set, else what the daemon reported for the model at connect."""
        return daemon_line(settings, self._sampling.get(self.model)) if self.connected else None

    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = await self._client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise BackendError(self._unreachable(exc)) from None
        if response.status_code >= 400:
            raise BackendError(_http_error(self.where, path, response.status_code, response.text))
        return response

    def _unreachable(self, exc: httpx.HTTPError) -> str:
        self.connected = False
        if isinstance(exc, httpx.ConnectError):
            return f"nothing is listening at {self.where} (start one with `mlxctl serve`, or give --url)"
        if isinstance(exc, httpx.TimeoutException):
            return f"{self.where} did not answer in time"
        return f"{self.where}: {type(exc).__name__}: {exc}".rstrip(": ")

    async def stream(self, messages: list[dict], settings: ChatSettings) -> AsyncIterator[Event]:
        if not self.connected:
            await self.connect()
        body: dict[str, Any] = {"model": self.model, "messages": messages, "stream": True,
                                "stream_options": {"include_usage": True}, "max_tokens": settings.max_tokens}
        for name in ("temperature", "top_p", "seed"):  # unset: left out, the server's default applies
            if getattr(settings, name) is not None:
                body[name] = getattr(settings, name)
        sent = time.perf_counter()
        first: float | None = None
        finish: str | None = None
        usage: dict = {}
        try:
            async with self._client.stream("POST", "/v1/chat/completions", json=body) as response:
                if response.status_code >= 400:
                    text = (await response.aread()).decode("utf-8", "replace")
                    raise BackendError(_http_error(self.where, "/v1/chat/completions", response.status_code, text))
                async for data in _sse_data(response):
                    if data == "[DONE]":
                        break
                    chunk = _json(data)
                    if "error" in chunk:
                        raise BackendError(f"the server failed mid-answer: {_error_message(chunk)}")
                    usage = chunk.get("usage") or usage
                    for choice in chunk.get("choices") or ():
                        finish = choice.get("finish_reason") or finish
                        piece = _chunk_delta(choice.get("delta") or {})
                        if piece:
                            if first is None and (piece.content or piece.reasoning or piece.calls):
                                first = time.perf_counter()
                            yield piece
        except httpx.HTTPError as exc:
            raise BackendError(self._unreachable(exc)) from None
        end = time.perf_counter()
        tokens = usage.get("completion_tokens")
        yield Done(finish, tokens, usage.get("prompt_tokens"), None if first is None else first - sent,
                   speed(tokens, first, end))

    async def aclose(self) -> None:
        await self._client.aclose()


async def _sse_data(response: httpx.Response) -> AsyncIterator[str]:
    """The ``data:`` payloads of a server-sent event stream (multi-line data joined)."""
    lines: list[str] = []
    async for line in response.aiter_lines():
        if not line:
            if lines:
                yield "\n".join(lines)
                lines = []
        elif line.startswith("data:"):
            lines.append(line[5:].removeprefix(" "))
    if lines:
        yield "\n".join(lines)


def _json(data: str) -> dict:
    try:
        chunk = json.loads(data)
    except json.JSONDecodeError:
        raise BackendError(f"the server sent a chunk that is not JSON: {data[:80]!r}") from None
    if not isinstance(chunk, dict):
        raise BackendError("the server sent a chunk that is not a JSON object")
    return chunk


def _chunk_delta(delta: dict) -> Delta:
    calls = [CallDelta(int(c.get("index", 0)), c.get("id"), (c.get("function") or {}).get("name"),
                       (c.get("function") or {}).get("arguments") or "")
             for c in delta.get("tool_calls") or ()]
    reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
    return Delta(reasoning, delta.get("content") or "", calls)


def _error_message(body: Any) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error or body)


def _http_error(url: str, path: str, status: int, text: str) -> str:
    if status in (401, 403):
        return f"{url} refused the API key (HTTP {status}); give --api-key"
    try:
        detail = _error_message(json.loads(text))
    except (json.JSONDecodeError, TypeError):
        detail = text.strip().splitlines()[0][:200] if text.strip() else ""
    if status == 404 and not detail:
        return f"{url} has no {path}: not an OpenAI-compatible server?"
    return f"{url}{path} answered HTTP {status}" + (f": {detail}" if detail else "")
