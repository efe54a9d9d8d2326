"""`mlxctl top` (TopApp) driven by Textual's pilot against a real daemon on the SmolLM2 engine.

Set MLXCTL_TOP_SCREENSHOTS=docs/img to refresh the screenshots of docs/tui.md (top.svg and
top-disconnected.svg): ``MLXCTL_TOP_SCREENSHOTS=docs/img python -m pytest tests/tui/test_top.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import html
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from mlxctl.engine.engine import Engine
from mlxctl.models.loader import LoadedModel
from mlxctl.server.app import init_app
from mlxctl.server.residency import ModelPool
from mlxctl.server.runner import BackgroundServer, free_port
from mlxctl.server.settings import ServeSettings
from mlxctl.tui.client import Poll, parse_metrics
from mlxctl.tui.client import base_url as parse_base_url
from mlxctl.tui.stats import Tracker
from mlxctl.tui.top import DISCONNECTED, TopApp
from mlxctl.tui.top_models import model_rows, models_title
from tests.cli.helpers import REPO, clean_env
from tests.engine.tiny import tiny_llama

MODEL = "smollm2-135m"
SIZE = (110, 34)
DOCS_SIZE = (110, 38)  # the screenshots of docs/tui.md: seven request rows and three model rows
VOCAB = 49152  # SmolLM2's tokenizer, so the server's text paths work on the tiny pool models
pytestmark = pytest.mark.timeout(120)


def text_of(app: TopApp, selector: str) -> str:
    from textual.app import ScreenStackError
    from textual.css.query import NoMatches

    try:
        return str(app.query_one(selector).content)
    except (NoMatches, ScreenStackError):  # a screen being swapped while the app is busy
        return ""


async def until(pilot, predicate, timeout: float = 60.0) -> bool:
    """Let the app run until ``predicate()`` holds (False after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await pilot.pause(0.05)
    return bool(predicate())


async def chat(url: str, max_tokens: int = 8) -> dict:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Count from one to fifty."}],
            "max_tokens": max_tokens, "temperature": 0}
    async with httpx.AsyncClient(timeout=60) as client:
        r = await client.post(f"{url}/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def start_daemon(engine, port: int) -> BackgroundServer:
    settings = dataclasses.replace(ServeSettings(model_name=MODEL), port=port)
    return BackgroundServer(init_app(engine, settings), port=port).start()


def svg_text(svg: str) -> str:
    """The characters an SVG screenshot shows, tags dropped (non-breaking spaces as spaces)."""
    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")


def screenshot(app: TopApp, tmp_path: Path, name: str) -> str:
    """Save an SVG screenshot (and copy it to $MLXCTL_TOP_SCREENSHOTS); its visible text."""
    path = Path(app.save_screenshot(filename=name, path=str(tmp_path)))
    if target := os.environ.get("MLXCTL_TOP_SCREENSHOTS"):
        shutil.copy(path, Path(target) / name)
    svg = path.read_text()
    assert svg.lstrip().startswith("<svg")
    return svg_text(svg)


def model_table(app: TopApp) -> dict[str, list[str]]:
    """The models panel as shown: model id -> the text of each cell."""
    from textual.css.query import NoMatches

    try:
        table = app.query_one("#models")
    except NoMatches:
        return {}
    return {str(table.get_row(key)[0]): [str(c) for c in table.get_row(key)] for key in table.rows}


def tiny_engine(seed: int, tokenizer):
    def make() -> Engine:
        model = tiny_llama(seed=seed, vocab=VOCAB)
        return Engine(lambda: LoadedModel(model, tokenizer, {"vocab_size": VOCAB}, 512, set(), f"tiny-{seed}"))
    return make


@pytest.fixture
def two_models(engine):
    """(url, pool, server): a real daemon serving SmolLM2 (primary) and, from its resident pool,
    two tiny random llamas: tiny-a (lazy) and tiny-b (lazy, pinned once loaded)."""
    pool = ModelPool(budget_bytes=0, default_keep_alive_s=300.0)
    tokenizer = engine.model.tokenizer
    pool.add("tiny-a", "preset:tiny-a", tiny_engine(1, tokenizer))
    pool.add("tiny-b", "preset:tiny-b", tiny_engine(2, tokenizer), pinned=True)
    server = BackgroundServer(init_app(engine, ServeSettings(model_name=MODEL), pool)).start()
    yield server.url, pool, server
    server.submit(pool.close()).result(30)
    server.stop()


async def complete(url: str, model: str) -> dict:
    async with httpx.AsyncClient(timeout=120) as client:
        r = await client.post(f"{url}/v1/completions", json={
            "model": model, "prompt": [3, 1, 4, 1, 5, 9, 2, 6], "max_tokens": 4, "temperature": 0})
    assert r.status_code == 200, r.text
    return r.json()


async def hold(server: BackgroundServer, coro):
    """Run ``coro`` on the server's own loop (the pool lives there) without blocking the app."""
    return await asyncio.wrap_future(server.submit(coro))


# -- against a real daemon -------------------------------------------------------------------


@pytest.mark.asyncio
async def test_shows_the_model_and_counts_a_request(base_url):
    app = TopApp(url=base_url, interval=0.2)
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, lambda: MODEL in text_of(app, "#header"))
        assert "● loaded" in text_of(app, "#header")
        assert text_of(app, "#conn").startswith("connected to")
        assert "done 0" in text_of(app, "#header")

        reply = await chat(base_url, max_tokens=8)
        assert reply["usage"]["completion_tokens"] > 0

        assert await until(pilot, lambda: "done 1" in text_of(app, "#header"))
        assert await until(pilot, lambda: app.tracker.peak_output_tps > 0 and app.tracker.ttft_ms)
        assert "peak" in app.query_one("#throughput").border_subtitle
        assert "all-time mean" in app.query_one("#ttft").border_subtitle
        assert "- ms" not in app.query_one("#ttft").border_subtitle
        assert "lookups" in text_of(app, "#cache")  # the prefix cache saw the prompt
        assert "active" in text_of(app, "#memory")
        assert app.query_one("#requests").border_title.startswith("Requests: 0 running")


@pytest.mark.asyncio
async def test_pause_stops_polling_and_resumes(base_url):
    app = TopApp(url=base_url, interval=0.1)
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, lambda: app.tracker.polls >= 2)
        await pilot.press("p")
        assert app.paused and text_of(app, "#conn").startswith("paused")
        polls = app.tracker.polls
        await pilot.pause(0.6)
        assert app.tracker.polls == polls
        await pilot.press("p")
        assert not app.paused
        assert await until(pilot, lambda: app.tracker.polls > polls + 1)
        assert text_of(app, "#conn").startswith("connected to")

        await pilot.press("p")  # paused, so no poll lands between the reset and the check
        assert await until(pilot, lambda: app.paused and not app._polling)  # and no poll in flight
        assert len(app.tracker.throughput) >= 2
        await pilot.press("r")  # reset clears the history; polling goes on once resumed
        assert len(app.tracker.throughput) == 0
        polls = app.tracker.polls
        await pilot.press("p")
        assert await until(pilot, lambda: app.tracker.polls > polls)


@pytest.mark.asyncio
async def test_no_daemon_then_one_comes_up_then_restarts(engine):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    app = TopApp(url=url, interval=0.1)
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, lambda: DISCONNECTED in text_of(app, "#conn"))
        assert f"nothing is listening at {url}" in text_of(app, "#conn")
        first = app.last_poll
        assert await until(pilot, lambda: app.last_poll is not first)  # still polling
        assert app.is_running and not app.connected

        server = start_daemon(engine, port)
        try:
            assert await until(pilot, lambda: app.connected and MODEL in text_of(app, "#header"))
            assert text_of(app, "#conn").startswith("connected to")
        finally:
            server.stop()
        assert await until(pilot, lambda: DISCONNECTED in text_of(app, "#conn"))
        assert "last answer" in text_of(app, "#conn")
        assert "● unreachable" in text_of(app, "#header") and MODEL in text_of(app, "#header")
        assert app.screen.has_class("-stale")

        server = start_daemon(engine, port)  # the daemon restarted: picked up again
        try:
            assert await until(pilot, lambda: app.connected and "● loaded" in text_of(app, "#header"))
            assert not app.screen.has_class("-stale")
        finally:
            server.stop()


@pytest.mark.asyncio
async def test_api_key(serve):
    url = serve(api_key="sekret", auth_health=True)
    app = TopApp(url=url, interval=0.1)
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, lambda: "refused the API key" in text_of(app, "#conn"))
        assert text_of(app, "#conn").startswith(DISCONNECTED)
    app = TopApp(url=url, interval=0.1, api_key="sekret")
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, lambda: app.connected and "done 0" in text_of(app, "#header"))


@pytest.mark.asyncio
async def test_models_panel_follows_loads_leases_and_unloads(two_models):
    url, pool, server = two_models
    app = TopApp(url=url, interval=0.1)
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, lambda: len(model_table(app)) == 3)
        rows = model_table(app)
        assert list(rows) == [MODEL, "tiny-a", "tiny-b"]  # the primary first
        assert rows[MODEL][1] == "ready" and rows[MODEL][7] == "primary" and rows[MODEL][4] == "never"
        assert rows["tiny-a"][1] == "unloaded" and rows["tiny-a"][5] == "-" and rows["tiny-a"][6] == "0"
        assert rows["tiny-a"][4] == "5m00s" and rows["tiny-a"][7] == ""
        assert rows["tiny-b"][7] == "yes"
        assert app.query_one("#models").border_title == "Models: 3 served · 1 loaded · 0 leased"

        await complete(url, "tiny-a")  # loads on first use
        # the lease ends just after the response: wait for both
        assert await until(pilot, lambda: model_table(app)["tiny-a"][1:3] == ["ready", "0"])
        rows = model_table(app)
        assert rows["tiny-a"][6] == "1" and rows["tiny-a"][5].endswith("MiB")
        assert "2 loaded" in app.query_one("#models").border_title

        resident = await hold(server, pool.lease("tiny-a"))  # what a request does while it runs
        try:
            assert await until(pilot, lambda: model_table(app)["tiny-a"][2] == "1")
            assert model_table(app)["tiny-a"][3] == "-"  # not idle while in use
            assert app.query_one("#models").border_title.endswith("1 leased")
        finally:
            await hold(server, _release(pool, resident))
        assert await until(pilot, lambda: model_table(app)["tiny-a"][2] == "0")
        assert await until(pilot, lambda: model_table(app)["tiny-a"][3].endswith("s"))  # idle for …s

        async with httpx.AsyncClient(timeout=60) as client:
            assert (await client.post(f"{url}/v1/models/tiny-a/unload")).json()["state"] == "unloaded"
        assert await until(pilot, lambda: model_table(app)["tiny-a"][1] == "unloaded")
        assert model_table(app)["tiny-a"][5] == "-"


async def _release(pool: ModelPool, resident) -> None:
    pool.release(resident)


@pytest.mark.asyncio
async def test_models_panel_keeps_the_last_rows_dimmed_while_the_daemon_is_down(engine):
    port = free_port()
    server = start_daemon(engine, port)
    app = TopApp(url=f"http://127.0.0.1:{port}", interval=0.1)
    async with app.run_test(size=SIZE) as pilot:
        try:
            assert await until(pilot, lambda: list(model_table(app)) == [MODEL])
            assert app.query_one("#models").border_title == "Models: 1 served · 1 loaded · 0 leased"
        finally:
            server.stop()
        assert await until(pilot, lambda: DISCONNECTED in text_of(app, "#conn"))
        assert list(model_table(app)) == [MODEL] and app.screen.has_class("-stale")


def test_model_rows_without_a_pool_and_with_a_failed_model():
    status = {"model": "m", "loaded": False, "engine": {"num_running": 2, "num_waiting": 1}}
    rows = model_rows(status)
    assert list(rows) == ["m"] and str(rows["m"][1]) == "loading" and rows["m"][2] == "3"
    status = {"model": "m", "loaded": True, "draining": True, "models": [
        {"id": "x", "state": "failed", "error": "no such model", "in_use": 0, "idle_s": 61.0,
         "keep_alive_s": None, "weights_bytes": 0, "loads": 0, "pinned": False}]}
    rows = model_rows(status)
    assert str(rows["m"][1]) == "draining"
    assert str(rows["x"][1]) == "failed: no such model" and rows["x"][3] == "1m01s" and rows["x"][4] == "never"
    assert models_title(status) == "Models: 2 served · 1 loaded · 0 leased"


SYSTEM = ("You are the storyteller of a small harbour town. You know every boat, every family and every "
          "storm of the last hundred years, and you tell each story slowly, with the names of the people, "
          "the weather, the sounds of the harbour and what the town learned from it. ") * 3


async def _stream(url: str, ready: asyncio.Event, i: int, max_tokens: int = 400) -> None:
    body = {"model": MODEL, "messages": [{"role": "system", "content": SYSTEM},
                                         {"role": "user", "content": f"Tell story number {i}, at length."}],
            "max_tokens": max_tokens, "temperature": 0, "stream": True, "ignore_eos": True}
    async with httpx.AsyncClient(timeout=120) as client:
        async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    ready.set()


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
@pytest.mark.asyncio
async def test_screenshot_shows_every_panel(two_models, tmp_path):
    """docs/img/top.svg: seven streamed requests in flight on the primary, a pool model loaded
    and leased, another not loaded yet."""
    url, pool, server = two_models
    app = TopApp(url=url, interval=0.25)
    async with app.run_test(size=DOCS_SIZE) as pilot:
        await asyncio.gather(_stream(url, asyncio.Event(), 0, max_tokens=8), complete(url, "tiny-a"))
        assert await until(pilot, lambda: "done 2" in text_of(app, "#header") and app.tracker.ttft_ms)
        resident = await hold(server, pool.lease("tiny-a"))
        events = [asyncio.Event() for _ in range(7)]
        streams = [asyncio.ensure_future(_stream(url, e, i + 1)) for i, e in enumerate(events)]
        try:
            # a first SSE chunk can come before the prompt is done: wait until all seven decode
            assert await until(pilot, lambda: row_states(app) == ["running"] * 7 and all(e.is_set() for e in events)
                               and len(app.tracker.request_tps) == 7 and app.tracker.output_tps, timeout=180)
            assert await until(pilot, lambda: model_table(app)["tiny-a"][2] == "1")
            polls = app.tracker.polls
            assert await until(pilot, lambda: app.tracker.polls >= polls + 12)  # a few more points on the plots
            shown = screenshot(app, tmp_path, "top.svg")
        finally:
            for task in streams:
                task.cancel()
            await asyncio.gather(*streams, return_exceptions=True)
            await hold(server, _release(pool, resident))
    for text in (MODEL, "● loaded", "done 2", "Requests: 7 running", "generated/max", "tok/s",
                 "Models: 3 served · 2 loaded · 1 leased", "tiny-a", "tiny-b", "primary", "keep-alive", "12.3 MiB",
                 "Output tok/s", "TTFT ms", "Prefix cache", "hit rate", "Memory", "active",
                 "Quit", "Pause", "Reset"):
        assert text in shown, text


def row_states(app: TopApp) -> list[str]:
    """The state column of the requests table, top to bottom."""
    rows = in_flight_rows(app)
    return [str(app.query_one("#requests").get_row(key)[1]) for key in rows] if rows else []


def in_flight_rows(app: TopApp) -> list:
    from textual.css.query import NoMatches

    try:
        return list(app.query_one("#requests").rows)
    except NoMatches:
        return []


@pytest.mark.asyncio
async def test_screenshot_after_the_daemon_went_away(engine, tmp_path):
    """docs/img/top-disconnected.svg: the last figures dimmed, the reason on the connection line."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_daemon(engine, port)
    app = TopApp(url=url, interval=0.25)
    async with app.run_test(size=DOCS_SIZE) as pilot:
        try:
            assert await until(pilot, lambda: app.connected and MODEL in text_of(app, "#header"))
            await chat(url, max_tokens=8)
            assert await until(pilot, lambda: "done 1" in text_of(app, "#header"))
        finally:
            server.stop()
        assert await until(pilot, lambda: DISCONNECTED in text_of(app, "#conn") and "last answer" in text_of(app, "#conn"))
        await pilot.pause()  # what is queued is drawn
        shown = screenshot(app, tmp_path, "top-disconnected.svg")
    for text in ("● unreachable", f"nothing is listening at {url}", "Models: 1 served", MODEL):
        assert text in shown, text


# -- the pieces, without a daemon ------------------------------------------------------------


def test_parse_metrics_drops_prefix_and_model_label():
    text = """# HELP mlxctl:generation_tokens_total Tokens generated.
mlxctl:generation_tokens_total{model_name="m"} 42.0
mlxctl:request_success_total{finished_reason="stop",model_name="m"} 2.0
mlxctl:request_success_total{finished_reason="length",model_name="m"} 1.0
mlxctl:time_to_first_token_seconds_sum{model_name="m"} 0.5
other_metric 3
"""
    figures = parse_metrics(text)
    assert figures["generation_tokens_total"] == 42.0
    assert figures['request_success_total{finished_reason="stop"}'] == 2.0
    assert figures["time_to_first_token_seconds_sum"] == 0.5
    assert "other_metric" not in figures


def _poll(at, uptime, generated_total, running, ttft=(0.0, 0)):
    status = {"uptime_s": uptime, "engine": {"running": running, "prefilling": [], "waiting": []}}
    metrics = {"generation_tokens_total": generated_total, "prompt_tokens_total": 0.0,
               "time_to_first_token_seconds_sum": ttft[0], "time_to_first_token_seconds_count": ttft[1]}
    return Poll(at=at, status=status, metrics=metrics)


def test_tracker_rates_span_finishing_requests_and_restarts():
    t = Tracker()
    t.update(_poll(0.0, 10.0, 0, [{"id": "a", "generated": 0, "prompt_done": 0}]))
    t.update(_poll(1.0, 11.0, 0, [{"id": "a", "generated": 20, "prompt_done": 0}]))
    assert t.output_tps == 20 and t.request_tps == {"a": 20}
    # "a" finished with 30 tokens: the counter took them over, the rate stays smooth
    t.update(_poll(2.0, 12.0, 30, [], ttft=(0.25, 1)))
    assert t.output_tps == 10 and t.last_ttft_ms == 250
    # the daemon restarted (uptime went back, counters reset): a new baseline, no negative rate
    t.update(_poll(3.0, 0.5, 0, []))
    assert list(t.throughput) == [20, 10]
    t.update(_poll(4.0, 1.5, 5, []))
    assert t.output_tps == 5
    t.update(Poll(at=5.0, error="down"))
    assert t.output_tps is None
    t.reset()
    assert not t.throughput and t.peak_output_tps == 0


def test_base_url_is_checked():
    assert parse_base_url("http://127.0.0.1:8080/v1/") == "http://127.0.0.1:8080"
    with pytest.raises(Exception, match="bad --url"):
        parse_base_url("ftp://host")


def test_cli_top_without_a_terminal_is_a_clear_error():
    result = subprocess.run([sys.executable, "-m", "mlxctl", "top", "--url", "http://127.0.0.1:9"],
                            check=False, cwd=REPO, env=clean_env(), stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 4
    assert result.stderr.startswith("mlxctl: error: 'top' needs a terminal")
    assert "Traceback" not in result.stderr


def test_the_cache_panel_shows_checkpoints_for_models_served_from_them():
    from mlxctl.tui.top import cache_text

    prefix = {"enabled": True, "mode": "checkpoints", "checkpoints": 3, "checkpoint_bytes": 3 << 20,
              "cache_layers": ["KVCache", "RotatingKVCache"], "blocks": 5, "queries": 4, "hits": 2}
    text = cache_text({"engine": {"prefix_cache": prefix}}).plain
    assert "checkpts   3 (" in text and "RotatingKVCache" in text
    assert "checkpts" not in cache_text({"engine": {"prefix_cache": dict(prefix, mode="blocks")}}).plain


def test_cache_panel_shows_speculation_when_it_is_on():
    from mlxctl.tui.top import cache_text

    on = {"mode": "ngram", "active": True, "steps": 40, "draft_tokens": 300, "accepted_tokens": 150}
    text = cache_text({"engine": {"prefix_cache": {"enabled": False}, "speculative": on}}).plain
    assert "speculate  ngram: 150/300 draft tokens accepted (50.0%) in 40 drafts" in text
    idle = cache_text({"engine": {"prefix_cache": {"enabled": False},
                                  "speculative": dict(on, active=False)}}).plain
    assert "off for this model" in idle
    assert "speculate" not in cache_text({"engine": {"speculative": {"mode": "off", "active": False}}}).plain
