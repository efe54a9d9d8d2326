"""The checks made over the OpenAI API, alike in process and against a URL: determinism, a forced
tool call, JSON mode and speed."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from mlxctl.models.qualify_card import Budget, Check, Scorecard
from mlxctl.models.qualify_http import Api, Refused, clip, first_line

Progress = Callable[[str], None] | None

NEEDS_TEMPLATE = ("deterministic", "tool_call", "json_mode")

PROMPT = "Write two sentences about the sea."
WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city.",
    "parameters": WEATHER_SCHEMA}}  # fmt: skip
TOOL_QUESTION = "What is the weather in Paris?"
TOOL_RESULT = '{"city": "Paris", "temperature_c": 18, "sky": "cloudy"}'
JSON_PROMPT = "Describe a cat as a JSON object with the keys name and age."
SPEED_PROMPT = "Once upon a time, in a small village by the sea, there lived"


def api_checks(api: Api, model: str, card: Scorecard, progress: Progress, budget: Budget) -> None:
    template = card.check("chat_template")
    for name, run in (("deterministic", _deterministic), ("tool_call", _tool_call),
                      ("json_mode", _json_mode), ("speed", _speed)):  # fmt: skip
        if name in NEEDS_TEMPLATE and template is not None and template.status == "fail":
            card.checks.append(Check(name, "skip", "needs a chat template"))
            continue
        say(progress, f"checking {name.replace('_', ' ')}")
        started = time.perf_counter()
        try:
            check = run(api, model, card, budget)
        except Refused as e:
            check = Check(name, "fail", str(e))
        check.seconds = round(time.perf_counter() - started, 3)
        card.checks.append(check)


def _chat(api: Api, model: str, messages: list[dict], max_tokens: int, **extra: Any) -> dict:
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0,
            "seed": 0, **extra}  # fmt: skip
    reply = api.post("/v1/chat/completions", body)
    choices = reply.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        raise Refused("the reply has no choices")
    return choices[0]


def _deterministic(api: Api, model: str, card: Scorecard, budget: Budget) -> Check:
    messages = [{"role": "user", "content": PROMPT}]
    first, second = (_chat(api, model, messages, budget.determinism) for _ in range(2))
    a = (first.get("message") or {}).get("content") or ""
    b = (second.get("message") or {}).get("content") or ""
    if not a.strip():
        return Check("deterministic", "fail", "the model answered with no text")
    if a != b:
        at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        return Check("deterministic", "fail", f"two greedy runs differ from character {at}: "
                     f"{clip(a[at:])!r} vs {clip(b[at:])!r}")  # fmt: skip
    return Check("deterministic", "pass", f"two greedy runs gave the same text: {clip(a)!r}")


def _tool_call(api: Api, model: str, card: Scorecard, budget: Budget) -> Check:
    import jsonschema

    messages = [{"role": "user", "content": TOOL_QUESTION}]
    choice, how = _call_reply(api, model, messages, budget)
    calls = (choice.get("message") or {}).get("tool_calls") or []
    if not calls:
        text = (choice.get("message") or {}).get("content") or ""
        return Check("tool_call", "fail", f"no tool call parsed from the {how} reply: {clip(text)!r}")
    fn = calls[0].get("function") or {}
    if fn.get("name") != "get_weather":
        return Check("tool_call", "fail", f"called {fn.get('name')!r}, not get_weather")
    try:
        arguments = json.loads(fn.get("arguments") or "")
        jsonschema.validate(arguments, WEATHER_SCHEMA)
    except (ValueError, jsonschema.ValidationError) as e:
        return Check("tool_call", "fail", f"bad arguments {fn.get('arguments')!r}: {first_line(e)}")
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
    unforced = "" if how == "forced" else " (tool_choice auto: the server cannot force a call in this format)"
    return Check("tool_call", "pass", f"{call}{via}{unforced}; then answered: {clip(text)!r}")


def _call_reply(api: Api, model: str, messages: list[dict], budget: Budget) -> tuple[dict, str]:
    """The reply to the weather question with the call forced (a named tool_choice); where the
    server has no grammar to force calls in the model's format (a 400 saying so), the model is
    asked with tool_choice auto instead, so the parser is still exercised."""
    named = {"type": "function", "function": {"name": "get_weather"}}
    try:
        return _chat(api, model, messages, budget.call, tools=[WEATHER_TOOL], tool_choice=named), "forced"
    except Refused as e:
        if e.status != 400 or "tool_choice" not in str(e):
            raise
    return _chat(api, model, messages, budget.call, tools=[WEATHER_TOOL], tool_choice="auto"), "unforced"


def _json_mode(api: Api, model: str, card: Scorecard, budget: Budget) -> Check:
    messages = [{"role": "user", "content": JSON_PROMPT}]
    choice = _chat(api, model, messages, budget.json, response_format={"type": "json_object"})
    text = (choice.get("message") or {}).get("content") or ""
    try:
        value = json.loads(text)
    except ValueError as e:
        cut = " (cut off at max_tokens)" if choice.get("finish_reason") == "length" else ""
        return Check("json_mode", "fail", f"not valid JSON{cut}: {first_line(e)}: {clip(text)!r}")
    if not isinstance(value, dict):
        return Check("json_mode", "fail", f"valid JSON but not an object: {clip(text)!r}")
    return Check("json_mode", "pass", f"a valid JSON object: {clip(text)!r}")


def _speed(api: Api, model: str, card: Scorecard, budget: Budget) -> Check:
    body = {"model": model, "prompt": SPEED_PROMPT, "max_tokens": budget.speed, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}  # fmt: skip
    try:
        figures = _stream_timing(api, body)
    except Refused as e:
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


def _stream_timing(api: Api, body: dict) -> tuple[float, float, float, int]:
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


def say(progress: Progress, message: str) -> None:
    if progress is not None:
        progress(message)
