#!/usr/bin/env python3
"""The official SDKs and agent frameworks against a running ``mlxctl serve``: one check per
(framework, feature), a table or --json.

  /tmp/fw-venv/bin/python scripts/framework_checks.py --url http://127.0.0.1:8093 \
         [--model smollm2-135m] [--only openai,litellm] [--json]

The frameworks are not dependencies of mlxctl: install them in a venv of their own (see the
"SDKs and frameworks" section of docs/serve.md). A check passes when the protocol exchange
completes the way the framework expects: no exception, the tool call or the structure parsed
(a tiny model's answers are random-ish; forced paths guarantee the structure). A framework
that is not installed shows as one "skip" row. Exit status 1 when any check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import enum
import importlib.metadata
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Callable

import pydantic

TIMEOUT = 300.0  # seconds a single request may take on a loaded CPU
SHORT = 12  # tokens for a plain answer
CALL = 128  # tokens for a tool call or a structure (bounded strings: the grammar ends it)
FREE = 1024  # tokens for a free answer that must end by itself
ASK = "What is the weather forecast for Paris, France, in celsius for 3 days?"


class Unit(str, enum.Enum):
    celsius = "celsius"
    fahrenheit = "fahrenheit"


class Place(pydantic.BaseModel):
    city: str = pydantic.Field(max_length=16)
    country: str = pydantic.Field(max_length=16)


class Forecast(pydantic.BaseModel):
    """Get the weather forecast for a place."""

    place: Place
    unit: Unit
    days: int = pydantic.Field(ge=1, le=7)


class Answer(pydantic.BaseModel):
    summary: str = pydantic.Field(max_length=24)
    unit: Unit


def get_forecast(place: Place, unit: Unit, days: int) -> str:
    """Get the weather forecast for a place."""
    return f"{place.city}: sunny, 21 degrees {unit.value}, for {days} days"


FORECAST_SCHEMA = Forecast.model_json_schema()
CHECKS: list[tuple[str, str, Callable]] = []


def check(dist: str, name: str):
    """Register a check of the distribution ``dist``: it raises on failure, returns a note."""
    def register(fn):
        CHECKS.append((dist, name, fn))
        return fn
    return register


class Ctx:
    def __init__(self, url: str, model: str):
        self.url = url.rstrip("/")
        self.v1 = f"{self.url}/v1"
        self.model = model

    def openai(self):
        import openai
        return openai.OpenAI(base_url=self.v1, api_key="checks", max_retries=0, timeout=TIMEOUT)

    def async_openai(self):
        import openai
        return openai.AsyncOpenAI(base_url=self.v1, api_key="checks", max_retries=0, timeout=TIMEOUT)

    def anthropic(self):
        import anthropic
        return anthropic.Anthropic(base_url=self.url, api_key="checks", max_retries=0, timeout=TIMEOUT)

    def async_anthropic(self):
        import anthropic
        return anthropic.AsyncAnthropic(base_url=self.url, api_key="checks", max_retries=0, timeout=TIMEOUT)


def user(text: str = "Hi") -> list[dict]:
    return [{"role": "user", "content": text}]


def forecast_of(arguments: str | dict) -> Forecast:
    """The tool call's arguments parsed as the tool's model (raises when they are not)."""
    if isinstance(arguments, str):
        return Forecast.model_validate_json(arguments)
    return Forecast.model_validate(arguments)


def nonempty(text: str | None, what: str = "text") -> str:
    if not text:
        raise AssertionError(f"empty {what}")
    return f"{len(text)} chars"


# ---- openai SDK ------------------------------------------------------------------------------


def openai_tool() -> dict:
    import openai
    return openai.pydantic_function_tool(Forecast, name="get_forecast")  # strict, with $defs


@check("openai", "chat")
def openai_chat(ctx: Ctx) -> str:
    r = ctx.openai().chat.completions.create(model=ctx.model, messages=user(), max_tokens=SHORT)
    return nonempty(r.choices[0].message.content)


@check("openai", "chat stream")
def openai_chat_stream(ctx: Ctx) -> str:
    stream = ctx.openai().chat.completions.create(model=ctx.model, messages=user(), max_tokens=SHORT, stream=True,
                                                  stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].usage is not None, "no usage chunk"
    return nonempty(text)


@check("openai", "tool auto ($defs+Enum)")
def openai_tool_auto(ctx: Ctx) -> str:
    r = ctx.openai().chat.completions.create(model=ctx.model, messages=user(ASK), tools=[openai_tool()],
                                             max_tokens=CALL)
    calls = r.choices[0].message.tool_calls or []
    for call in calls:
        forecast_of(call.function.arguments)
    return f"{len(calls)} call(s)"


@check("openai", "tool forced ($defs+Enum)")
def openai_tool_forced(ctx: Ctx) -> str:
    r = ctx.openai().chat.completions.create(model=ctx.model, messages=user(ASK), tools=[openai_tool()],
                                             tool_choice="required", max_tokens=CALL)
    call = r.choices[0].message.tool_calls[0]
    return f"{call.function.name}: {forecast_of(call.function.arguments).place.city!r}"


@check("openai", "structured output (parse)")
def openai_parse(ctx: Ctx) -> str:
    r = ctx.openai().chat.completions.parse(model=ctx.model, messages=user(ASK), response_format=Answer,
                                            max_tokens=CALL)
    parsed = r.choices[0].message.parsed
    assert isinstance(parsed, Answer), f"parsed is {parsed!r}"
    return f"unit={parsed.unit.value}"


@check("openai", "nulls for nullable fields")
def openai_nulls(ctx: Ctx) -> str:
    r = ctx.openai().chat.completions.create(model=ctx.model, messages=user(), max_tokens=SHORT, n=None,
                                             logprobs=None, store=None, temperature=None, stop=None, seed=None)
    return nonempty(r.choices[0].message.content)


@check("openai", "responses")
def openai_responses(ctx: Ctx) -> str:
    r = ctx.openai().responses.create(model=ctx.model, input="Hi", max_output_tokens=16)
    return nonempty(r.output_text)


@check("openai", "responses stream")
def openai_responses_stream(ctx: Ctx) -> str:
    events = list(ctx.openai().responses.create(model=ctx.model, input="Hi", max_output_tokens=16, stream=True))
    assert events[-1].type == "response.completed" or events[-1].type == "response.incomplete", events[-1].type
    return f"{len(events)} events"


@check("openai", "responses tool forced ($defs+Enum)")
def openai_responses_forced(ctx: Ctx) -> str:
    tool = {"type": "function", "name": "get_forecast", **{k: openai_tool()["function"][k] for k in
                                                            ("description", "parameters", "strict")}}
    r = ctx.openai().responses.create(model=ctx.model, input=ASK, tools=[tool], tool_choice="required",
                                      max_output_tokens=CALL)
    call = next(item for item in r.output if item.type == "function_call")
    return f"{call.name}: {forecast_of(call.arguments).place.city!r}"


@check("openai", "responses parse (text.format)")
def openai_responses_parse(ctx: Ctx) -> str:
    r = ctx.openai().responses.parse(model=ctx.model, input=ASK, text_format=Answer, max_output_tokens=CALL)
    assert isinstance(r.output_parsed, Answer), f"parsed is {r.output_parsed!r}"
    return f"unit={r.output_parsed.unit.value}"


@check("openai", "responses nulls")
def openai_responses_nulls(ctx: Ctx) -> str:
    r = ctx.openai().responses.create(model=ctx.model, input="Hi", max_output_tokens=16, store=None,
                                      temperature=None, top_p=None, instructions=None, parallel_tool_calls=None)
    return r.status


# ---- anthropic SDK ---------------------------------------------------------------------------


def claude_tool() -> dict:
    return {"name": "get_forecast", "description": "Get the weather forecast for a place.",
            "input_schema": FORECAST_SCHEMA}


@check("anthropic", "messages")
def anthropic_messages(ctx: Ctx) -> str:
    msg = ctx.anthropic().messages.create(model=ctx.model, messages=user(), max_tokens=SHORT)
    return nonempty(msg.content[0].text)


@check("anthropic", "messages stream")
def anthropic_stream(ctx: Ctx) -> str:
    with ctx.anthropic().messages.stream(model=ctx.model, messages=user(), max_tokens=SHORT) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert final.stop_reason in ("end_turn", "max_tokens"), final.stop_reason
    return nonempty(text)


@check("anthropic", "tool auto ($defs+Enum)")
def anthropic_tool_auto(ctx: Ctx) -> str:
    msg = ctx.anthropic().messages.create(model=ctx.model, messages=user(ASK), tools=[claude_tool()],
                                          max_tokens=CALL)
    calls = [block for block in msg.content if block.type == "tool_use"]
    for call in calls:
        forecast_of(call.input)
    return f"{len(calls)} call(s)"


@check("anthropic", "tool forced ($defs+Enum)")
def anthropic_tool_forced(ctx: Ctx) -> str:
    msg = ctx.anthropic().messages.create(model=ctx.model, messages=user(ASK), tools=[claude_tool()],
                                          tool_choice={"type": "tool", "name": "get_forecast"}, max_tokens=CALL)
    call = next(block for block in msg.content if block.type == "tool_use")
    return f"{call.name}: {forecast_of(call.input).place.city!r}"


@check("anthropic", "nulls for nullable fields")
def anthropic_nulls(ctx: Ctx) -> str:
    msg = ctx.anthropic().messages.create(model=ctx.model, messages=user(), max_tokens=SHORT, metadata=None,
                                          system=None, extra_body={"temperature": None, "stop_sequences": None})
    return msg.stop_reason


# ---- openai-agents ---------------------------------------------------------------------------


def agents_run(ctx: Ctx, agent_kwargs: dict, chat: bool = False, max_turns: int = 4, max_tokens: int = CALL):
    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner
    from agents import set_tracing_disabled

    set_tracing_disabled(True)
    model_class = OpenAIChatCompletionsModel if chat else OpenAIResponsesModel
    model = model_class(model=ctx.model, openai_client=ctx.async_openai())
    settings = agent_kwargs.pop("model_settings", {})
    agent = Agent(name="checker", instructions="Answer briefly.", model=model,
                  model_settings=ModelSettings(max_tokens=max_tokens, **settings), **agent_kwargs)
    return Runner.run_sync(agent, ASK, max_turns=max_turns)


@check("openai-agents", "agent (Responses, default)")
def agents_plain(ctx: Ctx) -> str:
    # openai-agents raises on `response.incomplete` (a cut answer): room for a free answer to end
    return nonempty(str(agents_run(ctx, {}, max_tokens=FREE).final_output), "final_output")


@check("openai-agents", "agent (chat completions)")
def agents_chat(ctx: Ctx) -> str:
    return nonempty(str(agents_run(ctx, {}, chat=True).final_output), "final_output")


def agents_tool():
    from agents import function_tool
    return function_tool(get_forecast)


@check("openai-agents", "forced tool ($defs+Enum)")
def agents_forced_tool(ctx: Ctx) -> str:
    result = agents_run(ctx, {"tools": [agents_tool()], "model_settings": {"tool_choice": "required"},
                              "tool_use_behavior": "stop_on_first_tool"})
    return f"tool said {str(result.final_output)[:24]!r}"


@check("openai-agents", "output_type + forced tool")
def agents_typed_with_tool(ctx: Ctx) -> str:
    result = agents_run(ctx, {"tools": [agents_tool()], "output_type": Answer,
                              "model_settings": {"tool_choice": "required"}})
    assert isinstance(result.final_output, Answer), f"final_output is {result.final_output!r}"
    called = any(item.type == "tool_call_output_item" for item in result.new_items)
    return f"tool called: {called}; unit={result.final_output.unit.value}"


@check("openai-agents", "output_type (chat completions)")
def agents_typed_chat(ctx: Ctx) -> str:
    result = agents_run(ctx, {"output_type": Answer}, chat=True)
    assert isinstance(result.final_output, Answer), f"final_output is {result.final_output!r}"
    return f"unit={result.final_output.unit.value}"


# ---- pydantic-ai -----------------------------------------------------------------------------


def pydantic_ai_model(ctx: Ctx, kind: str):
    if kind == "anthropic":
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider
        return AnthropicModel(ctx.model, provider=AnthropicProvider(anthropic_client=ctx.async_anthropic()))
    from pydantic_ai.providers.openai import OpenAIProvider
    provider = OpenAIProvider(openai_client=ctx.async_openai())
    if kind == "responses":
        from pydantic_ai.models.openai import OpenAIResponsesModel
        return OpenAIResponsesModel(ctx.model, provider=provider)
    from pydantic_ai.models.openai import OpenAIChatModel
    return OpenAIChatModel(ctx.model, provider=provider)


def pydantic_ai_agent(ctx: Ctx, kind: str = "chat", **kwargs):
    from pydantic_ai import Agent
    return Agent(pydantic_ai_model(ctx, kind), model_settings={"max_tokens": CALL}, retries=3, **kwargs)


def pydantic_ai_run(agent, prompt: str):
    from pydantic_ai.usage import UsageLimits
    return agent.run_sync(prompt, usage_limits=UsageLimits(request_limit=4))


@check("pydantic-ai-slim", "chat")
def pydantic_ai_chat(ctx: Ctx) -> str:
    return nonempty(pydantic_ai_run(pydantic_ai_agent(ctx), "Hi").output)


@check("pydantic-ai-slim", "chat stream")
def pydantic_ai_stream(ctx: Ctx) -> str:
    async def stream() -> str:
        async with pydantic_ai_agent(ctx).run_stream("Hi") as result:
            return "".join([part async for part in result.stream_text(delta=True)])
    return nonempty(asyncio.run(stream()))


@check("pydantic-ai-slim", "output_type (tool output)")
def pydantic_ai_typed(ctx: Ctx) -> str:
    output = pydantic_ai_run(pydantic_ai_agent(ctx, output_type=Answer), ASK).output
    assert isinstance(output, Answer), output
    return f"unit={output.unit.value}"


@check("pydantic-ai-slim", "output_type (NativeOutput)")
def pydantic_ai_native(ctx: Ctx) -> str:
    from pydantic_ai import NativeOutput
    output = pydantic_ai_run(pydantic_ai_agent(ctx, output_type=NativeOutput(Answer)), ASK).output
    assert isinstance(output, Answer), output
    return f"unit={output.unit.value}"


async def first_step_only(run_ctx, tool_def):
    """Offer the tool on the first request only: then the output tool is the only choice (a tiny
    model would otherwise call the function tool again and again)."""
    return tool_def if run_ctx.run_step <= 1 else None


@check("pydantic-ai-slim", "tool, then output_type ($defs+Enum)")
def pydantic_ai_tool(ctx: Ctx) -> str:
    from pydantic_ai import Tool

    agent = pydantic_ai_agent(ctx, output_type=Answer, tools=[Tool(get_forecast, prepare=first_step_only)])
    result = pydantic_ai_run(agent, ASK)
    assert isinstance(result.output, Answer), result.output
    called = any(part.part_kind == "tool-return" and part.tool_name == "get_forecast"
                 for message in result.all_messages() for part in message.parts)
    return f"tool called: {called}; unit={result.output.unit.value}"


@check("pydantic-ai-slim", "responses model")
def pydantic_ai_responses(ctx: Ctx) -> str:
    return nonempty(pydantic_ai_run(pydantic_ai_agent(ctx, "responses"), "Hi").output)


@check("pydantic-ai-slim", "anthropic model")
def pydantic_ai_anthropic(ctx: Ctx) -> str:
    return nonempty(pydantic_ai_run(pydantic_ai_agent(ctx, "anthropic"), "Hi").output)


@check("pydantic-ai-slim", "anthropic model output_type")
def pydantic_ai_anthropic_typed(ctx: Ctx) -> str:
    output = pydantic_ai_run(pydantic_ai_agent(ctx, "anthropic", output_type=Answer), ASK).output
    assert isinstance(output, Answer), output
    return f"unit={output.unit.value}"


# ---- langchain -------------------------------------------------------------------------------


def chat_openai(ctx: Ctx, **kwargs):
    from langchain_openai import ChatOpenAI
    return ChatOpenAI(model=ctx.model, base_url=ctx.v1, api_key="checks", max_tokens=CALL, max_retries=0,
                      timeout=TIMEOUT, **kwargs)


def chat_anthropic(ctx: Ctx):
    from langchain_anthropic import ChatAnthropic
    return ChatAnthropic(model=ctx.model, base_url=ctx.url, api_key="checks", max_tokens=CALL, max_retries=0,
                         timeout=TIMEOUT)


@check("langchain-openai", "invoke")
def langchain_invoke(ctx: Ctx) -> str:
    return nonempty(chat_openai(ctx).invoke("Hi").content)


@check("langchain-openai", "stream")
def langchain_stream(ctx: Ctx) -> str:
    return nonempty("".join(chunk.content for chunk in chat_openai(ctx).stream("Hi")))


def langchain_call(message) -> str:
    if not message.tool_calls:
        meta = message.response_metadata
        stop = meta.get("finish_reason") or meta.get("stop_reason")
        raise AssertionError(f"no parsed tool call (stop {stop}, invalid_tool_calls {message.invalid_tool_calls})")
    call = message.tool_calls[0]
    return f"{call['name']}: {forecast_of(call['args']).place.city!r}"


@check("langchain-openai", "bind_tools forced, strict ($defs+Enum)")
def langchain_forced(ctx: Ctx) -> str:
    return langchain_call(chat_openai(ctx).bind_tools([Forecast], tool_choice="Forecast", strict=True).invoke(ASK))


@check("langchain-openai", "bind_tools forced, non-strict")
def langchain_forced_lenient(ctx: Ctx) -> str:
    return langchain_call(chat_openai(ctx).bind_tools([Forecast], tool_choice="Forecast").invoke(ASK))


@check("langchain-openai", "with_structured_output")
def langchain_structured(ctx: Ctx) -> str:
    output = chat_openai(ctx).with_structured_output(Answer).invoke(ASK)
    assert isinstance(output, Answer), output
    return f"unit={output.unit.value}"


@check("langchain-openai", "responses API")
def langchain_responses(ctx: Ctx) -> str:
    message = chat_openai(ctx, use_responses_api=True).invoke("Hi")
    return nonempty(message.text if isinstance(message.text, str) else message.text())


@check("langchain-anthropic", "invoke")
def langchain_anthropic_invoke(ctx: Ctx) -> str:
    return nonempty(chat_anthropic(ctx).invoke("Hi").content)


@check("langchain-anthropic", "bind_tools forced ($defs+Enum)")
def langchain_anthropic_forced(ctx: Ctx) -> str:
    return langchain_call(chat_anthropic(ctx).bind_tools([Forecast], tool_choice="Forecast").invoke(ASK))


# ---- instructor ------------------------------------------------------------------------------


def instructor_extract(ctx: Ctx, mode_name: str, provider: str = "openai") -> str:
    import instructor

    mode = getattr(instructor.Mode, mode_name)
    if provider == "anthropic":
        client = instructor.from_anthropic(ctx.anthropic(), mode=mode)
    else:
        client = instructor.from_openai(ctx.openai(), mode=mode)
    output = client.create(model=ctx.model, messages=user(ASK), response_model=Forecast, max_tokens=CALL,
                           max_retries=2)
    assert isinstance(output, Forecast), output
    return f"{output.place.city!r}, {output.unit.value}"


@check("instructor", "TOOLS ($defs+Enum)")
def instructor_tools(ctx: Ctx) -> str:
    return instructor_extract(ctx, "TOOLS")


@check("instructor", "JSON_SCHEMA")
def instructor_json_schema(ctx: Ctx) -> str:
    return instructor_extract(ctx, "JSON_SCHEMA")


@check("instructor", "RESPONSES_TOOLS")
def instructor_responses_tools(ctx: Ctx) -> str:
    return instructor_extract(ctx, "RESPONSES_TOOLS")


@check("instructor", "ANTHROPIC_TOOLS")
def instructor_anthropic_tools(ctx: Ctx) -> str:
    return instructor_extract(ctx, "ANTHROPIC_TOOLS", provider="anthropic")


# ---- litellm ---------------------------------------------------------------------------------


def litellm_completion(ctx: Ctx, prefix: str, messages: list[dict] | None = None, max_tokens: int = SHORT,
                       **kwargs):
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download of model prices
    import litellm

    base = ctx.v1 if prefix == "openai" else ctx.url
    return litellm.completion(model=f"{prefix}/{ctx.model}", api_base=base, api_key="checks",
                              messages=messages or user(), max_tokens=max_tokens, timeout=TIMEOUT, **kwargs)


@check("litellm", "openai/ prefix")
def litellm_openai(ctx: Ctx) -> str:
    return nonempty(litellm_completion(ctx, "openai").choices[0].message.content)


@check("litellm", "openai/ prefix stream")
def litellm_openai_stream(ctx: Ctx) -> str:
    chunks = litellm_completion(ctx, "openai", stream=True)
    return nonempty("".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices))


@check("litellm", "anthropic/ prefix")
def litellm_anthropic(ctx: Ctx) -> str:
    return nonempty(litellm_completion(ctx, "anthropic").choices[0].message.content)


@check("litellm", "anthropic/ prefix forced tool")
def litellm_anthropic_tool(ctx: Ctx) -> str:
    tool = {"type": "function", "function": {"name": "get_forecast", "parameters": FORECAST_SCHEMA}}
    r = litellm_completion(ctx, "anthropic", tools=[tool],
                           tool_choice={"type": "function", "function": {"name": "get_forecast"}},
                           max_tokens=CALL, messages=user(ASK))
    calls = r.choices[0].message.tool_calls
    if not calls:
        raise AssertionError(f"no tool call (finish_reason {r.choices[0].finish_reason})")
    return f"{calls[0].function.name}: {forecast_of(calls[0].function.arguments).place.city!r}"


# ---- llm -------------------------------------------------------------------------------------


def llm_model(ctx: Ctx):
    """llm's model for the server, from an extra-openai-models.yaml in a fresh LLM_USER_PATH."""
    home = Path(tempfile.mkdtemp(prefix="llm-checks-"))
    (home / "extra-openai-models.yaml").write_text(
        f"- model_id: mlxctl\n  model_name: {ctx.model}\n  api_base: {ctx.v1}\n  supports_schema: true\n")
    os.environ["LLM_USER_PATH"] = str(home)
    os.environ.setdefault("OPENAI_API_KEY", "checks")
    import llm
    return llm.get_model("mlxctl")


@check("llm", "prompt")
def llm_prompt(ctx: Ctx) -> str:
    return nonempty(llm_model(ctx).prompt("Hi", stream=False, max_tokens=SHORT).text())


@check("llm", "prompt stream")
def llm_stream(ctx: Ctx) -> str:
    return nonempty("".join(llm_model(ctx).prompt("Hi", max_tokens=SHORT)))


@check("llm", "schema")
def llm_schema(ctx: Ctx) -> str:
    text = llm_model(ctx).prompt(ASK, schema=Answer, stream=False, max_tokens=CALL).text()
    return f"unit={Answer.model_validate_json(text).unit.value}"


# ---- running ---------------------------------------------------------------------------------


def version_of(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def reason_of(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text[:300]


def run_check(ctx: Ctx, dist: str, name: str, fn: Callable, verbose: bool) -> dict:
    row = {"framework": dist, "version": version_of(dist), "check": name}
    try:
        with contextlib.redirect_stdout(sys.stderr):  # what a framework prints stays out of --json
            return {**row, "result": "pass", "reason": str(fn(ctx))}
    except Exception as exc:  # noqa: BLE001 - every failure is a row of the table
        if verbose:
            traceback.print_exc()
        return {**row, "result": "fail", "reason": reason_of(exc)}


def run_all(ctx: Ctx, only: set[str] | None, named: str, verbose: bool) -> list[dict]:
    rows, missing = [], set()
    for dist, name, fn in CHECKS:
        if (only and dist not in only) or named.lower() not in name.lower():
            continue
        if version_of(dist) is None:
            if dist not in missing:
                missing.add(dist)
                rows.append({"framework": dist, "version": None, "check": "*", "result": "skip",
                             "reason": "not installed"})
            continue
        rows.append(run_check(ctx, dist, name, fn, verbose))
        print(f"{rows[-1]['result']:4}  {dist} / {name}", file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict]) -> str:
    cols = ["framework", "version", "check", "result", "reason"]
    cells = [[str(row[c] or "-") for c in cols] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in cells]
    passed = sum(row["result"] == "pass" for row in rows)
    ran = sum(row["result"] != "skip" for row in rows)
    return "\n".join(lines + [f"{passed} of {ran} checks passed"])


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--url", required=True, help="the server's base URL, e.g. http://127.0.0.1:8093")
    p.add_argument("--model", default="smollm2-135m", help="the model name to send")
    p.add_argument("--only", default="", help="comma-separated distributions to check (default all)")
    p.add_argument("--check", default="", help="only the checks whose name contains this text")
    p.add_argument("--list", action="store_true", help="list the checks and exit")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--verbose", action="store_true", help="print each failure's traceback on stderr")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.list:
        print("\n".join(f"{dist} / {name}" for dist, name, _ in CHECKS))
        return 0
    only = {d.strip() for d in args.only.split(",") if d.strip()} or None
    unknown = (only or set()) - {dist for dist, _, _ in CHECKS}
    if unknown:
        print(f"framework_checks: unknown --only name(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    rows = run_all(Ctx(args.url, args.model), only, args.check, args.verbose)
    print(json.dumps(rows, indent=2) if args.json else table(rows))
    return 1 if any(row["result"] == "fail" for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
