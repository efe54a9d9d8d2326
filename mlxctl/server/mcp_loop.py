"""The MCP tool loop: chat completions whose tool calls run on the configured MCP servers.

``serve --mcp-config FILE`` keeps an :class:`~mlxctl.mcp.McpHub` for the app (:class:`McpService`:
started in the background once the model is loaded, closed at shutdown). A chat completion opts
in with ``"mcp": true`` or a ``{"type": "mcp"}`` entry in ``tools`` (which may narrow the tools
with ``allowed_tools``). The hub's tools are then offered next to the client's own, and each
round is one generation: when the model calls MCP tools the hub runs them (allow-lists, argument
checks, timeouts and the audit log are the hub's), the assistant's calls and the ``tool`` results
are appended to the conversation, and the model generates again. The loop ends when a round
calls no MCP tool, when it calls one of the client's tools (those come back as ordinary
``tool_calls``), when a round would call MCP tools after ``mcp_max_rounds`` rounds of calls
(those calls are not run; finish_reason "length" and ``mcp_note`` say so), or when the results
grew the conversation past what the context holds with the request's max_tokens (the round
before is the answer; finish_reason "length" and ``mcp_note`` say so). A forced
``tool_choice`` applies to the first round only; later rounds use ``auto``. The calls that ran
are listed in the response's ``mcp_calls``. See docs/mcp.md.

:class:`ToolLoop` is the bookkeeping both drivers share: :func:`chat_with_mcp` (the server,
async) and :func:`run_with_mcp` (``mlxctl run --mcp-config``, blocking).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from aiohttp import web

from mlxctl.api.chat_request import ChatRequest
from mlxctl.api.chat_round import RoundResult, assistant_turn
from mlxctl.api.toolcalls import ToolCall
from mlxctl.errors import BadInputError, ContextOverflowError, MlxctlError
from mlxctl.mcp.hub import SEPARATOR

log = logging.getLogger("mlxctl.server")

MCP_TOOL_TYPE = "mcp"
MCP_TOOL_KEYS = frozenset({"type", "allowed_tools"})
DEFAULT_MAX_ROUNDS = 8
_REPORT_CHARS = 200  # of a result, in `run`'s stderr report


# ---- the hub of one app ----------------------------------------------------------------------


class McpService:
    """The app's MCP hub and its start, which runs in the background (servers may take a while)."""

    def __init__(self, config_path: str, audit_log: str | None = None):
        self.config_path = config_path
        self.audit_log = audit_log
        self.hub: Any = None  # mlxctl.mcp.McpHub once built
        self.error: str | None = None
        self.closed = False
        self._task: asyncio.Task | None = None

    @property
    def state(self) -> str:
        if self.closed:
            return "closed"
        if self.error is not None:
            return "failed"
        if self._task is None or not self._task.done():
            return "starting"
        return "ready"

    def begin(self) -> None:
        if self._task is None and not self.closed:
            self._task = asyncio.ensure_future(self._start())

    async def _start(self) -> None:
        from mlxctl.mcp import McpHub

        try:
            self.hub = McpHub(self.config_path, audit_log=self.audit_log)
            await self.hub.start()
        except MlxctlError as err:  # the config changed under us, or the mcp SDK is missing
            self.error = f"{err.message} ({err.hint})" if err.hint else err.message
        except Exception as exc:  # noqa: BLE001 - reported to requests and the log, never raised
            self.error = f"{type(exc).__name__}: {exc}"
        if self.error is not None:
            log.error("MCP: the hub could not start: %s", self.error)
            return
        names, failed = self.hub.tool_names(), sorted(self.hub.errors)  # the hub logs why each failed
        log.log(logging.WARNING if failed else logging.INFO, "MCP: %d tool(s) available: %s%s", len(names),
                ", ".join(names) or "none", f"; server(s) that failed: {', '.join(failed)}" if failed else "")

    async def ready(self) -> Any:
        """The started hub (waiting for its start if need be); 503 when it could not start."""
        from mlxctl.server.errors import ApiError

        self.begin()
        if self._task is not None:
            await asyncio.shield(self._task)
        if self.closed:
            raise ApiError(503, "the MCP hub is closed: the server is shutting down")
        if self.error is not None or self.hub is None:
            raise ApiError(503, f"the MCP hub is not available: {self.error or 'not started'}")
        return self.hub

    async def close(self) -> None:
        """Stop the start if it still runs and disconnect every server (stdio servers exit)."""
        if self.closed:
            return
        self.closed = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self.hub is not None:
            await self.hub.close()


def mcp_service(app: web.Application) -> McpService | None:
    """The app's MCP service (created and started on first use); None without --mcp-config."""
    from mlxctl.server.keys import SETTINGS, STATE

    settings, state = app[SETTINGS], app[STATE]
    if not settings.mcp_config:
        return None
    if state.mcp is None:
        state.mcp = McpService(settings.mcp_config, settings.mcp_audit_log)
    state.mcp.begin()
    return state.mcp


def start_mcp(app: web.Application) -> None:
    """Connect to the MCP servers in the background (lifecycle: once the model is loaded)."""
    mcp_service(app)


async def close_mcp(app: web.Application) -> None:
    """Disconnect the MCP servers (lifecycle: after draining; also the app's on_cleanup)."""
    from mlxctl.server.keys import STATE

    service = app[STATE].mcp
    if service is not None:
        await service.close()


# ---- what a request asks for ---------------------------------------------------------------


def wants_mcp(body: Any) -> bool:
    """Whether a chat request opts in: ``"mcp": true`` or a ``{"type": "mcp"}`` tools entry."""
    return body.mcp is True or any(_is_mcp_tool(t) for t in body.tools or ())


def _is_mcp_tool(tool: Any) -> bool:
    return isinstance(tool, dict) and tool.get("type") == MCP_TOOL_TYPE


def split_tools(tools: list[Any] | None, mcp_flag: bool | None = None) -> tuple[list[Any], list[str] | None]:
    """The client's own tools, and the ``allowed_tools`` patterns of ``{"type": "mcp"}`` entries
    (None: every MCP tool)."""
    client: list[Any] = []
    patterns: list[str] | None = None
    for i, tool in enumerate(tools or ()):
        if not _is_mcp_tool(tool):
            client.append(tool)
            continue
        if mcp_flag is False:
            raise BadInputError(f'tools[{i}] is an MCP tool, but the request says "mcp": false')
        unknown = sorted(set(tool) - MCP_TOOL_KEYS)
        if unknown:
            raise BadInputError(f"tools[{i}].{unknown[0]}: unknown key (an MCP entry takes type and allowed_tools)")
        allowed = tool.get("allowed_tools")
        if allowed is None:
            continue
        if not isinstance(allowed, list) or not all(isinstance(p, str) and p for p in allowed):
            raise BadInputError(f"tools[{i}].allowed_tools must be a list of tool names or patterns")
        patterns = [*(patterns or []), *allowed]
    return client, patterns


def offered_tools(hub_tools: list[dict], patterns: list[str] | None = None) -> list[dict]:
    """The hub's tools a request may use, in OpenAI's shape; tools whose name or schema a chat
    request could not carry are left out (and logged)."""
    from mlxctl.api.chat_plan import openai_tools

    names = [t["function"]["name"] for t in hub_tools]
    for pattern in patterns or ():
        if not any(fnmatchcase(name, pattern) for name in names):
            raise BadInputError(f"allowed_tools: {pattern!r} matches no available MCP tool "
                                f"(available: {', '.join(names) or 'none'})")
    out = []
    for tool in hub_tools:
        name = tool["function"]["name"]
        if patterns is not None and not any(fnmatchcase(name, p) for p in patterns):
            continue
        try:
            out.extend(openai_tools([tool]))
        except BadInputError as err:
            log.warning("MCP tool %s is not offered to the model: %s", name, err.message)
    return out


def merged_tools(client: list[Any], mcp: list[dict]) -> list[Any]:
    from mlxctl.api.chat_plan import openai_tools

    check_no_clash({t["function"]["name"] for t in openai_tools(client)}, mcp)
    return [*client, *mcp]


# ---- the loop's bookkeeping -----------------------------------------------------------------


@dataclass
class McpCall:
    """One MCP call the loop ran."""

    id: str
    round: int
    name: str
    arguments: str  # the JSON text the model wrote
    result: Any  # mlxctl.mcp.ToolResult

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "round": self.round, "name": self.name, "server": self.result.server,
                "tool": self.result.tool, "arguments": self.arguments, "result": self.result.text,
                "is_error": self.result.is_error, "duration_s": self.result.duration_s}


class ToolLoop:
    """Rounds of one conversation: which calls to run, the messages they add, when to stop.

    Each round's answer comes in as a :class:`~mlxctl.api.chat_round.RoundResult` (whatever the
    protocol); :meth:`after` says which MCP calls to run (none: the loop is over), :meth:`ran`
    records their results and says whether to generate again. When the loop ends the round is
    left as the client should see it: MCP calls that were run or that will not be run are taken
    out of its ``calls`` (the client's own calls stay). ``added`` holds the messages the loop
    appended to the conversation, as chat-template messages (the assistant's calls, then one
    ``tool`` message per result); ``history`` every round so far.
    """

    def __init__(self, mcp_names: set[str], max_rounds: int = DEFAULT_MAX_ROUNDS, *,
                 servers: Any = (), client_names: Any = ()):
        self.added: list[dict] = []
        self.history: list[RoundResult] = []
        self.mcp_names = set(mcp_names)
        self.servers = set(servers)  # configured MCP server names: "<server>__..." calls go to the hub
        self.client_names = set(client_names)
        self.max_rounds = max(1, max_rounds)
        self.rounds = 0  # generations so far
        self.tool_rounds = 0  # of them, those whose MCP calls were run
        self.calls: list[McpCall] = []
        self.note: str | None = None

    def round_chat(self, first: ChatRequest, later: ChatRequest) -> ChatRequest:
        """The next round's chat: ``first`` (the client's, its tool_choice as asked) in the first
        round, then ``later`` (a forced tool_choice made "auto") with the loop's messages appended."""
        if self.rounds == 0:
            return first
        return dataclasses.replace(later, messages=[*later.messages, *self.added], prefill="")

    def after(self, result: RoundResult) -> list[ToolCall]:
        """A round's answer: the MCP calls to run now ([] when the loop is over)."""
        self.rounds += 1
        self.history.append(result)
        mcp, client = self._partition(result)
        if not mcp:
            return []
        cut = result.finish == "length"
        if cut or self.tool_rounds >= self.max_rounds:
            why = ("the answer reached max_tokens" if cut
                   else f"the MCP tool loop reached its limit of {self.max_rounds} round(s) of tool calls")
            called = ", ".join(c.name for c in mcp)
            self.note = f"stopped: {why}; the model's last MCP calls were not run ({called})"
            _keep_calls(result, client, "tool_calls" if client else "length")
            return []
        return mcp

    def ran(self, result: RoundResult, calls: list[ToolCall], results: list[Any]) -> bool:
        """Record the results of :meth:`after`'s calls; True to generate again."""
        self.tool_rounds += 1
        ran = [McpCall(c.id, self.rounds, c.name, c.arguments, r) for c, r in zip(calls, results, strict=True)]
        self.calls += ran
        result.ran = ran
        _, client = self._partition(result)
        if client:  # the client runs its own calls; the MCP calls of this turn are done
            _keep_calls(result, client, "tool_calls")
            return False
        self.added.append(assistant_turn(result, calls))
        self.added += [{"role": "tool", "tool_call_id": c.id, "content": r.text} for c, r in zip(calls, results)]
        _keep_calls(result, [], "stop")
        return True

    def outgrown(self, result: RoundResult | None, error: BaseException) -> bool:
        """Whether ``error``, refusing the next round, ends the loop rather than the request: the
        results of ``result``'s calls (the round before) grew the prompt past what the context
        holds with the request's max_tokens. ``result`` is then the answer, its MCP calls taken
        out, with finish "length" and the note saying why (the calls ran: mcp_calls)."""
        overflow = error if isinstance(error, ContextOverflowError) else error.__cause__
        if self.rounds == 0 or result is None or not isinstance(overflow, ContextOverflowError):
            return False
        called = ", ".join(c.name for c in result.ran)
        self.note = (f"stopped: the prompt of round {self.rounds + 1} no longer fits: {overflow.message}; "
                     f"the results of the model's last MCP calls ({called}) were not given to it")
        _keep_calls(result, [], "length")
        return True

    def extension(self) -> dict[str, Any]:
        """The response's extension fields: mcp_calls, mcp_rounds and (if it stopped early) mcp_note."""
        out: dict[str, Any] = {"mcp_calls": [c.as_json() for c in self.calls], "mcp_rounds": self.rounds}
        if self.note is not None:
            out["mcp_note"] = self.note
        return out

    def is_mcp(self, name: str) -> bool:
        """Offered MCP tools, and names of a configured server's tools that were not offered (denied
        or unknown: the hub answers them with an error the model can read); client tools win."""
        if name in self.mcp_names:
            return True
        server, sep, _ = name.partition(SEPARATOR)
        return bool(sep) and server in self.servers and name not in self.client_names

    def _partition(self, result: RoundResult) -> tuple[list[ToolCall], list[ToolCall]]:
        mcp = [c for c in result.calls if self.is_mcp(c.name)]
        return mcp, [c for c in result.calls if not self.is_mcp(c.name)]


def _keep_calls(result: RoundResult, client: list[ToolCall], finish: str) -> None:
    result.calls = client
    result.finish = finish


# ---- the server's driver ---------------------------------------------------------------------


@dataclass
class McpTools:
    """A request's MCP tools: the app's service and started hub, and the tools offered (OpenAI shape)."""

    service: McpService
    hub: Any
    offered: list[dict] = dataclasses.field(default_factory=list)

    def offer(self, patterns: list[str] | None) -> None:
        """Offer the hub's tools that match ``patterns`` (None: all of them)."""
        self.offered = offered_tools(self.hub.tools(), patterns)

    def loop(self, request: web.Request, client_names: Any = ()) -> ToolLoop:
        from mlxctl.server.keys import SETTINGS

        return ToolLoop({t["function"]["name"] for t in self.offered}, request.app[SETTINGS].mcp_max_rounds,
                        servers=self.hub.config.servers, client_names=client_names)


async def mcp_tools(request: web.Request, param: str) -> McpTools:
    """The app's started MCP hub for a request that opted in (``param``: the field it opted in
    with, named by the 400 when the server has no --mcp-config); nothing offered yet."""
    from mlxctl.server.errors import ApiError

    service = mcp_service(request.app)
    if service is None:
        raise ApiError(400, "this server has no MCP tools: start it with --mcp-config FILE to use the MCP "
                            "tool loop", param=param, code="mcp_not_configured")
    return McpTools(service, await service.ready())


def check_no_clash(client_names: Any, offered: list[dict]) -> None:
    """A client tool may not have an MCP tool's name."""
    for tool in offered:
        if tool["function"]["name"] in set(client_names):
            raise BadInputError(f"the tool {tool['function']['name']!r} is given by the request and by an MCP server; "
                                "rename it")


def later_choice(choice: Any) -> Any:
    """An OpenAI / Responses tool_choice after the first round: a forced one becomes "auto"."""
    return choice if choice in (None, "none", "auto") else "auto"


class ServerRounds:
    """The rounds of one request through the engine, each prepared with ``prepare_chat``, split
    with its splitter and read as a :class:`RoundResult`; the rounds' usages are kept for the total."""

    def __init__(self, request: web.Request, tokenizer: Any, formats: Any):
        self.request, self.tokenizer, self.formats = request, tokenizer, formats
        self.usages: list[Any] = []

    async def whole(self, chat: ChatRequest) -> RoundResult:
        from mlxctl.api.chat_request import prepare_chat
        from mlxctl.server.generate import generation

        prepared = prepare_chat(self.tokenizer, self.formats, chat)
        async with generation(self.request, prepared.tokens, prepared.params, prepared.cache_salt,
                              prepared.images) as stream:
            done = await stream.collect_async()
        self.usages.append(done.usage)
        return RoundResult.of(prepared.splitter().whole(done.text), done.finish_reason, done.stop_string,
                              done.usage, done.logprobs)

    def usage(self) -> Any:
        from mlxctl.api.openai_output import total_usage

        return total_usage(self.usages, 1)


async def drive(mcp: McpTools, loop: ToolLoop, first: ChatRequest, later: ChatRequest, run_round: Any,
                call_tools: Any = None, announce: Any = None) -> RoundResult:
    """The rounds until the loop ends; the answer. ``run_round(chat)`` generates one round;
    ``call_tools(calls)`` runs MCP calls (default: on the hub at once); ``announce(result)``
    follows each round whose MCP calls ran."""
    from mlxctl.server.errors import ApiError

    result: RoundResult | None = None
    while True:
        if mcp.service.closed:  # shutting down: the hub is gone, so no round can call tools
            raise ApiError(503, "the server is shutting down", headers={"Retry-After": "5"})
        try:
            current = await run_round(loop.round_chat(first, later))
        except (ApiError, MlxctlError) as err:
            if loop.outgrown(result, err):
                return result
            raise
        result = current
        calls = loop.after(result)
        if not calls:
            return result
        again = loop.ran(result, calls, await (call_tools or (lambda c: call_all(mcp.hub, c)))(calls))
        if announce is not None:
            await announce(result)
        if not again:
            return result


async def answer_with_mcp(request: web.Request, mcp: McpTools, loop: ToolLoop, first: ChatRequest,
                          later: ChatRequest, rounds: ServerRounds) -> RoundResult:
    """The non-streamed loop, within the server's request timeout."""
    from mlxctl.server.errors import ApiError
    from mlxctl.server.keys import SETTINGS

    try:
        async with asyncio.timeout(request.app[SETTINGS].request_timeout_s):
            return await drive(mcp, loop, first, later, rounds.whole)
    except TimeoutError as exc:
        raise ApiError(504, "the request took longer than the server's request timeout") from exc


async def call_all(hub: Any, calls: list[ToolCall]) -> list[Any]:
    """Run a round's calls on their MCP servers at once, each logged."""
    results = await asyncio.gather(*(hub.call(c.name, c.arguments) for c in calls))
    for result in results:
        log.info("MCP call %s: %s in %.3fs", result.name, "error" if result.is_error else "ok", result.duration_s)
    return results


# ---- `mlxctl run --mcp-config` ---------------------------------------------------------------


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
