"""Protocol-shaped error responses.

OpenAI clients expect ``{"error": {"message", "type", "param", "code"}}``; Anthropic clients
expect ``{"type": "error", "error": {"type", "message"}}``; Ollama clients (``/api/...``) expect
``{"error": "message"}``. The path decides which shape.
"""

from __future__ import annotations

import json

from aiohttp import web

from mlxctl.errors import ContextOverflowError, MlxctlError

_ANTHROPIC_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
    500: "api_error", 503: "overloaded_error", 504: "timeout_error", 529: "overloaded_error",
}
_OPENAI_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 413: "invalid_request_error", 429: "rate_limit_error",
    500: "server_error", 501: "server_error", 503: "server_error",
}


class ApiError(Exception):
    """An error to send to the client with an HTTP status; ``param`` names the bad field."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None, anthropic_message: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers or {}
        self.anthropic_message = anthropic_message  # Anthropic's own wording, where its clients match on it

    @classmethod
    def from_mlxctl(cls, err: MlxctlError) -> "ApiError":
        message = f"{err.message} ({err.hint})" if err.hint else err.message
        return cls(err.http_status, _openai_wording(err, message), param=getattr(err, "param", None),
                   code=getattr(err, "code", None), headers=getattr(err, "headers", None),
                   anthropic_message=_anthropic_wording(err, message))


def _openai_wording(err: MlxctlError, message: str) -> str:
    """A context overflow as OpenAI's API words it (litellm, aider and opencode detect it by
    "maximum context length"), with our explanation after it; any other error as it is."""
    if not isinstance(err, ContextOverflowError):
        return message
    head = f"This model's maximum context length is {err.context_length} tokens. However, "
    if err.max_tokens is None:
        return head + f"your messages resulted in {err.prompt_tokens} tokens. Please reduce the length of the messages. ({message})"
    return head + (f"you requested {err.prompt_tokens + err.max_tokens} tokens ({err.prompt_tokens} in the messages, "
                   f"{err.max_tokens} in the completion). Please reduce the length of the messages or completion. "
                   f"({message})")


def _anthropic_wording(err: MlxctlError, message: str) -> str | None:
    """A context overflow as Anthropic's API words it (agent clients match on the wording and read
    the numbers back to shorten the prompt or lower max_tokens), with our explanation after it."""
    if not isinstance(err, ContextOverflowError):
        return None
    if err.max_tokens is None:
        return f"prompt is too long: {err.prompt_tokens} tokens > {err.context_length - 1} maximum ({message})"
    return (f"input length and `max_tokens` exceed context limit: {err.prompt_tokens} + {err.max_tokens} > "
            f"{err.context_length}, decrease input length or `max_tokens` and try again ({message})")


SENT_ERROR = "mlxctl.sent_error"  # request key: (message, param) of the error body sent, for the access log


def is_anthropic(request: web.Request) -> bool:
    return request.path.startswith("/v1/messages") or (request.path.startswith("/v1/models")
                                                        and anthropic_client(request))


def anthropic_client(request: web.Request) -> bool:
    """The request came from an Anthropic client (its SDK sends both headers): /v1/models answers
    in Anthropic's shapes then."""
    return "anthropic-version" in request.headers or "x-api-key" in request.headers


def is_ollama(request: web.Request) -> bool:
    return request.path.startswith("/api/")


def error_body(request: web.Request, err: ApiError) -> dict:
    request[SENT_ERROR] = (err.anthropic_message or err.message if is_anthropic(request) else err.message, err.param)
    if is_ollama(request):  # no param field in Ollama's shape: the message names it
        named = err.param is None or err.param in err.message
        return {"error": err.message if named else f"{err.param}: {err.message}"}
    if is_anthropic(request):
        kind = _ANTHROPIC_TYPES.get(err.status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": err.anthropic_message or err.message}}
    kind = _OPENAI_TYPES.get(err.status, "server_error" if err.status >= 500 else "invalid_request_error")
    return {"error": {"message": err.message, "type": kind, "param": err.param, "code": err.code}}


def error_response(request: web.Request, err: ApiError) -> web.Response:
    return web.Response(status=err.status, text=json.dumps(error_body(request, err)),
                        content_type="application/json", headers=err.headers)
