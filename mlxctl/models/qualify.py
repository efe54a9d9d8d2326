"""``mlxctl model qualify``: is this model fit to serve here? A scorecard of checks and figures.

Checks, in order (each ``pass``, ``fail`` or ``skip``; the model qualifies when none fails):

- ``loads``: the model loads (in process: the time it took; ``--url``: the server lists it);
- ``chat_template``: the chat template renders a multi-turn conversation;
- ``deterministic``: two greedy (temperature 0) chat completions of one prompt are identical;
- ``tool_call``: a call forced with a named ``tool_choice`` comes back parsed (by the tool-call
  format the server detected from the template, or its default), its arguments are a JSON
  object that fits the tool's schema, and after the tool's result is fed back the model
  answers in text;
- ``json_mode``: ``response_format: json_object`` gives a valid JSON object;
- ``speed``: a streamed completion's time to first token and decode rate.

Every check but ``loads`` and the in-process template render goes through the OpenAI API, so
both modes check the same thing: in process, the model is loaded into an engine and served by
mlxctl's own server on a loopback port for the duration; with ``--url`` the requests go to a
running server (mlxctl's or any OpenAI-compatible one). Peak memory is MLX's
(``mx.get_peak_memory``) in process, and ``/v1/status``'s ``memory.peak_bytes`` for a URL
(when the server has one).
"""

from __future__ import annotations

from mlxctl.models.qualify_api import Progress, api_checks, say
from mlxctl.models.qualify_card import (
    CHECKS,
    DEFAULT_BUDGET,
    METRICS,
    Budget,
    Check,
    Scorecard,
    new_card,
    scorecard_text,
)
from mlxctl.models.qualify_http import Api
from mlxctl.models.qualify_local import ServeEngine, qualify_engine, resolve_ref, start_engine
from mlxctl.models.qualify_remote import listed_model, server_peak, template_over_api

__all__ = ["CHECKS", "DEFAULT_BUDGET", "METRICS", "Budget", "Check", "Progress", "Scorecard", "qualify_engine",
           "qualify_model", "qualify_url", "scorecard_text"]


def qualify_model(ref: str, *, serve: ServeEngine, progress: Progress = None, budget: Budget | None = None) -> Scorecard:
    """Load ``ref`` (a store name or anything ``mlxctl run -m`` takes) and qualify it here, its
    API checks through ``serve`` (``mlxctl.server.runner.served_engine``)."""
    import mlx.core as mx

    budget = budget or DEFAULT_BUDGET
    name, path = resolve_ref(ref, progress)
    card = new_card(name, "in-process")
    mx.reset_peak_memory()
    say(progress, f"loading {name}")
    engine, seconds = start_engine(path, name, card)
    if engine is None:
        card.checks += [Check(n, "skip", "the model did not load") for n in CHECKS[1:]]
        return card
    card.metrics["load_s"] = round(seconds, 3)
    try:
        qualify_engine(engine, name, card, serve, progress, budget)
    finally:
        engine.shutdown()
    card.metrics["peak_memory_bytes"] = int(mx.get_peak_memory()) or None
    return card


def qualify_url(url: str, *, model: str | None = None, api_key: str | None = None,
                progress: Progress = None, budget: Budget | None = None) -> Scorecard:  # fmt: skip
    """Qualify the model a running OpenAI-compatible server serves (``model``: which one)."""
    from mlxctl.bench.config import parse_url

    budget = budget or DEFAULT_BUDGET
    base = parse_url(url)
    with Api(base, api_key) as api:
        name, check = listed_model(api, model)
        card = new_card(name, base)
        card.checks.append(check)
        if check.status == "fail":
            card.checks += [Check(n, "skip", "the server does not serve it") for n in CHECKS[1:]]
            return card
        card.checks.append(template_over_api(api, name))
        api_checks(api, name, card, progress, budget)
        card.metrics["peak_memory_bytes"] = server_peak(api)
    return card
