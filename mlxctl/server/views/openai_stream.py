"""Streaming OpenAI responses: the chat and completions encoder of :func:`~mlxctl.server.streaming.stream_sse`.

Every choice gets its opening chunk, then pieces of ``stream_interval`` tokens, then a last chunk
carrying its finish_reason; with ``stream_options.include_usage`` a chunk with no choices and the
usage follows, then ``[DONE]``. An error after the stream has started is an ``error`` event (an
OpenAI-shaped error body) and the stream ends without ``[DONE]``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from aiohttp import web

from mlxctl.api.chat_round import RoundResult
from mlxctl.api.chat_split import OutputSplitter
from mlxctl.api.openai_output import ChatOutput, OpenAIOutput, total_usage
from mlxctl.api.output_stream import ChoiceSegments
from mlxctl.api.openai_pieces import Piece, finish_reason
from mlxctl.api.openai_translate import Job
from mlxctl.engine.events import FinishEvent, Usage
from mlxctl.server.errors import ApiError, error_body
from mlxctl.server.streaming import Sse, stream_sse


class OpenAIStream:
    def keepalive(self) -> None:
        return None  # an SSE comment: OpenAI's SDKs skip it

    def __init__(self, jobs: list[Job], output: OpenAIOutput, n: int):
        self.jobs, self.output, self.n = jobs, output, n

    def opening(self, streams: list) -> list[Sse]:
        return [Sse(chunk) for job in self.jobs if (chunk := self.output.opening(job.index, job.echo)) is not None]

    def pieces(self, choice: int, piece: Piece, finish: FinishEvent | None) -> list[Sse]:
        if finish is not None:  # an aborted request raises: an error, never a short answer
            piece = dataclasses.replace(piece, finish_reason=finish_reason(finish.reason))
        chunk = self.output.chunk(self.jobs[choice].index, piece)
        return [Sse(chunk)] if chunk else []

    def closing(self, finishes: list[FinishEvent]) -> list[Sse]:
        usage = [Sse(self.output.usage_chunk(total_usage([f.usage for f in finishes], self.n)))] \
            if self.output.include_usage else []
        return usage + [Sse("[DONE]")]

    def error(self, request: web.Request, err: ApiError) -> Sse:
        return Sse(error_body(request, err))


async def stream_response(request: web.Request, jobs: list[Job], output: OpenAIOutput, n: int) -> web.StreamResponse:
    return await stream_sse(request, jobs, OpenAIStream(jobs, output, n))


class McpChatStream:
    """The chat stream of the MCP loop (server/mcp_stream.py): one choice; each round's reasoning
    and content as it is generated (the MCP calls left out), the client's calls of the last round,
    then a chunk with the finish_reason and the loop's ``mcp_calls`` / ``mcp_rounds`` / ``mcp_note``."""

    def __init__(self, output: ChatOutput):
        self.output = output
        self.segments: ChoiceSegments | None = None

    def keepalive(self) -> None:
        return None  # an SSE comment: OpenAI's SDKs skip it

    def opening(self, streams: list) -> list[Sse]:
        return [Sse(self.output.opening(0, ""))]

    def begin_round(self, splitter: OutputSplitter, hidden: Callable[[str], bool], prompt_tokens: int) -> None:
        self.segments = ChoiceSegments(splitter, hidden=hidden)

    def pieces(self, choice: int, piece: Piece, finish: FinishEvent | None) -> list[Sse]:
        chunk = self.output.split_chunk(self.segments.segments(piece.text, finish is not None))
        return [Sse(chunk)] if chunk else []

    def ran(self, calls: list) -> list[Sse]:
        return []  # they are listed in the last chunk's mcp_calls

    def finished(self, result: RoundResult, usage: Usage, extension: dict) -> list[Sse]:
        last = [Sse({**self.output.split_chunk([], result.finish), **extension})]
        usage_chunk = [Sse(self.output.usage_chunk(usage))] if self.output.include_usage else []
        return last + usage_chunk + [Sse("[DONE]")]

    def error(self, request: web.Request, err: ApiError) -> Sse:
        return Sse(error_body(request, err))
