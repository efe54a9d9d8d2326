"""Ending a generation early with an error its consumer sees: a timeout, or a server shutdown.

The engine is told to abort (freeing the request's memory) and the stream gets a finish event
carrying the error right away, so a view reading it raises that error where it would raise an
engine failure: a protocol error body for a plain request, a terminal error event for a stream.
"""

from __future__ import annotations

from mlxctl.engine.events import FinishEvent, FinishReason, Timings, Usage
from mlxctl.engine.streams import RequestStream
from mlxctl.errors import MlxctlError


class RequestTimeoutError(MlxctlError):
    """A request ran past the server's --request-timeout."""

    http_status = 504


class ShuttingDownError(MlxctlError):
    """The server stopped while the request was still running."""

    http_status = 503


def interrupt(stream: RequestStream, error: MlxctlError, prompt_tokens: int = 0) -> None:
    """Abort ``stream``'s request and end the stream now with ``error``."""
    if stream.finish is not None:
        return
    stream.abort()
    timings = Timings(0.0, 0.0, 0.0, 0.0, 0.0, prompt_tokens=prompt_tokens)
    stream.put(FinishEvent(FinishReason.ABORT, Usage(prompt_tokens, 0), timings, error=error))


def timeout_error(seconds: float) -> RequestTimeoutError:
    return RequestTimeoutError(f"the request ran past the server's time limit of {seconds:g}s",
                               hint="ask for fewer tokens, or raise --request-timeout")


def shutdown_error() -> ShuttingDownError:
    return ShuttingDownError("the server is shutting down", hint="retry on another instance or later")
