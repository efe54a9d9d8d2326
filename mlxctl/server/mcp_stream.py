"""The MCP tool loop, streamed: the rounds of server/mcp_loop.py through the one SSE lifecycle
of server/streaming.py. The stream opens once the engine took the first round (a refusal is
still a plain JSON error); each round's output streams as it is generated through the
protocol's encoder (its MCP calls left out); the calls that ran are announced once they have
run (keep-alives while they run); the answer ends the stream as the encoder ends it.

An encoder here is a protocol's stream encoder (views/openai_stream.py ``McpChatStream``,
views/anthropic.py ``MessagesStream``, views/responses.py ``ResponsesStream``) with
``begin_round(splitter, hidden, prompt_tokens)``, ``ran(calls)`` and
``finished(result, usage, extension)``.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from typing import Any

from aiohttp import web

from mlxctl.api.chat_request import ChatRequest, prepare_chat
from mlxctl.api.chat_round import RoundResult
from mlxctl.api.tool_loop import ToolLoop
from mlxctl.server.keys import SETTINGS
from mlxctl.server.mcp_loop import McpTools, ServerRounds, call_all, drive
from mlxctl.server.prompt_work import off_loop
from mlxctl.server.sse import SseResponse
from mlxctl.server.streaming import (
    StreamSession,
    kept_alive_while,
    open_generations,
    send_events,
    send_pieces,
    stream_lifecycle,
)


async def stream_with_mcp(request: web.Request, mcp: McpTools, loop: ToolLoop, first: ChatRequest,
                          later: ChatRequest, rounds: ServerRounds, encoder: Any) -> SseResponse:
    async def write(sse: StreamSession) -> None:
        async def run_round(chat: ChatRequest) -> RoundResult:
            return await _streamed_round(request, sse, rounds, chat, loop, encoder)

        async def call_tools(calls: list) -> list:
            return await kept_alive_while(request, sse.resp, encoder, call_all(mcp.hub, calls))

        async def announce(result: RoundResult) -> None:
            await send_events(sse.resp, encoder.ran(result.ran))

        async with asyncio.timeout(request.app[SETTINGS].request_timeout_s):
            final = await drive(mcp, loop, first, later, run_round, call_tools, announce)
        await send_events(sse.resp, encoder.finished(final, rounds.usage(), loop.extension()))

    return await stream_lifecycle(request, encoder, write)


async def _streamed_round(request: web.Request, sse: StreamSession, rounds: ServerRounds, chat: ChatRequest,
                          loop: ToolLoop, encoder: Any) -> RoundResult:
    prepared = await off_loop(prepare_chat, rounds.tokenizer, rounds.formats, chat)
    splitter, job = prepared.splitter(), prepared.job()
    async with AsyncExitStack() as stack:
        streams = await open_generations(request, stack, [job])
        encoder.begin_round(splitter, loop.is_mcp, len(prepared.tokens))
        if sse.resp is None:
            await send_events(await sse.open(), encoder.opening(streams))
        (finish,) = await send_pieces(request, sse.resp, streams, [job], encoder)
    rounds.usages.append(finish.usage)
    return RoundResult.of(splitter.result(), finish.reason, finish.stop_string, finish.usage)
