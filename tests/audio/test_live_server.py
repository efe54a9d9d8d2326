"""Live transcription with the real tiny.en: a chunked POST (SSE back) and a WebSocket on a real
loopback server, and `mlxctl transcribe --live` reading a pipe. Each proves that text arrives
while audio is still being sent: the sender stops halfway until the first text event is in."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import threading
import wave

import aiohttp
import httpx
import numpy as np
import pytest

from mlxctl.server.app import init_app
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings

PATH = "/v1/audio/transcriptions/stream"
CHUNK = 4096  # bytes per piece sent
GAP_S = 0.01  # between pieces: audio arrives over time, as from a recorder


@dataclasses.dataclass
class Speech:
    pcm: bytes  # s16le mono: the clip, a pause, the clip again
    rate: int
    half: int  # bytes past the first clip and its pause: sent before waiting for text


@pytest.fixture(scope="module")
def speech_pcm(speech) -> Speech:
    speech.need_speech()
    with wave.open(str(speech.path)) as w:
        rate, clip = w.getframerate(), np.frombuffer(w.readframes(w.getnframes()), "<i2")
    pause = np.zeros(int(0.8 * rate), "<i2")
    half = (clip.size + pause.size + rate // 2) * 2
    return Speech(np.concatenate([clip, pause, clip]).tobytes(), rate, half)


@pytest.fixture(scope="module")
def live_url(smollm2_engine, tiny_whisper):
    settings = dataclasses.replace(ServeSettings(model_name="smollm2-135m"), stt_model=str(tiny_whisper.path))
    server = BackgroundServer(init_app(smollm2_engine, settings)).start()
    yield server.url
    server.stop()


def chunk_s(speech: Speech) -> float:
    """A window a little longer than the clip and its pause: the cut lands in the pause."""
    return round(speech.half / 2 / speech.rate, 2)


def check(text: str, times: int = 2) -> None:
    lowered = text.lower()
    assert lowered.count("hello") >= times and lowered.count("test") >= times, text


async def _post_live(url: str, speech: Speech) -> tuple[list[dict], bool]:
    """Upload in pieces; after the first half, wait for the first text event before the rest."""
    first_text, done_sending = asyncio.Event(), False

    async def body():
        nonlocal done_sending
        for at in range(0, len(speech.pcm), CHUNK):
            if at >= speech.half and not first_text.is_set():
                await asyncio.wait_for(first_text.wait(), 120)  # fails the test if no text comes early
            yield speech.pcm[at : at + CHUNK]
            await asyncio.sleep(GAP_S)
        done_sending = True

    params = {"format": "pcm", "sample_rate": str(speech.rate), "chunk_s": str(chunk_s(speech))}
    events, early = [], False
    async with aiohttp.ClientSession() as session:
        async with session.post(url + PATH, params=params, data=body(),
                                timeout=aiohttp.ClientTimeout(total=300)) as resp:
            assert resp.status == 200 and resp.content_type == "text/event-stream"
            async for line in resp.content:
                if line.startswith(b"data: "):
                    events.append(json.loads(line[6:]))
                    if events[-1]["type"] == "transcript.text.delta" and not first_text.is_set():
                        early = not done_sending
                        first_text.set()
    return events, early


def test_chunked_post_streams_text_while_uploading(live_url, speech_pcm):
    events, early = asyncio.run(_post_live(live_url, speech_pcm))
    assert early, "the first text event came only after the whole upload"
    deltas, done = events[:-1], events[-1]
    assert done["type"] == "transcript.text.done" and {e["type"] for e in deltas} == {"transcript.text.delta"}
    assert "".join(e["delta"] for e in deltas) == done["text"]
    check(done["text"])
    assert [s["start"] for s in done["segments"]] == sorted(s["start"] for s in done["segments"])
    second = [s for s in done["segments"] if "hello" in s["text"].lower()][1]
    assert second["start"] >= speech_pcm.half / 2 / speech_pcm.rate - 1.0  # times count from the input's start
    assert done["usage"]["type"] == "duration" and done["duration"] > 5


async def _socket_live(url: str, speech: Speech) -> tuple[list[dict], bool]:
    events, sent_all = [], False
    async with aiohttp.ClientSession() as session:
        params = {"format": "wav", "chunk_s": str(chunk_s(speech))}
        async with session.ws_connect(url + PATH, params=params) as ws:
            header = _wav_header(speech.rate)
            await ws.send_bytes(header + speech.pcm[: speech.half])
            events.append(await asyncio.wait_for(ws.receive_json(), 120))  # text before the rest is sent
            for at in range(speech.half, len(speech.pcm), CHUNK):
                await ws.send_bytes(speech.pcm[at : at + CHUNK])
                await asyncio.sleep(GAP_S)
            await ws.send_str(json.dumps({"type": "end"}))
            sent_all = True
            async for message in ws:
                events.append(json.loads(message.data))
    return events, sent_all


def _wav_header(rate: int) -> bytes:
    import struct

    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    return b"RIFF\xff\xff\xff\xffWAVEfmt " + struct.pack("<I", 16) + fmt + b"data\xff\xff\xff\xff"


def test_websocket_streams_text_while_sending(live_url, speech_pcm):
    events, sent_all = asyncio.run(_socket_live(live_url, speech_pcm))
    assert sent_all and events[0]["type"] == "transcript.text.delta" and "hello" in events[0]["delta"].lower()
    assert events[-1]["type"] == "transcript.text.done"
    check(events[-1]["text"])


def _error(response: httpx.Response, status: int, param: str | None) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["type"]
    return error["message"]


def test_bad_live_requests_are_openai_errors(live_url, speech_pcm):
    url = live_url + PATH
    bad = [({"format": "mp3"}, "format"), ({"sample_rate": "16000"}, "sample_rate"),
           ({"format": "pcm", "sample_rate": "4000"}, "sample_rate"), ({"format": "pcm", "channels": "x"}, "channels"),
           ({"chunk_s": "0.1"}, "chunk_s"), ({"temperature": "nan"}, "temperature"), ({"language": "klingon"}, "language"),
           ({"language": "de"}, "language"), ({"frobnicate": "1"}, "frobnicate")]
    for params, param in bad:
        _error(httpx.post(url, params=params, content=b"", timeout=60), 400, param)
    assert "whisper-tiny-en" in _error(httpx.post(url, params={"model": "gpt-9"}, content=b"x"), 404, "model")
    message = _error(httpx.post(url, content=b"OggS" + bytes(4000), timeout=60), 400, None)
    assert "not a WAV stream" in message
    assert "no audio" in _error(httpx.post(url, content=b"", timeout=60), 400, None)
    too_long = httpx.post(url, params={"format": "pcm", "sample_rate": str(speech_pcm.rate), "max_s": "1"},
                          content=iter([speech_pcm.pcm[: speech_pcm.rate * 3]]), timeout=60)
    assert "longer than 1 s" in _error(too_long, 413, "max_s")
    assert "WebSocket" in _error(httpx.get(url, timeout=60), 400, None)


def test_idle_input_is_dropped(live_url):
    async def stall():
        yield bytes(3200)
        await asyncio.sleep(2.5)
        yield bytes(3200)

    async def go() -> tuple[int, str]:
        async with aiohttp.ClientSession() as session:
            async with session.post(live_url + PATH, params={"format": "pcm", "idle_timeout_s": "1"},
                                    data=stall()) as resp:
                return resp.status, await resp.text()

    status, text = asyncio.run(go())
    assert status == 408 and json.loads(text)["error"]["code"] == "idle_timeout"


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
def test_cli_live_prints_text_while_the_pipe_is_open(tiny_whisper, speech_pcm, tmp_path):
    env = {**os.environ, "MLXCTL_HOME": str(tmp_path / "home"), "MLXCTL_OFFLINE": "1"}
    command = [sys.executable, "-m", "mlxctl", "transcribe", "--live", "--raw-pcm", "--sample-rate",
               str(speech_pcm.rate), "--chunk-s", str(chunk_s(speech_pcm)), "-m", str(tiny_whisper.path), "-"]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdin.write(speech_pcm.pcm[: speech_pcm.half])
    proc.stdin.flush()
    first: list[bytes] = []
    reader = threading.Thread(target=lambda: first.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(120)  # the first line is printed while stdin is still open
    assert first and b"hello" in first[0].lower(), (first, proc.stderr.read1() if proc.poll() is not None else "")
    rest, err = proc.communicate(speech_pcm.pcm[speech_pcm.half :], timeout=120)
    assert proc.returncode == 0, err
    check((first[0] + rest).decode())


def test_cli_live_reads_a_wav_stream_into_json(tiny_whisper, speech_pcm):
    from tests.audio.test_cli import _Bytes, mlxctl

    stdin = _Bytes(_wav_header(speech_pcm.rate) + speech_pcm.pcm)
    status, out, err = mlxctl("transcribe", "--live", "--json", "--chunk-s", str(chunk_s(speech_pcm)),
                              "-m", str(tiny_whisper.path), "-", stdin=stdin)
    assert status == 0, err
    result = json.loads(out)
    check(result["text"])
    assert len(result["segments"]) >= 2 and result["segments"][-1]["start"] > 3.0
    assert result["duration"] == pytest.approx(len(speech_pcm.pcm) / 2 / speech_pcm.rate, abs=0.01)


def test_cli_live_bad_input_exits_4(tiny_whisper):
    from mlxctl.errors import ExitStatus
    from tests.audio.test_cli import _Bytes, mlxctl

    status, _, err = mlxctl("transcribe", "--live", "--sample-rate", "8000", "-", stdin=_Bytes(b""))
    assert status == ExitStatus.BAD_INPUT and "--raw-pcm" in err
    status, _, err = mlxctl("transcribe", "--live", "-m", str(tiny_whisper.path), "-", stdin=_Bytes(b"OggS" * 100))
    assert status == ExitStatus.BAD_INPUT and "not a WAV stream" in err


def test_audio_past_max_s_after_text_is_an_error_event(live_url, speech_pcm):
    async def go() -> list[dict]:
        async def body():
            for at in range(0, len(speech_pcm.pcm), CHUNK):
                yield speech_pcm.pcm[at : at + CHUNK]
                await asyncio.sleep(GAP_S)

        params = {"format": "pcm", "sample_rate": str(speech_pcm.rate), "chunk_s": str(chunk_s(speech_pcm)),
                  "max_s": "5"}
        async with aiohttp.ClientSession() as session:
            async with session.post(live_url + PATH, params=params, data=body()) as resp:
                assert resp.status == 200
                return [json.loads(line[6:]) async for line in resp.content if line.startswith(b"data: ")]

    events = asyncio.run(go())
    assert events[0]["type"] == "transcript.text.delta" and "hello" in events[0]["delta"].lower()
    assert events[-1]["type"] == "error" and events[-1]["error"]["code"] == "audio_too_long"
    assert events[-1]["error"]["param"] == "max_s"
