"""POST /v1/audio/transcriptions through the official openai client, and its errors."""

from __future__ import annotations

import dataclasses

import httpx
import pytest

from mlxctl.server.app import init_app
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings

openai = pytest.importorskip("openai")


def start(engine, **settings) -> BackgroundServer:
    return BackgroundServer(init_app(engine, dataclasses.replace(ServeSettings(model_name="smollm2-135m"),
                                                                 **settings))).start()


@pytest.fixture(scope="module")
def stt_url(smollm2_engine, tiny_whisper):
    """A server whose --stt-model is the converted tiny.en (loaded at start on its own thread)."""
    server = start(smollm2_engine, stt_model=str(tiny_whisper.path))
    yield server.url
    server.stop()


@pytest.fixture(scope="module")
def small_url(smollm2_engine):
    """A server with a 20 kB body limit and no --stt-model (nothing loads unless transcribing)."""
    server = start(smollm2_engine, max_body_bytes=20_000)
    yield server.url
    server.stop()


def client(url: str):
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def test_json_transcription(stt_url, speech):
    with open(speech.path, "rb") as f:
        result = client(stt_url).audio.transcriptions.create(model="whisper-1", file=f)
    speech.check(result.text)
    assert result.usage.type == "duration" and result.usage.seconds >= 1


def test_streaming_sends_deltas_then_done(stt_url, speech):
    with open(speech.path, "rb") as f:
        events = list(client(stt_url).audio.transcriptions.create(model="whisper-1", file=f, stream=True))
    kinds = [e.type for e in events]
    assert kinds[-1] == "transcript.text.done" and set(kinds[:-1]) <= {"transcript.text.delta"}
    assert len(kinds) > 1 or not speech.spoken
    assert "".join(e.delta for e in events[:-1]) == events[-1].text
    speech.check(events[-1].text)


def _post(url: str, files=None, data=None, **kwargs) -> httpx.Response:
    return httpx.post(f"{url}/v1/audio/transcriptions", files=files, data=data, timeout=60, **kwargs)


def _error(response: httpx.Response, status: int, param: str | None = None) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["type"] and error["param"] == param
    return error["message"]


def test_bad_requests_are_openai_errors(small_url, tmp_path):
    from tests.audio.conftest import tone, write_wav

    wav = write_wav(tmp_path / "t.wav", tone(0.3)).read_bytes()  # 9.6 kB
    assert "'file'" in _error(_post(small_url, files={"model": (None, "whisper-1")}), 400, "file")
    assert "multipart" in _error(httpx.post(f"{small_url}/v1/audio/transcriptions", json={"file": "x"}), 400)
    bad = [({"response_format": "docx"}, "response_format"), ({"language": "klingon"}, "language"),
           ({"temperature": "hot"}, "temperature"), ({"temperature": "3"}, "temperature"),
           ({"timestamp_granularities[]": "word"}, "timestamp_granularities[]"),
           ({"stream": "true", "response_format": "srt"}, "stream"), ({"frobnicate": "1"}, "frobnicate")]
    for fields, param in bad:
        _error(_post(small_url, files={"file": ("t.wav", wav)}, data=fields), 400, param)
    message = _error(_post(small_url, files={"file": ("t.wav", wav)}, data={"model": "gpt-9"}), 404, "model")
    assert "whisper-tiny-en" in message
    message = _error(_post(small_url, files={"file": ("junk.mp4", b"\x01\x02" * 2000)}), 400, "file")
    assert "cannot decode junk.mp4" in message


def test_uploads_over_the_body_limit_get_413(small_url, tmp_path):
    from tests.audio.conftest import tone, write_wav

    big = write_wav(tmp_path / "big.wav", tone(1.0)).read_bytes()  # 32 kB > 20 kB
    assert "too large" in _error(_post(small_url, files={"file": ("big.wav", big)}), 413)

    def chunks():  # no Content-Length: counted while read
        body = (b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.wav\"\r\n\r\n" + big
                + b"\r\n--b--\r\n")
        for i in range(0, len(body), 4096):
            yield body[i : i + 4096]

    response = httpx.post(f"{small_url}/v1/audio/transcriptions", content=chunks(), timeout=60,
                          headers={"Content-Type": "multipart/form-data; boundary=b"})
    assert "over 20000 bytes" in _error(response, 413)
    with pytest.raises(openai.BadRequestError):
        client(small_url).audio.transcriptions.create(model="whisper-1", file=("x.wav", b"garbage" * 100))


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["text", "srt", "vtt", "verbose_json"])
def test_response_formats(stt_url, speech, fmt):
    speech.need_speech()
    with open(speech.path, "rb") as f:
        extra = {"timestamp_granularities": ["word", "segment"]} if fmt == "verbose_json" else {}
        result = client(stt_url).audio.transcriptions.create(model="whisper-1", file=f, response_format=fmt,
                                                             language="en", **extra)
    if fmt == "verbose_json":
        assert result.language == "english" and result.duration > 1
        assert result.segments and result.segments[0].start == 0.0
        assert result.words and all(w.start <= w.end for w in result.words)
        speech.check(result.text)
    elif fmt == "srt":
        assert result.startswith("1\n00:00:00,000 --> ")
        speech.check(result)
    elif fmt == "vtt":
        assert result.startswith("WEBVTT\n\n00:00:00.000 --> ")
        speech.check(result)
    else:
        speech.check(result)


@pytest.mark.slow
def test_chat_and_transcription_run_side_by_side(stt_url, speech):
    """The chat engine's thread and the speech-to-text thread use MLX at the same time."""
    speech.need_speech()
    from concurrent.futures import ThreadPoolExecutor

    def chat() -> str:
        reply = client(stt_url).chat.completions.create(
            model="smollm2-135m", messages=[{"role": "user", "content": "What is the capital of France?"}],
            max_tokens=24, temperature=0)
        return reply.choices[0].message.content

    def transcribe() -> str:
        with open(speech.path, "rb") as f:
            return client(stt_url).audio.transcriptions.create(model="whisper-1", file=f).text

    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(transcribe), pool.submit(chat), pool.submit(chat), pool.submit(transcribe)]
        results = [f.result(timeout=300) for f in futures]
    assert all("Paris" in r for r in results[1:3])
    speech.check(results[0])
    assert results[3] == results[0]  # one at a time on the model's thread: the same greedy text
