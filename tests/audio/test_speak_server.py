"""POST /v1/audio/speech and GET /v1/audio/voices through the official openai client, and their errors."""

# ruff: noqa: F811 (the Kokoro fixtures are imported from test_kokoro_convert and used as arguments)
from __future__ import annotations

import base64
import dataclasses
import io
import json
import shutil
import wave

import httpx
import numpy as np
import pytest

from mlxctl.server.app import init_app
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings
from tests.audio.test_kokoro_convert import kokoro_mlx  # noqa: F401 (fixture)

openai = pytest.importorskip("openai")
needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng")


@pytest.fixture(scope="module")
def tts_url(smollm2_engine, kokoro_mlx):
    """A server whose --tts-model is the converted kokoro-82m (loaded at start on its own thread)."""
    settings = dataclasses.replace(ServeSettings(model_name="smollm2-135m"), tts_model=str(kokoro_mlx.path))
    server = BackgroundServer(init_app(smollm2_engine, settings)).start()
    yield server.url
    server.stop()


def client(url: str):
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)


def samples_of(wav_bytes: bytes) -> tuple[np.ndarray, int]:
    with wave.open(io.BytesIO(wav_bytes)) as w:
        assert (w.getnchannels(), w.getsampwidth()) == (1, 2)
        # a streamed header says 0xFFFFFFFF: read what is there
        data = w.readframes(len(wav_bytes))
        return np.frombuffer(data, "<i2").astype(np.float32) / 32768.0, w.getframerate()


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x, dtype=np.float64))))


@needs_espeak
def test_speech_create_returns_a_wav(tts_url):
    result = client(tts_url).audio.speech.create(model="tts-1", voice="jf_alpha", input="Hello.",
                                                 response_format="wav")
    assert result.response.headers["content-type"] == "audio/wav"
    samples, rate = samples_of(result.content)
    assert rate == 24000 and 0.3 < samples.size / rate < 3.0 and rms(samples) > 0.01


@needs_espeak
def test_streaming_response_sends_pcm_chunks(tts_url):
    pieces = []
    with client(tts_url).audio.speech.with_streaming_response.create(
            model="kokoro-82m-mlx", voice={"id": "jm_kumo"}, input="Yes. No.", response_format="pcm",
            speed=1.2) as response:
        assert response.headers["content-type"] == "audio/pcm"
        pieces = list(response.iter_bytes())
    pcm = b"".join(pieces)
    assert len(pcm) % 2 == 0 and pcm[:4] != b"RIFF"
    samples = np.frombuffer(pcm, "<i2").astype(np.float32) / 32768.0
    assert 0.3 < samples.size / 24000 < 4.0 and rms(samples) > 0.01


@needs_espeak
def test_sse_sends_base64_deltas_then_done(tts_url):
    response = httpx.post(f"{tts_url}/v1/audio/speech", timeout=120,
                          json={"model": "tts-1", "input": "One. Two.", "stream_format": "sse"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "speech.audio.done" and set(kinds[:-1]) == {"speech.audio.delta"} and len(kinds) >= 3
    audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    samples, rate = samples_of(audio)  # the deltas together are one (streamed) WAV
    assert rate == 24000 and samples.size / rate > 0.3 and rms(samples) > 0.01
    assert events[-1]["usage"]["input_tokens"] > 0


def test_voices_are_listed(tts_url):
    body = httpx.get(f"{tts_url}/v1/audio/voices", timeout=60).json()
    assert body["voices"] == ["jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo"]
    assert body["default"] == "jf_alpha" and body["model"] == "kokoro-82m-mlx"
    assert body["data"][-1] == {"id": "jm_kumo", "name": "jm_kumo", "language": "ja", "gender": "male"}
    assert httpx.get(f"{tts_url}/v1/audio/voices", params={"model": "nope"}, timeout=60).status_code == 404


def _error(response: httpx.Response, status: int, param: str | None) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["param"] == param
    return error["message"]


@needs_espeak
def test_bad_requests_are_400s_naming_the_field(tts_url):
    def post(**body):
        return httpx.post(f"{tts_url}/v1/audio/speech", json=body, timeout=120)

    assert "jf_alpha, jf_gongitsune" in _error(post(input="hi", voice="alloy"), 400, "voice")
    assert "empty" in _error(post(input="   "), 400, "input")
    assert "nothing to speak" in _error(post(input="?!"), 400, "input")
    assert "limit of 4096" in _error(post(input="a" * 5000), 400, "input")
    message = _error(post(input="hi", response_format="docx"), 400, "response_format")
    assert "'docx'" in message and "wav, pcm, mp3, opus, aac, flac" in message
    assert _error(post(input="hi", speed=9), 400, "speed")
    assert _error(post(input="hi", stream_format="ws"), 400, "stream_format")
    assert _error(post(input="hi", instructions="whisper it"), 400, "instructions")
    assert _error(post(input="hi", frobnicate=1), 400, "frobnicate")
    assert _error(post(voice="jf_alpha"), 400, "input")
    assert "not found" in _error(post(input="hi", model="gpt-5"), 404, "model")
    with pytest.raises(openai.BadRequestError):
        client(tts_url).audio.speech.create(model="tts-1", voice="alloy", input="hi")


def read_encoded(data: bytes) -> tuple[np.ndarray, int, str]:
    """Mono float samples, sample rate and container of compressed audio, as PyAV decodes it."""
    import av

    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        to_float = av.AudioResampler(format="fltp", layout="mono", rate=stream.rate)
        frames = [r.to_ndarray()[0] for f in container.decode(stream) for r in to_float.resample(f)]
        return np.concatenate(frames), stream.rate, container.format.name


@pytest.fixture(scope="module")
def hello_wav_seconds(tts_url) -> float:
    """How long "Hello world." lasts as WAV: the compressed formats must last as long."""
    result = client(tts_url).audio.speech.create(model="tts-1", voice="jm_kumo", input="Hello world.",
                                                 response_format="wav")
    samples, rate = samples_of(result.content)
    return samples.size / rate


@needs_espeak
@pytest.mark.parametrize("fmt, media, container, rate", [
    ("mp3", "audio/mpeg", "mp3", 24000), ("opus", "audio/ogg", "ogg", 48000),
    ("aac", "audio/aac", "aac", 24000), ("flac", "audio/flac", "flac", 24000)])
def test_compressed_formats_are_encoded_in_process(tts_url, hello_wav_seconds, fmt, media, container, rate):
    with client(tts_url).audio.speech.with_streaming_response.create(
            model="tts-1", voice="jm_kumo", input="Hello world.", response_format=fmt) as response:
        assert response.headers["content-type"] == media
        data = b"".join(response.iter_bytes())
    samples, got_rate, got_container = read_encoded(data)
    assert (got_container, got_rate) == (container, rate)
    assert abs(samples.size / rate - hello_wav_seconds) < 0.15, (samples.size / rate, hello_wav_seconds)
    assert rms(samples) > 0.01


@needs_espeak
def test_sse_streams_mp3_a_sentence_at_a_time(tts_url):
    """Each sentence is encoded as it is synthesised: several deltas, the first already playable."""
    response = httpx.post(f"{tts_url}/v1/audio/speech", timeout=120,
                          json={"input": "One. Two.", "response_format": "mp3", "stream_format": "sse"})
    assert response.status_code == 200
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    assert [e["type"] for e in events][-1] == "speech.audio.done"
    deltas = [base64.b64decode(e["audio"]) for e in events[:-1]]
    assert len(deltas) >= 2 and all(deltas), [len(d) for d in deltas]
    first, _, _ = read_encoded(deltas[0])
    whole, rate, container = read_encoded(b"".join(deltas))
    assert container == "mp3" and rate == 24000
    assert 0.2 < first.size / rate < whole.size / rate - 0.2  # "One." alone, then "Two." after it


@pytest.mark.slow
@needs_espeak
def test_whisper_hears_the_mp3(tts_url, tiny_model):
    """The words survive Kokoro, the mp3 encoder, mlxctl's decoder and Whisper."""
    from mlxctl.audio.decode import decode_audio

    result = client(tts_url).audio.speech.create(model="tts-1", voice="jm_kumo", input="Hello world.",
                                                 response_format="mp3")
    assert result.response.headers["content-type"] == "audio/mpeg"
    transcript = tiny_model.transcribe(decode_audio(result.content, name="hello.mp3"), language="en")
    list(transcript)
    assert "hello" in transcript.text.lower() and "world" in transcript.text.lower(), transcript.text
