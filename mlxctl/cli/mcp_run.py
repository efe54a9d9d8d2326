"""``mlxctl run --mcp-config``: the MCP tool loop in this process, the final answer on stdout and
every call with its result on stderr (the bookkeeping is :class:`~mlxctl.api.tool_loop.ToolLoop`'s)."""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

from mlxctl.api.chat_request import ChatRequest
from mlxctl.api.chat_round import RoundResult
from mlxctl.api.tool_loop import DEFAULT_MAX_ROUNDS, ToolLoop, later_choice, offered_tools
from mlxctl.api.toolcalls import ToolCall
from mlxctl.errors import ContextOverflowError

_REPORT_CHARS = 200  # of a result, in `run`'s stderr report


def cli_tool_choice(value: str | None) -> Any:
    """``run --tool-choice``: auto, none, required, or a tool's name (forced in the first round)."""
    if value is None or value in ("auto", "none", "required"):
        return value
    return {"type": "function", "function": {"name": value}}


def run_with_mcp(out: Any, engine: Any, spec: Any, params: Any, *, config: Any, audit_log: str | None = None,
                 max_rounds: int = DEFAULT_MAX_ROUNDS, tool_choice: str | None = None,
                 verbose: bool = False) -> None:
    """``mlxctl run`` with MCP tools: the loop in this process, the final answer on stdout and
    every call with its result on stderr. ``spec``'s images go with every round."""
    from mlxctl.mcp import McpHubThread

    _quiet_hub_log()
    with McpHubThread(config, audit_log=audit_log) as hub:
        for name, problem in hub.errors.items():
            out.warn(f"MCP server {name}: {problem}")
        tools = offered_tools(hub.tools())
        names = [t["function"]["name"] for t in tools]
        if verbose:
            out.message(f"mcp: {len(names)} tool(s): {', '.join(names) or 'none'}")
        loop = ToolLoop(set(names), max_rounds, servers=hub.hub.config.servers)
        # The prompt and the tool-call constraint come from the same chat request the server
        # builds; the sampling is run's own.
        first, later = (_cli_chat(engine, spec, tools, choice)
                        for choice in (cli_tool_choice(tool_choice), later_choice(cli_tool_choice(tool_choice))))
        rounds = _CliRounds(engine, params)
        result: RoundResult | None = None
        while True:
            try:
                current = rounds.run(loop.round_chat(first, later))
            except ContextOverflowError as err:
                if loop.outgrown(result, err):
                    break
                raise
            result = current
            if verbose:
                out.message(f"mcp: round {loop.rounds + 1}: {rounds.stats}")
            calls = loop.after(result)
            if not calls:
                break
            results = [hub.call(c.name, c.arguments) for c in calls]
            for call, outcome in zip(calls, results, strict=True):
                out.message(_report(call, outcome))
            if not loop.ran(result, calls, results):
                break
    _print_answer(out, engine.model.name, loop, result, rounds.usages)


def _cli_chat(engine: Any, spec: Any, tools: list[dict], tool_choice: Any) -> ChatRequest:
    """``run``'s chat as the server would prepare it (its images go with every round)."""
    from mlxctl.api.chat_plan import ModelFormats
    from mlxctl.api.openai_models import ChatCompletionRequest
    from mlxctl.api.openai_translate import chat_request
    from mlxctl.api.prompt import chat_messages
    from mlxctl.generation import with_image_marks

    messages = chat_messages(with_image_marks(engine, spec), spec.system)
    body = ChatCompletionRequest(model=engine.model.name, messages=messages, tools=tools or None,
                                 tool_choice=tool_choice)
    chat = chat_request(body, ModelFormats.detect(engine.model.tokenizer))
    return dataclasses.replace(chat, images=tuple(spec.images or ()))


def _quiet_hub_log() -> None:
    """The hub's warnings reach the user once, through ``out``: not also through logging."""
    hub_log = logging.getLogger("mlxctl.mcp")
    if not hub_log.handlers:
        hub_log.addHandler(logging.NullHandler())


class _CliRounds:
    """One round of ``run``'s loop: the round's chat through the in-process engine with run's
    sampling (the plan's constraint on it), read as the server reads a round."""

    def __init__(self, engine: Any, params: Any):
        from mlxctl.api.chat_plan import ModelFormats

        self.engine, self.params = engine, params
        self.formats = ModelFormats.detect(engine.model.tokenizer)
        self.usages: list[Any] = []
        self.stats = ""

    def run(self, chat: ChatRequest) -> RoundResult:
        from mlxctl.api.chat_request import prepare_chat
        from mlxctl.engine.stats_line import stats_line

        prepared = prepare_chat(self.engine.model.tokenizer, self.formats, chat)
        params = dataclasses.replace(self.params, constraint=prepared.params.constraint)
        stream = self.engine.submit(prepared.tokens, params, images=chat.images)
        try:
            done = stream.collect()
        except KeyboardInterrupt:
            stream.abort()
            raise
        self.usages.append(done.usage)
        self.stats = stats_line(done)
        return RoundResult.of(prepared.splitter().whole(done.text), done.finish_reason, done.stop_string, done.usage)


def _print_answer(out: Any, model: str, loop: ToolLoop, result: RoundResult, usages: list[Any]) -> None:
    """The last round's answer: text on stdout (or one JSON object), notes on stderr."""
    from mlxctl.api.openai_output import total_usage

    text = result.content or ""
    if loop.note:
        out.warn(loop.note)
    if out.is_json:
        usage = total_usage(usages, 1)
        doc = {"model": model, "text": text, "finish_reason": result.finish,
               "usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                         "total_tokens": usage.total_tokens}, **loop.extension()}
        if result.calls:
            doc["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}} for c in result.calls]
        out.data(doc)
        return
    for call in result.calls:  # calls of tools no MCP server offers
        out.message(f"mcp: the model called {call.name}, which no MCP server offers")
    out.text(text if text.endswith("\n") else text + "\n")


def _report(call: ToolCall, result: Any) -> str:
    text = " ".join(result.text.split())
    if len(text) > _REPORT_CHARS:
        text = text[:_REPORT_CHARS] + "..."
    try:
        arguments = json.dumps(json.loads(call.arguments or "{}"), ensure_ascii=False)
    except json.JSONDecodeError:
        arguments = call.arguments
    outcome = f"error: {text}" if result.is_error else text
    return f"mcp: {call.name} {arguments} -> {outcome} ({result.duration_s:.2f}s)"
