"""Request bodies: JSON parsing and pydantic validation with errors that name the field."""

from __future__ import annotations

import json
from typing import TypeVar

import pydantic
from aiohttp import web

from mlxctl.api.json_depth import JsonTooDeep, loads_bounded
from mlxctl.server.errors import ApiError

M = TypeVar("M", bound=pydantic.BaseModel)


async def read_json(request: web.Request) -> object:
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge as exc:
        raise ApiError(413, f"request body too large: {exc.text}") from exc
    try:
        return loads_bounded(raw)
    except JsonTooDeep as exc:
        raise ApiError(400, str(exc)) from None
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
    first = telling_error(exc.errors())
    field = ".".join(str(p) for p in first["loc"] if "[" not in str(p)) or "body"  # without union labels (list[...])
    if first["type"] == "extra_forbidden":
        return ApiError(400, f"unsupported field '{field}': mlxctl does not implement it", param=field)
    return ApiError(400, f"invalid field '{field}': {first['msg']}", param=field)


def telling_error(errors: list) -> dict:
    """The first error, unless it is only a union branch the value did not take (``input``
    is a string or a list of items: a bad item is not "input should be a valid string"); then
    the error that got furthest into the same field."""
    first = errors[0]
    if not first["type"].endswith("_type"):
        return first
    deeper = [e for e in errors if e["loc"][:1] == first["loc"][:1] and len(e["loc"]) > len(first["loc"])]
    return max(deeper, key=lambda e: len(e["loc"]), default=first)
