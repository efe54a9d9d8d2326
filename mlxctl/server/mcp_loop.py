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
import json
import logging
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from aiohttp import web

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
    mcp_names = {t["function"]["name"] for t in mcp}
    for tool in client:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and fn.get("name") in mcp_names:
            raise BadInputError(f"the tool {fn['name']!r} is given by the request and by an MCP server; rename it")
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

    Each round's answer comes in as an OpenAI chat ``choice`` dict (``message`` with optional
    ``tool_calls``, and ``finish_reason``); :meth:`after` says which MCP calls to run (none: the
    loop is over), :meth:`ran` records their results and says whether to generate again. When
    the loop ends the choice is left as the client should see it: MCP calls that were run or
    that will not be run are taken out of ``tool_calls`` (the client's own calls stay).
    ``added`` holds the messages the loop appended to the conversation, as OpenAI request
    messages (the assistant's calls, then one ``tool`` message per result).
    """

    def __init__(self, mcp_names: set[str], max_rounds: int = DEFAULT_MAX_ROUNDS, *,
                 servers: Any = (), client_names: Any = ()):
        self.added: list[dict] = []
        self.mcp_names = set(mcp_names)
        self.servers = set(servers)  # configured MCP server names: "<server>__..." calls go to the hub
        self.client_names = set(client_names)
        self.max_rounds = max(1, max_rounds)
        self.rounds = 0  # generations so far
        self.tool_rounds = 0  # of them, those whose MCP calls were run
        self.calls: list[McpCall] = []
        self.note: str | None = None

    def tool_choice(self, requested: Any) -> Any:
        """The request's tool_choice in the first round; a forced one becomes "auto" after it."""
        if self.rounds == 0 or requested in (None, "none", "auto"):
            return requested
        return "auto"

    def after(self, choice: dict) -> list[dict]:
        """A round's answer: the MCP calls to run now ([] when the loop is over)."""
        self.rounds += 1
        mcp, client = self._partition(choice)
        if not mcp:
            return []
        cut = choice.get("finish_reason") == "length"
        if cut or self.tool_rounds >= self.max_rounds:
            why = ("the answer reached max_tokens" if cut
                   else f"the MCP tool loop reached its limit of {self.max_rounds} round(s) of tool calls")
            called = ", ".join(c["function"]["name"] for c in mcp)
            self.note = f"stopped: {why}; the model's last MCP calls were not run ({called})"
            _keep_calls(choice, client, "tool_calls" if client else "length")
            return []
        return mcp

    def ran(self, choice: dict, calls: list[dict], results: list[Any]) -> bool:
        """Record the results of :meth:`after`'s calls; True to generate again."""
        self.tool_rounds += 1
        for call, result in zip(calls, results, strict=True):
            fn = call["function"]
            self.calls.append(McpCall(call["id"], self.rounds, fn["name"], fn["arguments"], result))
        _, client = self._partition(choice)
        if client:  # the client runs its own calls; the MCP calls of this turn are done
            _keep_calls(choice, client, "tool_calls")
            return False
        message = choice["message"]
        assistant: dict[str, Any] = {
            "role": "assistant", "content": message.get("content") or None,
            "tool_calls": [{"id": c["id"], "type": "function",
                            "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}}
                           for c in calls],
        }
        if message.get("reasoning_content"):
            assistant["reasoning_content"] = message["reasoning_content"]
        self.added.append(assistant)
        for call, result in zip(calls, results, strict=True):
            self.added.append({"role": "tool", "tool_call_id": call["id"], "content": result.text})
        return True

    def outgrown(self, choice: dict | None, error: BaseException) -> bool:
        """Whether ``error``, refusing the next round, ends the loop rather than the request: the
        results of ``choice``'s calls (the round before) grew the prompt past what the context
        holds with the request's max_tokens. ``choice`` is then the answer, its MCP calls taken
        out, with finish_reason "length" and the note saying why (the calls ran: mcp_calls)."""
        overflow = error if isinstance(error, ContextOverflowError) else error.__cause__
        if self.rounds == 0 or choice is None or not isinstance(overflow, ContextOverflowError):
            return False
        called = ", ".join(c["function"]["name"] for c in choice["message"].get("tool_calls") or ())
        self.note = (f"stopped: the prompt of round {self.rounds + 1} no longer fits: {overflow.message}; "
                     f"the results of the model's last MCP calls ({called}) were not given to it")
        _keep_calls(choice, [], "length")
        return True

    def round_body(self, body: Any, tools: list[Any]) -> Any:
        """The chat request of the next round: the conversation so far, every tool, this round's
        tool_choice (``body`` is the client's ChatCompletionRequest)."""
        from mlxctl.api.openai_models import ChatMessage

        messages = [*body.messages, *(ChatMessage.model_validate(m) for m in self.added)]
        return body.model_copy(update={"messages": messages, "tools": tools or None, "mcp": None,
                                       "tool_choice": self.tool_choice(body.tool_choice)})

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

    def _partition(self, choice: dict) -> tuple[list[dict], list[dict]]:
        calls = choice["message"].get("tool_calls") or []
        mcp = [c for c in calls if self.is_mcp(c["function"]["name"])]
        return mcp, [c for c in calls if not self.is_mcp(c["function"]["name"])]


def _keep_calls(choice: dict, client: list[dict], finish_reason: str) -> None:
    message = choice["message"]
    if client:
        message["tool_calls"] = client
    else:
        message.pop("tool_calls", None)
    choice["finish_reason"] = finish_reason


# ---- the server's driver ---------------------------------------------------------------------


async def chat_with_mcp(request: web.Request, body: Any, tokenizer: Any, images: Any = (),
                        image_token: str | None = None) -> web.Response:
    """POST /v1/chat/completions with the MCP loop (non-streamed, one choice). The client's
    images (and video frames) go with every round: they stand in its messages, which every
    round's prompt starts with (so the prefix cache serves them after the first round)."""
    from mlxctl.api.chat_plan import openai_tools
    from mlxctl.api.openai_output import total_usage, usage_body
    from mlxctl.server.errors import ApiError
    from mlxctl.server.keys import SETTINGS
    from mlxctl.server.served_model import model_formats

    settings = request.app[SETTINGS]
    service = _checked_service(request, body)
    client_tools, patterns = split_tools(body.tools, body.mcp)
    hub = await service.ready()
    mcp_tools = offered_tools(hub.tools(), patterns)
    tools = merged_tools(client_tools, mcp_tools)
    rounds = _ServerRounds(request, tokenizer, model_formats(request), images, image_token)
    loop = ToolLoop({t["function"]["name"] for t in mcp_tools}, settings.mcp_max_rounds, servers=hub.config.servers,
                    client_names={t["function"]["name"] for t in openai_tools(client_tools)})
    response: dict = {}
    choice: dict | None = None
    try:
        async with asyncio.timeout(settings.request_timeout_s):
            while True:
                if service.closed:  # shutting down: the hub is gone, so no round can call tools
                    raise ApiError(503, "the server is shutting down", headers={"Retry-After": "5"})
                try:
                    response = await rounds.run(loop.round_body(body, tools))
                except ApiError as err:
                    if loop.outgrown(choice, err):
                        break
                    raise
                choice = response["choices"][0]
                calls = loop.after(choice)
                if not calls or not loop.ran(choice, calls, await _call_all(hub, calls)):
                    break
    except TimeoutError as exc:
        raise ApiError(504, "the request took longer than the server's request timeout") from exc
    response["usage"] = usage_body(total_usage(rounds.usages, 1))
    return web.json_response({**response, **loop.extension()})


def _checked_service(request: web.Request, body: Any) -> Any:
    """The app's MCP service, for a request the loop can answer (a 400 naming why otherwise)."""
    from mlxctl.server.errors import ApiError

    service = mcp_service(request.app)
    if service is None:
        raise ApiError(400, "this server has no MCP tools: start it with --mcp-config FILE to use the MCP "
                            "tool loop", param="mcp", code="mcp_not_configured")
    if body.stream:
        raise ApiError(400, "the MCP tool loop answers whole responses only: send stream=false with mcp",
                       param="stream")
    if body.n != 1:
        raise ApiError(400, "the MCP tool loop generates one choice: n must be 1", param="n")
    return service


class _ServerRounds:
    """One round of the server's loop: the round's chat request through the engine, answered
    as a whole OpenAI response; the rounds' usages are kept for the total."""

    def __init__(self, request: web.Request, tokenizer: Any, formats: Any, images: Any, image_token: str | None):
        self.request, self.tokenizer, self.formats = request, tokenizer, formats
        self.images, self.image_token = images, image_token
        self.usages: list[Any] = []

    async def run(self, round_body: Any) -> dict:
        from contextlib import AsyncExitStack

        from mlxctl.api.openai_output import ChatOutput
        from mlxctl.api.openai_pieces import whole
        from mlxctl.api.openai_translate import chat_jobs
        from mlxctl.server.served_model import sampling_defaults
        from mlxctl.server.streaming import open_generations

        jobs, plan = chat_jobs(round_body, self.tokenizer, self.formats, images=self.images,
                               image_token=self.image_token, defaults=sampling_defaults(self.request))
        async with AsyncExitStack() as stack:
            (stream,) = await open_generations(self.request, stack, jobs)
            completion = await stream.collect_async()
        self.usages.append(completion.usage)
        output = ChatOutput(round_body.model, self.tokenizer, False, plan, jobs[0].reasoning_open)
        return output.response([whole(completion)], completion.usage)


async def _call_all(hub: Any, calls: list[dict]) -> list[Any]:
    """Run a round's calls on their MCP servers at once, each logged."""
    results = await asyncio.gather(*(hub.call(c["function"]["name"], c["function"]["arguments"]) for c in calls))
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
    from mlxctl.api.openai_models import ChatCompletionRequest
    from mlxctl.api.prompt import chat_messages
    from mlxctl.generation import with_image_marks
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
        body = ChatCompletionRequest(model=engine.model.name,
                                     messages=chat_messages(with_image_marks(engine, spec), spec.system),
                                     tool_choice=cli_tool_choice(tool_choice))
        rounds = _CliRounds(engine, params, spec.images)
        choice: dict | None = None
        while True:
            try:
                choice = rounds.run(loop.round_body(body, tools))
            except ContextOverflowError as err:
                if loop.outgrown(choice, err):
                    break
                raise
            if verbose:
                out.message(f"mcp: round {loop.rounds + 1}: {rounds.stats}")
            calls = loop.after(choice)
            if not calls:
                break
            results = [hub.call(c["function"]["name"], c["function"]["arguments"]) for c in calls]
            for call, result in zip(calls, results, strict=True):
                out.message(_report(call, result))
            if not loop.ran(choice, calls, results):
                break
    _print_answer(out, engine.model.name, loop, choice, rounds.usages)


def _quiet_hub_log() -> None:
    """The hub's warnings reach the user once, through ``out``: not also through logging."""
    hub_log = logging.getLogger("mlxctl.mcp")
    if not hub_log.handlers:
        hub_log.addHandler(logging.NullHandler())


class _CliRounds:
    """One round of ``run``'s loop: the round's chat request through the in-process engine with
    run's sampling, answered as the OpenAI choice the server would give."""

    def __init__(self, engine: Any, params: Any, images: Any):
        from mlxctl.api.chat_plan import ModelFormats

        self.engine, self.params, self.images = engine, params, images
        self.formats = ModelFormats.detect(engine.model.tokenizer)
        self.usages: list[Any] = []
        self.stats = ""

    def run(self, round_body: Any) -> dict:
        import dataclasses

        from mlxctl.api.openai_output import ChatOutput
        from mlxctl.api.openai_pieces import whole
        from mlxctl.api.openai_translate import chat_jobs
        from mlxctl.engine.stats_line import stats_line

        tokenizer = self.engine.model.tokenizer
        jobs, plan = chat_jobs(round_body, tokenizer, self.formats)
        job = jobs[0]
        stream = self.engine.submit(job.tokens, dataclasses.replace(self.params, constraint=job.params.constraint),
                                    images=self.images)
        try:
            done = stream.collect()
        except KeyboardInterrupt:
            stream.abort()
            raise
        self.usages.append(done.usage)
        self.stats = stats_line(done)
        output = ChatOutput(self.engine.model.name, tokenizer, False, plan, job.reasoning_open)
        return output.response([whole(done)], done.usage)["choices"][0]


def _print_answer(out: Any, model: str, loop: ToolLoop, choice: dict, usages: list[Any]) -> None:
    """The last round's answer: text on stdout (or one JSON object), notes on stderr."""
    from mlxctl.api.openai_output import total_usage

    message = choice["message"]
    text = message.get("content") or ""
    if loop.note:
        out.warn(loop.note)
    if out.is_json:
        usage = total_usage(usages, 1)
        result = {"model": model, "text": text, "finish_reason": choice["finish_reason"],
                  "usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                            "total_tokens": usage.total_tokens}, **loop.extension()}
        if message.get("tool_calls"):
            result["tool_calls"] = message["tool_calls"]
        out.data(result)
        return
    for call in message.get("tool_calls") or ():  # calls of tools no MCP server offers
        out.message(f"mcp: the model called {call['function']['name']}, which no MCP server offers")
    out.text(text if text.endswith("\n") else text + "\n")


def _report(call: dict, result: Any) -> str:
    text = " ".join(result.text.split())
    if len(text) > _REPORT_CHARS:
        text = text[:_REPORT_CHARS] + "..."
    try:
        arguments = json.dumps(json.loads(call["function"]["arguments"] or "{}"), ensure_ascii=False)
    except json.JSONDecodeError:
        arguments = call["function"]["arguments"]
    outcome = f"error: {text}" if result.is_error else text
    return f"mcp: {call['function']['name']} {arguments} -> {outcome} ({result.duration_s:.2f}s)"
