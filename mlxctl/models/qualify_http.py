"""A small synchronous OpenAI-API client for qualify, and the one-line texts of its failures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Self

from mlxctl.errors import MlxctlError

TIMEOUT_S = 300.0  # per request: a large model on a CPU is slow, not broken


class Refused(Exception):
    """A request that failed: the server's own error message, one line."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class Api:
    """A small synchronous OpenAI-API client (httpx)."""

    def __init__(self, base: str, api_key: str | None = None):
        import httpx

        self.base = base.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=self.base, headers=headers, timeout=TIMEOUT_S)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self._client.close()

    def get(self, path: str) -> dict:
        return self._json(self._send("GET", path))

    def post(self, path: str, body: dict) -> dict:
        return self._json(self._send("POST", path, json=body))

    def stream(self, path: str, body: dict) -> Iterator[dict]:
        import httpx

        try:
            with self._client.stream("POST", path, json=body) as response:
                if response.status_code >= 400:
                    response.read()
                    raise Refused(_error_message(response), response.status_code)
                for line in response.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        return
                    try:
                        event = json.loads(data)
                    except ValueError:
                        raise Refused(f"{path}: a stream event is not JSON: {clip(data)!r}") from None
                    if isinstance(event, dict):
                        if event.get("error"):
                            raise Refused(f"{path}: {error_text(event['error'])}")
                        yield event
        except httpx.HTTPError as e:
            raise Refused(f"{path}: {first_line(e)}") from None

    def _send(self, method: str, path: str, **kwargs: Any) -> Any:
        import httpx

        try:
            response = self._client.request(method, path, **kwargs)
        except httpx.HTTPError as e:
            raise Refused(f"{path}: {first_line(e) or type(e).__name__}") from None
        if response.status_code >= 400:
            raise Refused(_error_message(response), response.status_code)
        return response

    @staticmethod
    def _json(response: Any) -> dict:
        try:
            value = response.json()
        except ValueError:
            raise Refused(f"{response.request.url.path}: the reply is not JSON") from None
        if not isinstance(value, dict):
            raise Refused(f"{response.request.url.path}: the reply is not a JSON object")
        return value


def _error_message(response: Any) -> str:
    where = f"{response.request.url.path}: HTTP {response.status_code}"
    try:
        body = response.json()
    except ValueError:
        return f"{where}: {clip(response.text)}" if response.text.strip() else where
    error = body.get("error") if isinstance(body, dict) else None
    return f"{where}: {error_text(error if error is not None else body)}"


def error_text(error: Any) -> str:
    if isinstance(error, MlxctlError):
        return error.message
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {first_line(error)}"
    if isinstance(error, dict):
        return first_line(str(error.get("message") or error))
    return first_line(str(error))


def clip(text: str, limit: int = 60) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def first_line(error: BaseException | str) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else (type(error).__name__ if isinstance(error, BaseException) else "")
