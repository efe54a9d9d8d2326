"""qualify against a running server: the checks that differ from in process (the model listed,
the template rendered through the API, the server's peak memory)."""

from __future__ import annotations

import time

from mlxctl.errors import UnavailableError
from mlxctl.models.qualify_api import TOOL_QUESTION
from mlxctl.models.qualify_card import Check
from mlxctl.models.qualify_http import Api, Refused


def listed_model(api: Api, model: str | None) -> tuple[str, Check]:
    started = time.perf_counter()
    try:
        listing = api.get("/v1/models")
    except Refused as e:
        raise UnavailableError(f"cannot qualify {api.base}: {e}") from None
    seconds = round(time.perf_counter() - started, 3)
    ids = [m.get("id") for m in listing.get("data") or [] if isinstance(m, dict)]
    if model is None:
        if not ids:
            return "unknown", Check("loads", "fail", "the server lists no model in /v1/models")
        model = ids[0]
    if model not in ids:
        known = ", ".join(map(str, ids)) or "none"
        return model, Check("loads", "fail", f"/v1/models does not list {model} (it lists {known})")
    return model, Check("loads", "pass", f"served ({api.base}/v1/models lists it)", seconds)


def template_over_api(api: Api, model: str) -> Check:
    """mlxctl's /tokenize renders messages with the template; other servers: a 1-token chat."""
    conversation = [{"role": "user", "content": "Hello!"},
                    {"role": "assistant", "content": "Hi. How can I help?"},
                    {"role": "user", "content": TOOL_QUESTION}]  # fmt: skip
    started = time.perf_counter()
    try:
        body = api.post("/tokenize", {"model": model, "messages": conversation})
        detail = f"renders a 3-turn chat ({body.get('count')} tokens)"
    except Refused as e:
        if e.status not in (404, 405):
            return Check("chat_template", "fail", str(e))
        try:
            api.post("/v1/chat/completions", {"model": model, "messages": conversation,
                                              "max_tokens": 1, "temperature": 0})  # fmt: skip
        except Refused as e2:
            return Check("chat_template", "fail", str(e2))
        detail = "a 3-turn chat is accepted"
    return Check("chat_template", "pass", detail, round(time.perf_counter() - started, 3))


def server_peak(api: Api) -> int | None:
    try:
        status = api.get("/v1/status")
    except Refused:
        return None
    peak = (status.get("memory") or {}).get("peak_bytes")
    return int(peak) if isinstance(peak, (int, float)) and peak > 0 else None
