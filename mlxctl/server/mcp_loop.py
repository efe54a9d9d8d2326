"""The server's driver of the MCP tool loop: a request's rounds through the engine, its calls on
the app's hub (:mod:`mlxctl.server.mcp_service`), the bookkeeping :class:`~mlxctl.api.tool_loop.ToolLoop`'s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from mlxctl.api.chat_request import ChatRequest
from mlxctl.api.chat_round import RoundResult
from mlxctl.api.tool_loop import ToolLoop, offered_tools
from mlxctl.api.toolcalls import ToolCall
from mlxctl.errors import MlxctlError
from mlxctl.server.mcp_service import McpService, mcp_service

log = logging.getLogger("mlxctl.server")


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


class ServerRounds:
    """The rounds of one request through the engine, each prepared with ``prepare_chat``, split
    with its splitter and read as a :class:`RoundResult`; the rounds' usages are kept for the total."""

    def __init__(self, request: web.Request, tokenizer: Any, formats: Any):
        self.request, self.tokenizer, self.formats = request, tokenizer, formats
        self.usages: list[Any] = []

    async def whole(self, chat: ChatRequest) -> RoundResult:
        from mlxctl.api.chat_request import prepare_chat
        from mlxctl.server.generate import generation
        from mlxctl.server.prompt_work import off_loop

        prepared = await off_loop(prepare_chat, self.tokenizer, self.formats, chat)
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
