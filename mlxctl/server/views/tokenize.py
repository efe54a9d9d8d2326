"""POST /tokenize and POST /detokenize: the served model's tokenizer over HTTP."""

from __future__ import annotations

from typing import Any

import pydantic
from aiohttp import web

from mlxctl.api.null_fields import NullMeansAbsent
from mlxctl.errors import MlxctlError
from mlxctl.server.body import parse_body
from mlxctl.server.errors import ApiError
from mlxctl.server.keys import ENGINE


class TokenizeRequest(NullMeansAbsent):
    """Either ``prompt`` (plain text) or ``messages`` (rendered with the chat template)."""

    model_config = pydantic.ConfigDict(extra="forbid")
    model: str | None = None
    prompt: str | None = None
    messages: list[dict[str, Any]] | None = pydantic.Field(default=None, min_length=1)
    add_special_tokens: bool = True  # prompt only: the model's BOS where it wants one

    @pydantic.model_validator(mode="after")
    def _one_input(self) -> TokenizeRequest:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of 'prompt' and 'messages'")
        return self


class DetokenizeRequest(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    model: str | None = None
    tokens: list[int]


def tokenizer_of(request: web.Request) -> Any:
    engine = request.app[ENGINE]
    if engine.model is None:
        raise ApiError(503, "the model is still loading", headers={"Retry-After": "5"})
    return engine.model.tokenizer


async def tokenize(request: web.Request) -> web.Response:
    from mlxctl.api.prompt import encode_text

    body = await parse_body(request, TokenizeRequest)
    tokenizer = tokenizer_of(request)
    if body.messages is not None:
        tokens = render_messages(tokenizer, body.messages)
    else:
        tokens = encode_text(tokenizer, body.prompt, special=body.add_special_tokens)
    return web.json_response({"tokens": tokens, "count": len(tokens)})


def render_messages(tokenizer: Any, messages: list[dict[str, Any]]) -> list[int]:
    """The chat template applied to ``messages``; a template that rejects them is a 400."""
    from mlxctl.api.prompt import render_chat

    try:
        return render_chat(tokenizer, messages)
    except MlxctlError:
        raise
    except Exception as exc:
        raise ApiError(400, f"invalid field 'messages': the chat template rejected them: {exc}",
                       param="messages") from exc


async def detokenize(request: web.Request) -> web.Response:
    body = await parse_body(request, DetokenizeRequest)
    tokenizer = tokenizer_of(request)
    check_ids(body.tokens, vocab_size(request, tokenizer))
    return web.json_response({"prompt": tokenizer.decode(body.tokens)})


def vocab_size(request: web.Request, tokenizer: Any) -> int:
    engine = request.app[ENGINE]
    return getattr(engine, "vocab_size", None) or len(tokenizer)


def check_ids(tokens: list[int], size: int) -> None:
    bad = next((t for t in tokens if not 0 <= t < size), None)
    if bad is not None:
        raise ApiError(400, f"invalid field 'tokens': {bad} is not a token id (0 to {size - 1})", param="tokens")
