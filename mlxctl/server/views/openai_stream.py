"""Streaming OpenAI responses: the chat and completions encoder of :func:`~mlxctl.server.streaming.stream_sse`.

Every choice gets its opening chunk, then pieces of ``stream_interval`` tokens, then a last chunk
carrying its finish_reason; with ``stream_options.include_usage`` a chunk with no choices and the
usage follows, then ``[DONE]``. An error after the stream has started is an ``error`` event (an
OpenAI-shaped error body) and the stream ends without ``[DONE]``.
"""

from __future__ import annotations

import dataclasses

from aiohttp import web

from mlxctl.api.openai_output import OpenAIOutput, total_usage
from mlxctl.api.openai_pieces import Piece, finish_reason
from mlxctl.api.openai_translate import Job
from mlxctl.engine.events import FinishEvent
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
