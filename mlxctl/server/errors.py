"""Protocol-shaped error responses.

OpenAI clients expect ``{"error": {"message", "type", "param", "code"}}``; Anthropic clients
expect ``{"type": "error", "error": {"type", "message"}}``. The path decides which shape.
"""

from __future__ import annotations

import json

from aiohttp import web

from mlxctl.errors import MlxctlError

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
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers or {}

    @classmethod
    def from_mlxctl(cls, err: MlxctlError) -> "ApiError":
        message = f"{err.message} ({err.hint})" if err.hint else err.message
        return cls(err.http_status, message, param=getattr(err, "param", None))


def is_anthropic(request: web.Request) -> bool:
    return request.path.startswith("/v1/messages")


def error_body(request: web.Request, err: ApiError) -> dict:
    if is_anthropic(request):
        kind = _ANTHROPIC_TYPES.get(err.status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": err.message}}
    kind = _OPENAI_TYPES.get(err.status, "server_error" if err.status >= 500 else "invalid_request_error")
    return {"error": {"message": err.message, "type": kind, "param": err.param, "code": err.code}}


def error_response(request: web.Request, err: ApiError) -> web.Response:
    return web.Response(status=err.status, text=json.dumps(error_body(request, err)),
                        content_type="application/json", headers=err.headers)
