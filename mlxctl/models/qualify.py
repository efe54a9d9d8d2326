"""``mlxctl model qualify``: is this model fit to serve here? A scorecard of checks and figures.

Checks, in order (each ``pass``, ``fail`` or ``skip``; the model qualifies when none fails):

- ``loads``: the model loads (in process: the time it took; ``--url``: the server lists it);
- ``chat_template``: the chat template renders a multi-turn conversation;
- ``deterministic``: two greedy (temperature 0) chat completions of one prompt are identical;
- ``tool_call``: a call forced with a named ``tool_choice`` comes back parsed (by the tool-call
  format the server detected from the template, or its default), its arguments are a JSON
  object that fits the tool's schema, and after the tool's result is fed back the model
  answers in text;
- ``json_mode``: ``response_format: json_object`` gives a valid JSON object;
- ``speed``: a streamed completion's time to first token and decode rate.

Every check but ``loads`` and the in-process template render goes through the OpenAI API, so
both modes check the same thing: in process, the model is loaded into an engine and served by
mlxctl's own server on a loopback port for the duration; with ``--url`` the requests go to a
running server (mlxctl's or any OpenAI-compatible one). Peak memory is MLX's
(``mx.get_peak_memory``) in process, and ``/v1/status``'s ``memory.peak_bytes`` for a URL
(when the server has one).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mlxctl.errors import MlxctlError, UnavailableError

Progress = Callable[[str], None] | None

CHECKS = ("loads", "chat_template", "deterministic", "tool_call", "json_mode", "speed")
NEEDS_TEMPLATE = ("deterministic", "tool_call", "json_mode")
TIMEOUT_S = 300.0  # per request: a large model on a CPU is slow, not broken

PROMPT = "Write two sentences about the sea."
WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city.",
    "parameters": WEATHER_SCHEMA}}  # fmt: skip
TOOL_QUESTION = "What is the weather in Paris?"
TOOL_RESULT = '{"city": "Paris", "temperature_c": 18, "sky": "cloudy"}'
JSON_PROMPT = "Describe a cat as a JSON object with the keys name and age."
SPEED_PROMPT = "Once upon a time, in a small village by the sea, there lived"


@dataclass(frozen=True)
class Budget:
    """max_tokens of each request: enough to judge, short enough for a CPU."""

    determinism: int = 24
    call: int = 64  # the forcing grammar ends the call when it closes, well before this
    answer: int = 32
    json: int = 96  # the object must close within it
    speed: int = 48


DEFAULT_BUDGET = Budget()


@dataclass
class Check:
    name: str
    status: str  # pass | fail | skip
    detail: str
    seconds: float | None = None


@dataclass
class Scorecard:
    model: str
    target: str  # "in-process" or the server's URL
    checks: list[Check] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(c.status != "fail" for c in self.checks)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == "fail"]

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)

    def as_dict(self) -> dict:
        return {"model": self.model, "target": self.target, "passed": self.passed,
                "checks": [asdict(c) for c in self.checks], "metrics": self.metrics}  # fmt: skip


METRICS = ("load_s", "ttft_s", "decode_tok_s", "peak_memory_bytes", "tool_call_parser")


# --- in process -----------------------------------------------------------------------------


def qualify_model(ref: str, *, progress: Progress = None, budget: Budget | None = None) -> Scorecard:
    """Load ``ref`` (a store name or anything ``mlxctl run -m`` takes) and qualify it here."""
    import mlx.core as mx

    budget = budget or DEFAULT_BUDGET
    name, path = _resolve(ref, progress)
    card = _new_card(name, "in-process")
    mx.reset_peak_memory()
    _say(progress, f"loading {name}")
    engine, seconds = _start_engine(path, name, card)
    if engine is None:
        card.checks += [Check(n, "skip", "the model did not load") for n in CHECKS[1:]]
        return card
    card.metrics["load_s"] = round(seconds, 3)
    try:
        qualify_engine(engine, name, card, progress, budget)
    finally:
        engine.shutdown()
    card.metrics["peak_memory_bytes"] = int(mx.get_peak_memory()) or None
    return card


def qualify_engine(engine: Any, name: str, card: Scorecard, progress: Progress = None,
                   budget: Budget | None = None) -> Scorecard:  # fmt: skip
    """The checks after ``loads`` on a started engine: the template rendered directly, the rest
    through mlxctl's server on a loopback port."""
    from mlxctl.api.chat_plan import ModelFormats
    from mlxctl.server.app import init_app
    from mlxctl.server.runner import BackgroundServer
    from mlxctl.server.settings import ServeSettings

    budget = budget or DEFAULT_BUDGET
    tokenizer = engine.model.tokenizer
    formats = ModelFormats.detect(tokenizer)
    parser = formats.tool_parser or formats.default_tool_parser
    how = "detected" if formats.tool_parser else "default: the template names no tool-call format"
    card.metrics["tool_call_parser"] = f"{parser} ({how})"
    card.checks.append(_render_template(tokenizer))
    server = BackgroundServer(init_app(engine, ServeSettings(model_name=name))).start()
    try:
        with _Api(server.url) as api:
            _api_checks(api, name, card, progress, budget)
    finally:
        server.stop()
    return card


def _resolve(ref: str, progress: Progress) -> tuple[str, Path]:
    from mlxctl.models.manifest import model_name
    from mlxctl.models.resolve import resolve_model
    from mlxctl.models.store import ModelStore

    store = ModelStore()
    ref = ref.strip()
    if ref and "/" not in ref and ref not in (".", "..") and store.has(ref):
        folder = store.model_path(ref)
        return model_name(folder), folder
    resolved = resolve_model(ref, progress=progress, store=store)
    return resolved.name, resolved.path


def _start_engine(path: Path, name: str, card: Scorecard) -> tuple[Any, float]:
    from mlxctl.engine.engine import Engine
    from mlxctl.models.loader import load_model

    started = time.perf_counter()
    try:
        engine = Engine(lambda: load_model(path, name=name)).start()
    except Exception as e:  # noqa: BLE001 - any load failure is the check's result
        seconds = time.perf_counter() - started
        card.checks.append(Check("loads", "fail", _error_text(e), round(seconds, 3)))
        return None, seconds
    seconds = time.perf_counter() - started
    card.checks.append(Check("loads", "pass", f"loaded in {seconds:.2f} s", round(seconds, 3)))
    return engine, seconds


def _render_template(tokenizer: Any) -> Check:
    from mlxctl.api.prompt import render_chat

    conversation = [
        {"role": "user", "content": "Hello!"},
        {"role": "assistant", "content": "Hi. How can I help?"},
        {"role": "user", "content": TOOL_QUESTION},
    ]
    started = time.perf_counter()
    try:
        tokens = render_chat(tokenizer, conversation)
    except Exception as e:  # noqa: BLE001 - a template that raises fails the check
        return Check("chat_template", "fail", _error_text(e))
    seconds = round(time.perf_counter() - started, 3)
    return Check("chat_template", "pass", f"renders a 3-turn chat ({len(tokens)} tokens)", seconds)


# --- a running server -----------------------------------------------------------------------


def qualify_url(url: str, *, model: str | None = None, api_key: str | None = None,
                progress: Progress = None, budget: Budget | None = None) -> Scorecard:  # fmt: skip
    """Qualify the model a running OpenAI-compatible server serves (``model``: which one)."""
    from mlxctl.tui.client import base_url

    budget = budget or DEFAULT_BUDGET
    base = base_url(url)
    with _Api(base, api_key) as api:
        name, check = _listed_model(api, model)
        card = _new_card(name, base)
        card.checks.append(check)
        if check.status == "fail":
            card.checks += [Check(n, "skip", "the server does not serve it") for n in CHECKS[1:]]
            return card
        card.checks.append(_template_over_api(api, name))
        _api_checks(api, name, card, progress, budget)
        card.metrics["peak_memory_bytes"] = _server_peak(api)
    return card


def _listed_model(api: _Api, model: str | None) -> tuple[str, Check]:
    started = time.perf_counter()
    try:
        listing = api.get("/v1/models")
    except _Refused as e:
        raise UnavailableError(f"cannot qualify {api.base}: {e}") from None
    seconds = round(time.perf_counter() - started, 3)
    ids = [m.get("id") for m in listing.get("data") or [] if isinstance(m, dict)]
    if model is None:
        if not ids:
            return "unknown", Check("loads", "fail", "the server lists no model in /v1/models")
        model = ids[0]
    if model not in ids:
        known = ", ".join(map(str, ids)) or "none"
        return model, Check("loads", "fail", f"/v1/models does not list {model} (it lists {known})")
    return model, Check("loads", "pass", f"served ({api.base}/v1/models lists it)", seconds)


def _template_over_api(api: _Api, model: str) -> Check:
    """mlxctl's /tokenize renders messages with the template; other servers: a 1-token chat."""
    conversation = [{"role": "user", "content": "Hello!"},
                    {"role": "assistant", "content": "Hi. How can I help?"},
                    {"role": "user", "content": TOOL_QUESTION}]  # fmt: skip
    started = time.perf_counter()
    try:
        body = api.post("/tokenize", {"model": model, "messages": conversation})
        detail = f"renders a 3-turn chat ({body.get('count')} tokens)"
    except _Refused as e:
        if e.status not in (404, 405):
            return Check("chat_template", "fail", str(e))
        try:
            api.post("/v1/chat/completions", {"model": model, "messages": conversation,
                                              "max_tokens": 1, "temperature": 0})  # fmt: skip
        except _Refused as e2:
            return Check("chat_template", "fail", str(e2))
        detail = "a 3-turn chat is accepted"
    return Check("chat_template", "pass", detail, round(time.perf_counter() - started, 3))


def _server_peak(api: _Api) -> int | None:
    try:
        status = api.get("/v1/status")
    except _Refused:
        return None
    peak = (status.get("memory") or {}).get("peak_bytes")
    return int(peak) if isinstance(peak, (int, float)) and peak > 0 else None


# --- the checks over the OpenAI API ----------------------------------------------------------


def _api_checks(api: _Api, model: str, card: Scorecard, progress: Progress, budget: Budget) -> None:
    template = card.check("chat_template")
    for name, run in (("deterministic", _deterministic), ("tool_call", _tool_call),
                      ("json_mode", _json_mode), ("speed", _speed)):  # fmt: skip
        if name in NEEDS_TEMPLATE and template is not None and template.status == "fail":
            card.checks.append(Check(name, "skip", "needs a chat template"))
            continue
        _say(progress, f"checking {name.replace('_', ' ')}")
        started = time.perf_counter()
        try:
            check = run(api, model, card, budget)
        except _Refused as e:
            check = Check(name, "fail", str(e))
        check.seconds = round(time.perf_counter() - started, 3)
        card.checks.append(check)


def _chat(api: _Api, model: str, messages: list[dict], max_tokens: int, **extra: Any) -> dict:
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0,
            "seed": 0, **extra}  # fmt: skip
    reply = api.post("/v1/chat/completions", body)
    choices = reply.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        raise _Refused("the reply has no choices")
    return choices[0]


def _deterministic(api: _Api, model: str, card: Scorecard, budget: Budget) -> Check:
    messages = [{"role": "user", "content": PROMPT}]
    first, second = (_chat(api, model, messages, budget.determinism) for _ in range(2))
    a = (first.get("message") or {}).get("content") or ""
    b = (second.get("message") or {}).get("content") or ""
    if not a.strip():
        return Check("deterministic", "fail", "the model answered with no text")
    if a != b:
        at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        return Check("deterministic", "fail", f"two greedy runs differ from character {at}: "
                     f"{_clip(a[at:])!r} vs {_clip(b[at:])!r}")  # fmt: skip
    return Check("deterministic", "pass", f"two greedy runs gave the same text: {_clip(a)!r}")


def _tool_call(api: _Api, model: str, card: Scorecard, budget: Budget) -> Check:
    import jsonschema

    messages = [{"role": "user", "content": TOOL_QUESTION}]
    named = {"type": "function", "function": {"name": "get_weather"}}
    choice = _chat(api, model, messages, budget.call, tools=[WEATHER_TOOL], tool_choice=named)
    calls = (choice.get("message") or {}).get("tool_calls") or []
    if not calls:
        text = (choice.get("message") or {}).get("content") or ""
        return Check("tool_call", "fail", f"no tool call parsed from the forced reply: {_clip(text)!r}")
    fn = calls[0].get("function") or {}
    if fn.get("name") != "get_weather":
        return Check("tool_call", "fail", f"called {fn.get('name')!r}, not get_weather")
    try:
        arguments = json.loads(fn.get("arguments") or "")
        jsonschema.validate(arguments, WEATHER_SCHEMA)
    except (ValueError, jsonschema.ValidationError) as e:
        return Check("tool_call", "fail", f"bad arguments {fn.get('arguments')!r}: {_first_line(e)}")
    call_id = calls[0].get("id") or "call_0"
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": "get_weather", "arguments": fn.get("arguments")}}]},
        {"role": "tool", "tool_call_id": call_id, "content": TOOL_RESULT},
    ]  # fmt: skip
    answer = _chat(api, model, messages, budget.answer, tools=[WEATHER_TOOL], tool_choice="none")
    text = ((answer.get("message") or {}).get("content") or "").strip()
    if not text or (answer.get("message") or {}).get("tool_calls"):
        return Check("tool_call", "fail", "after the tool result the model did not answer in text")
    call = f"get_weather({json.dumps(arguments, ensure_ascii=False)})"
    parser = card.metrics.get("tool_call_parser")
    via = f" via {parser.split(' ')[0]}" if parser else ""
    return Check("tool_call", "pass", f"{call}{via}; then answered: {_clip(text)!r}")


def _json_mode(api: _Api, model: str, card: Scorecard, budget: Budget) -> Check:
    messages = [{"role": "user", "content": JSON_PROMPT}]
    choice = _chat(api, model, messages, budget.json, response_format={"type": "json_object"})
    text = (choice.get("message") or {}).get("content") or ""
    try:
        value = json.loads(text)
    except ValueError as e:
        cut = " (cut off at max_tokens)" if choice.get("finish_reason") == "length" else ""
        return Check("json_mode", "fail", f"not valid JSON{cut}: {_first_line(e)}: {_clip(text)!r}")
    if not isinstance(value, dict):
        return Check("json_mode", "fail", f"valid JSON but not an object: {_clip(text)!r}")
    return Check("json_mode", "pass", f"a valid JSON object: {_clip(text)!r}")


def _speed(api: _Api, model: str, card: Scorecard, budget: Budget) -> Check:
    body = {"model": model, "prompt": SPEED_PROMPT, "max_tokens": budget.speed, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}  # fmt: skip
    try:
        figures = _stream_timing(api, body)
    except _Refused as e:
        if e.status != 400:
            raise
        del body["ignore_eos"]  # not every server takes vLLM's extension
        figures = _stream_timing(api, body)
    ttft, first, last, tokens = figures
    if tokens < 2 or last <= first:
        return Check("speed", "fail", f"the stream carried {tokens} token(s): too few to time")
    rate = (tokens - 1) / (last - first)
    card.metrics["ttft_s"] = round(ttft, 4)
    card.metrics["decode_tok_s"] = round(rate, 2)
    return Check("speed", "pass", f"TTFT {ttft * 1000:.0f} ms, decode {rate:.1f} tok/s "
                 f"({tokens} tokens streamed)")  # fmt: skip


def _stream_timing(api: _Api, body: dict) -> tuple[float, float, float, int]:
    """(time to first token, first and last token times, tokens) of a streamed completion."""
    sent = time.perf_counter()
    first = last = None
    chunks = 0
    usage_tokens = None
    for event in api.stream("/v1/completions", body):
        if event.get("usage"):
            usage_tokens = event["usage"].get("completion_tokens")
        for choice in event.get("choices") or []:
            if choice.get("text"):
                now = time.perf_counter()
                first = first if first is not None else now
                last = now
                chunks += 1
    if first is None or last is None:
        return 0.0, 0.0, 0.0, 0
    return first - sent, first, last, int(usage_tokens or chunks)


# --- HTTP -----------------------------------------------------------------------------------


class _Refused(Exception):
    """A request that failed: the server's own error message, one line."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class _Api:
    """A small synchronous OpenAI-API client (httpx)."""

    def __init__(self, base: str, api_key: str | None = None):
        import httpx

        self.base = base.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=self.base, headers=headers, timeout=TIMEOUT_S)

    def __enter__(self) -> _Api:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._client.close()

    def get(self, path: str) -> dict:
        return self._json(self._send("GET", path))

    def post(self, path: str, body: dict) -> dict:
        return self._json(self._send("POST", path, json=body))

    def stream(self, path: str, body: dict) -> Iterator[dict]:
        import httpx

        try:
            with self._client.stream("POST", path, json=body) as response:
                if response.status_code >= 400:
                    response.read()
                    raise _Refused(_error_message(response), response.status_code)
                for line in response.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        return
                    try:
                        event = json.loads(data)
                    except ValueError:
                        raise _Refused(f"{path}: a stream event is not JSON: {_clip(data)!r}") from None
                    if isinstance(event, dict):
                        if event.get("error"):
                            raise _Refused(f"{path}: {_error_text(event['error'])}")
                        yield event
        except httpx.HTTPError as e:
            raise _Refused(f"{path}: {_first_line(e)}") from None

    def _send(self, method: str, path: str, **kwargs: Any) -> Any:
        import httpx

        try:
            response = self._client.request(method, path, **kwargs)
        except httpx.HTTPError as e:
            raise _Refused(f"{path}: {_first_line(e) or type(e).__name__}") from None
        if response.status_code >= 400:
            raise _Refused(_error_message(response), response.status_code)
        return response

    @staticmethod
    def _json(response: Any) -> dict:
        try:
            value = response.json()
        except ValueError:
            raise _Refused(f"{response.request.url.path}: the reply is not JSON") from None
        if not isinstance(value, dict):
            raise _Refused(f"{response.request.url.path}: the reply is not a JSON object")
        return value


def _error_message(response: Any) -> str:
    where = f"{response.request.url.path}: HTTP {response.status_code}"
    try:
        body = response.json()
    except ValueError:
        return f"{where}: {_clip(response.text)}" if response.text.strip() else where
    error = body.get("error") if isinstance(body, dict) else None
    return f"{where}: {_error_text(error if error is not None else body)}"


def _error_text(error: Any) -> str:
    if isinstance(error, MlxctlError):
        return error.message
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {_first_line(error)}"
    if isinstance(error, dict):
        return _first_line(str(error.get("message") or error))
    return _first_line(str(error))


# --- rendering ------------------------------------------------------------------------------


def scorecard_text(card: Scorecard) -> str:
    """The scorecard for people: one line per check, then the figures."""
    where = "in process" if card.target == "in-process" else card.target
    lines = [f"{card.model} ({where}): {'qualifies' if card.passed else 'DOES NOT QUALIFY'}"]
    width = max(len(c.name) for c in card.checks) if card.checks else 10
    for c in card.checks:
        mark = {"pass": "pass", "fail": "FAIL", "skip": "skip"}[c.status]
        lines.append(f"  {c.name.replace('_', ' '):<{width}}  {mark}  {c.detail}")
    m = card.metrics
    figures = [
        ("load", f"{m['load_s']:.2f} s" if m.get("load_s") is not None else None),
        ("TTFT", f"{m['ttft_s'] * 1000:.0f} ms" if m.get("ttft_s") is not None else None),
        ("decode", f"{m['decode_tok_s']:.1f} tok/s" if m.get("decode_tok_s") is not None else None),
        ("peak memory", _bytes(m.get("peak_memory_bytes"))),
        ("tool calls", m.get("tool_call_parser")),
    ]
    shown = [f"{label} {value}" for label, value in figures if value]
    if shown:
        lines.append("  " + "; ".join(shown))
    return "\n".join(lines)


def _bytes(n: int | None) -> str | None:
    if not n:
        return None
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"


# --- helpers --------------------------------------------------------------------------------


def _new_card(name: str, target: str) -> Scorecard:
    return Scorecard(name, target, metrics={key: None for key in METRICS})


def _clip(text: str, limit: int = 60) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _first_line(error: BaseException | str) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else (type(error).__name__ if isinstance(error, BaseException) else "")


def _say(progress: Progress, message: str) -> None:
    if progress is not None:
        progress(message)
