"""`mlxctl top` (TopApp) driven by Textual's pilot against a real daemon on the SmolLM2 engine."""

from __future__ import annotations

import dataclasses
import html
import re
import subprocess
import sys
import time

import httpx
import pytest

from mlxctl.server.app import init_app
from mlxctl.server.runner import BackgroundServer, free_port
from mlxctl.server.settings import ServeSettings
from mlxctl.tui.client import Poll, parse_metrics
from mlxctl.tui.client import base_url as parse_base_url
from mlxctl.tui.stats import Tracker
from mlxctl.tui.top import DISCONNECTED, TopApp
from tests.cli.helpers import REPO, clean_env

MODEL = "smollm2-135m"
SIZE = (110, 34)
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

        await pilot.press("r")  # reset clears the history; polling goes on
        assert len(app.tracker.throughput) <= 1  # a poll may land right after the reset
        polls = app.tracker.polls
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
async def test_screenshot_shows_every_panel(base_url, tmp_path):
    app = TopApp(url=base_url, interval=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await chat(base_url, max_tokens=8)
        assert await until(pilot, lambda: "done 1" in text_of(app, "#header") and app.tracker.ttft_ms)
        await pilot.pause()
        path = app.save_screenshot(filename="top.svg", path=str(tmp_path))
    svg = (tmp_path / "top.svg").read_text()
    assert svg.lstrip().startswith("<svg")
    shown = svg_text(svg)
    for text in (MODEL, "● loaded", "done 1", "Requests: 0 running", "generated/max", "tok/s",
                 "Output tok/s", "TTFT ms", "Prefix cache", "hit rate", "Memory", "active",
                 "Quit", "Pause", "Reset"):
        assert text in shown, (text, path)


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
