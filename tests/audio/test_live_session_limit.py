"""A live transcription session ends after a wall-clock limit, however slowly its audio trickles
in: ``idle_timeout_s`` restarts with each chunk and ``max_s`` counts audio seconds, so two bytes
every few seconds would otherwise hold the connection for ever."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time

import aiohttp
import pytest

from mlxctl.server.errors import ApiError
from mlxctl.server.views.live_params import LiveParams, session_limit
from mlxctl.server.views.transcription_stream import run_session

BACKSTOP_S = 60  # only against a session that would never end: no test waits for it


class NoModel:
    """An SttService stand-in: each window transcribes to no segments."""

    async def call(self, fn, *args):
        return []


async def trickle(every_s: float, count: int | None = None):
    """Two bytes of silence every ``every_s`` seconds (``count`` times; None: for ever)."""
    sent = 0
    while count is None or sent < count:
        yield bytes(2)
        sent += 1
        await asyncio.sleep(every_s)


@pytest.mark.parametrize("max_s, request_timeout_s, expected", [
    (3600.0, 600.0, 600.0),  # the server's request timeout is shorter
    (3600.0, 1e9, 7200.0),  # twice the audio limit
    (10.0, 600.0, 60.0),  # at least a minute
    (1.0, 0.5, 0.5),  # but never past the request timeout
])
def test_the_limit(max_s, request_timeout_s, expected):
    assert session_limit(max_s, request_timeout_s) == expected


def test_a_trickling_session_ends_at_its_limit():
    params = LiveParams(format="pcm", session_s=0.4)
    events: list[dict] = []

    async def emit(event: dict) -> None:
        events.append(event)

    async def go() -> ApiError:
        with pytest.raises(ApiError) as caught:
            await asyncio.wait_for(run_session(NoModel(), params, trickle(0.05), emit), BACKSTOP_S)
        return caught.value

    started = time.monotonic()
    err = asyncio.run(go())
    elapsed = time.monotonic() - started
    assert err.status == 408 and err.code == "session_too_long" and err.param == "max_s"
    assert "longer than its limit of 0.4 s" in err.message
    assert elapsed >= 0.35 and events == []  # not cut short (how long past its limit is not checked)


def test_a_session_within_its_limit_is_done():
    events: list[dict] = []

    async def emit(event: dict) -> None:
        events.append(event)

    params = LiveParams(format="pcm", session_s=BACKSTOP_S)  # ends with its audio, long before this
    asyncio.run(run_session(NoModel(), params, trickle(0.01, 5), emit))
    assert [e["type"] for e in events] == ["transcript.text.done"]


def test_the_server_ends_a_trickle_at_its_request_timeout(smollm2_engine, tiny_whisper):
    from mlxctl.server.app import init_app
    from mlxctl.server.runner import BackgroundServer
    from mlxctl.server.settings import ServeSettings

    settings = dataclasses.replace(ServeSettings(model_name="smollm2-135m"), stt_model=str(tiny_whisper.path),
                                   request_timeout_s=1.5)
    server = BackgroundServer(init_app(smollm2_engine, settings)).start()

    async def go(url: str) -> tuple[int, dict]:
        async with aiohttp.ClientSession() as session, session.post(
                url, params={"format": "pcm", "idle_timeout_s": "1"}, data=trickle(0.3, 40)) as resp:
            return resp.status, json.loads(await resp.text())

    try:
        status, body = asyncio.run(go(server.url + "/v1/audio/transcriptions/stream"))
    finally:
        server.stop()
    assert status == 408, body
    assert body["error"]["code"] == "session_too_long" and "1.5 s" in body["error"]["message"]
