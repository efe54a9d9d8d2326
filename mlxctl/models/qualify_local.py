"""qualify in process: the model resolved and loaded into an engine, its template rendered
directly, the rest of the checks through mlxctl's server on a loopback port. The server comes
from the caller (``serve``: the CLI passes ``mlxctl.server.runner.served_engine``), so this layer
knows nothing of it."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

# (engine, model name) -> a context in which the engine is served at the URL it yields
ServeEngine = Callable[[Any, str], AbstractContextManager[str]]

from mlxctl.models.qualify_api import TOOL_QUESTION, Progress, api_checks
from mlxctl.models.qualify_card import DEFAULT_BUDGET, Budget, Check, Scorecard
from mlxctl.models.qualify_http import Api, error_text


def qualify_engine(engine: Any, name: str, card: Scorecard, serve: ServeEngine, progress: Progress = None,
                   budget: Budget | None = None) -> Scorecard:  # fmt: skip
    """The checks after ``loads`` on a started engine: the template rendered directly, the rest
    through mlxctl's server on a loopback port (``serve``)."""
    from mlxctl.api.chat_plan import ModelFormats

    budget = budget or DEFAULT_BUDGET
    tokenizer = engine.model.tokenizer
    formats = ModelFormats.detect(tokenizer)
    parser = formats.tool_parser or formats.default_tool_parser
    how = "detected" if formats.tool_parser else "default: the template names no tool-call format"
    card.metrics["tool_call_parser"] = f"{parser} ({how})"
    card.checks.append(_render_template(tokenizer))
    with serve(engine, name) as url, Api(url) as api:
        api_checks(api, name, card, progress, budget)
    return card


def resolve_ref(ref: str, progress: Progress) -> tuple[str, Path]:
    from mlxctl.models.manifest import model_name
    from mlxctl.models.resolve import resolve_model
    from mlxctl.models.store import ModelStore

    store = ModelStore()
    ref = ref.strip()
    if ref and "/" not in ref and ref not in (".", "..") and store.has(ref):
        folder = store.model_path(ref)
        return model_name(folder), folder
    resolved = resolve_model(ref, progress=progress, store=store)
    return resolved.name, resolved.path


def start_engine(path: Path, name: str, card: Scorecard) -> tuple[Any, float]:
    from mlxctl.engine.engine import Engine
    from mlxctl.models.loader import load_model

    started = time.perf_counter()
    try:
        engine = Engine(lambda: load_model(path, name=name)).start()
    except Exception as e:  # noqa: BLE001 - any load failure is the check's result
        seconds = time.perf_counter() - started
        card.checks.append(Check("loads", "fail", error_text(e), round(seconds, 3)))
        return None, seconds
    seconds = time.perf_counter() - started
    card.checks.append(Check("loads", "pass", f"loaded in {seconds:.2f} s", round(seconds, 3)))
    return engine, seconds


def _render_template(tokenizer: Any) -> Check:
    from mlxctl.api.prompt import render_chat

    conversation = [
        {"role": "user", "content": "Hello!"},
        {"role": "assistant", "content": "Hi. How can I help?"},
        {"role": "user", "content": TOOL_QUESTION},
    ]
    started = time.perf_counter()
    try:
        tokens = render_chat(tokenizer, conversation)
    except Exception as e:  # noqa: BLE001 - a template that raises fails the check
        return Check("chat_template", "fail", error_text(e))
    seconds = round(time.perf_counter() - started, 3)
    return Check("chat_template", "pass", f"renders a 3-turn chat ({len(tokens)} tokens)", seconds)
