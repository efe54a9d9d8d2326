"""Request bodies: JSON parsing and pydantic validation with errors that name the field."""

from __future__ import annotations

import json
from typing import TypeVar

import pydantic
from aiohttp import web

from mlxctl.server.errors import ApiError

M = TypeVar("M", bound=pydantic.BaseModel)


async def read_json(request: web.Request) -> object:
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge as exc:
        raise ApiError(413, f"request body too large: {exc.text}") from exc
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(400, f"malformed JSON body: {exc}") from exc


async def parse_body(request: web.Request, model: type[M]) -> M:
    """The body validated into ``model``; a 400 naming the first bad field otherwise.

    Validation is strict JSON: a string is not a number (``"max_tokens": "3000"``), ``true`` is
    not 1 and ``3.0`` is not an integer, as the hosted APIs answer; an integer is a number."""
    data = await read_json(request)
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    try:
        return model.model_validate_json(await request.read(), strict=True)
    except pydantic.ValidationError as exc:
        raise validation_error(exc) from exc


def validation_error(exc: pydantic.ValidationError) -> ApiError:
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "body"
    if first["type"] == "extra_forbidden":
        return ApiError(400, f"unsupported field '{field}': mlxctl does not implement it", param=field)
    return ApiError(400, f"invalid field '{field}': {first['msg']}", param=field)
