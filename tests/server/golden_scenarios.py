"""The golden scenarios: what the scripted engine generates, and each API's request for it.

A scenario's script is named in the prompt (``script <name>``); ``think`` scenarios go to the
server with the ``think`` reasoning parser, the others to one with none. Both use Hermes tool
calls (``<tool_call>{json}</tool_call>``), parsed when the request offers tools.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlxctl.engine.events import FinishReason
from tests.server.scripted_engine import Script

MODEL = "scripted"
CALL = ("<tool_call>", "\n", '{"name": "get_weather", ', '"arguments": {"city": "Paris"}}', "\n", "</tool_call>")
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
DESCRIPTION = "The weather in a city."


@dataclass(frozen=True)
class Scenario:
    script: Script
    tools: bool = False
    think: bool = False
    stop: tuple[str, ...] = ()  # the request's stop strings
    usage: bool = False  # a streamed OpenAI request asks for the usage chunk
    max_tokens: int = 16


SCENARIOS = {
    "plain": Scenario(Script(("Hello", ",", " world", "!"))),
    "reasoning": Scenario(Script(("<think>", "The user", " greets.", "</think>", "\n\n", "Hello", " there!")),
                          think=True),
    "tool_call": Scenario(Script(CALL), tools=True),
    "text_then_tool": Scenario(Script(("Let me", " check.", "\n", *CALL)), tools=True),
    "think_blank_tool": Scenario(Script(("<think>", "Weather needed.", "</think>", "\n\n", *CALL)),
                                 tools=True, think=True),
    "tool_cut_off": Scenario(Script((*CALL[:3], '"arguments": {"ci'), FinishReason.LENGTH), tools=True,
                             max_tokens=4),
    "tool_unclosed": Scenario(Script(CALL[:4], FinishReason.LENGTH), tools=True, max_tokens=4),
    "engine_error": Scenario(Script(("Hello", " wor"), error="generation failed: scripted fault")),
    "stop_string": Scenario(Script(("Hello", " world"), stop_string="END"), stop=("END",)),
    "usage_cached": Scenario(Script(("Hello", "!"), cached_tokens=5), usage=True),
}
COMPLETION_SCENARIOS = ("plain", "engine_error", "stop_string", "usage_cached", "length")
COMPLETION_ONLY = {"length": Scenario(Script(("Hello", " wor"), FinishReason.LENGTH), max_tokens=2)}


def scripts() -> dict[str, Script]:
    return {name: s.script for name, s in (SCENARIOS | COMPLETION_ONLY).items()}


def prompt(name: str) -> str:
    return f"Please run script {name} now."


def chat_request(name: str, s: Scenario, stream: bool) -> dict:
    body = {"model": MODEL, "messages": [{"role": "user", "content": prompt(name)}],
            "max_tokens": s.max_tokens, "stream": stream}
    if s.tools:
        body["tools"] = [{"type": "function", "function": {"name": "get_weather", "description": DESCRIPTION,
                                                           "parameters": SCHEMA}}]
    return body | _openai_extras(s, stream)


def completion_request(name: str, s: Scenario, stream: bool) -> dict:
    body = {"model": MODEL, "prompt": prompt(name), "max_tokens": s.max_tokens, "stream": stream}
    return body | _openai_extras(s, stream)


def _openai_extras(s: Scenario, stream: bool) -> dict:
    extras: dict = {"stop": list(s.stop)} if s.stop else {}
    if s.usage and stream:
        extras["stream_options"] = {"include_usage": True}
    return extras


def messages_request(name: str, s: Scenario, stream: bool) -> dict:
    body = {"model": MODEL, "messages": [{"role": "user", "content": prompt(name)}],
            "max_tokens": s.max_tokens, "stream": stream}
    if s.tools:
        body["tools"] = [{"name": "get_weather", "description": DESCRIPTION, "input_schema": SCHEMA}]
    if s.stop:
        body["stop_sequences"] = list(s.stop)
    return body


def responses_request(name: str, s: Scenario, stream: bool) -> dict:
    body = {"model": MODEL, "input": prompt(name), "max_output_tokens": s.max_tokens, "stream": stream}
    if s.tools:
        body["tools"] = [{"type": "function", "name": "get_weather", "description": DESCRIPTION,
                          "parameters": SCHEMA}]
    return body  # the Responses API has no stop strings: the script still ends on one


API_REQUESTS = {
    "chat": ("/v1/chat/completions", chat_request),
    "messages": ("/v1/messages", messages_request),
    "responses": ("/v1/responses", responses_request),
}
