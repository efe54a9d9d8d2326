"""User-facing errors and exit statuses.

Every error a user can cause is an :class:`MlxctlError` with a one-line message and an optional
hint; the CLI prints it without a traceback (unless ``--debug``) and exits with its status, the
server maps it to a protocol-shaped 4xx/5xx body.
"""

from __future__ import annotations

import enum


class ExitStatus(enum.IntEnum):
    """Process exit codes; each means one thing so scripts can branch on them."""

    OK = 0
    ERROR = 1  # unexpected failure (a bug, or an error we did not classify)
    USAGE = 2  # bad flags or arguments (click's own convention)
    NOT_FOUND = 3  # a model, file or resource that does not exist
    BAD_INPUT = 4  # input we cannot accept: empty prompt, prompt over the context, bad value
    NOT_IMPLEMENTED = 5  # a verb that exists in the tree but is not built yet
    UNAVAILABLE = 6  # a resource we need is unreachable (offline, server down)
    CHECK_FAILED = 7  # bench-serve: a workload case failed its checks (the report is still printed)
    INTERRUPTED = 130  # Ctrl-C


class MlxctlError(Exception):
    """An error with a message meant for the user and an optional hint on what to do."""

    exit_status = ExitStatus.ERROR
    http_status = 500

    def __init__(self, message: str, hint: str | None = None, *, param: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.param = param  # the request field at fault, where there is one (the server names it)

    def __str__(self) -> str:
        return self.message


class BadInputError(MlxctlError):
    """Input we refuse to process (never silently fixed up)."""

    exit_status = ExitStatus.BAD_INPUT
    http_status = 400


class ContextOverflowError(BadInputError):
    """A prompt, or a prompt plus the new tokens a request asks for, that does not fit the
    model's context. The numbers travel with it so that each protocol can word the refusal the
    way its clients recognise (``max_tokens`` is None when the prompt alone leaves no room)."""

    code = "context_length_exceeded"  # OpenAI's error code for it, which clients branch on

    def __init__(self, message: str, *, prompt_tokens: int, context_length: int, max_tokens: int | None = None,
                 param: str | None = None):
        super().__init__(message, param=param)
        self.prompt_tokens, self.context_length, self.max_tokens = prompt_tokens, context_length, max_tokens


class ModelNotFoundError(MlxctlError):
    """A model reference that resolves to nothing."""

    exit_status = ExitStatus.NOT_FOUND
    http_status = 404


class ModelFormatError(MlxctlError):
    """A model file or folder we cannot read (unsupported architecture or tensor type)."""

    exit_status = ExitStatus.BAD_INPUT
    http_status = 400


class UnavailableError(MlxctlError):
    """Something we need cannot be reached (offline, package index down, server gone)."""

    exit_status = ExitStatus.UNAVAILABLE
    http_status = 503


class MemoryBusyError(UnavailableError):
    """The memory budget's KV room is spoken for by requests running and queued: come back later."""

    code = "memory_budget_busy"

    def __init__(self, message: str, retry_after_s: int, hint: str | None = None):
        super().__init__(message, hint)
        self.headers = {"Retry-After": str(max(1, retry_after_s))}


class CheckFailedError(MlxctlError):
    """Replies that broke a workload's contract (bench-serve), so CI can gate on them."""

    exit_status = ExitStatus.CHECK_FAILED
    http_status = 500


class NotImplementedYetError(MlxctlError):
    """A command that exists in the tree but is not built yet."""

    exit_status = ExitStatus.NOT_IMPLEMENTED
    http_status = 501


class EngineError(MlxctlError):
    """A failure inside the engine while serving a request (travels through the stream)."""

    exit_status = ExitStatus.ERROR
    http_status = 500
