"""mp3, opus, aac and flac encoded in-process by PyAV, chunk by chunk, and read back by PyAV and by
mlxctl's own decoder (no model needed: a tone stands in for speech)."""

from __future__ import annotations

import io

import numpy as np
import pytest

from mlxctl.audio.decode import decode_audio
from mlxctl.audio.encode import ENCODED, Encoder, encode_all
from mlxctl.errors import BadInputError

av = pytest.importorskip("av")

RATE = 24000
# format -> (FFmpeg's demuxer name, decoder name, sample rate it decodes to)
EXPECTED = {"mp3": ("mp3", "mp3float", 24000), "opus": ("ogg", "opus", 48000), "aac": ("aac", "aac", 24000),
            "flac": ("flac", "flac", 24000)}


def tone(seconds: float, hz: float = 440.0, rate: int = RATE) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.4 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def read_back(data: bytes) -> tuple[np.ndarray, int, str, str]:
    """Mono float samples, rate, demuxer and decoder names of an encoded file, as PyAV reads it."""
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        to_float = av.AudioResampler(format="fltp", layout="mono", rate=stream.rate)
        frames = [r.to_ndarray()[0] for f in container.decode(stream) for r in to_float.resample(f)]
        return np.concatenate(frames), stream.rate, container.format.name, stream.codec_context.name


def peak_hz(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(samples.size)))
    return float(np.argmax(spectrum) * rate / samples.size)


@pytest.mark.parametrize("fmt", list(ENCODED))
def test_chunks_stream_out_and_decode_back_to_the_tone(fmt):
    encoder = Encoder(fmt, RATE)
    chunks = [encoder.encode(part) for part in np.array_split(tone(1.5), 3)]
    tail = encoder.finish()
    assert all(chunks), [len(c) for c in chunks]  # every half second gave bytes: the audio streams
    assert encoder.finish() == b""  # finishing twice adds nothing
    samples, rate, demuxer, codec = read_back(b"".join(chunks) + tail)
    assert (demuxer, codec, rate) == EXPECTED[fmt]
    assert abs(samples.size / rate - 1.5) < 0.1, samples.size / rate  # codec padding is a few frames
    assert abs(peak_hz(samples, rate) - 440) < 5
    middle = samples[rate // 4 : -rate // 4]
    assert abs(np.sqrt(np.mean(middle**2)) - 0.4 / np.sqrt(2)) < 0.03  # the level survives
    assert ENCODED[fmt].media_type.startswith("audio/")


@pytest.mark.parametrize("fmt", list(ENCODED))
def test_mlxctl_decodes_every_format_it_encodes(fmt):
    samples = decode_audio(encode_all(tone(1.0, hz=300), fmt, RATE), name=f"x.{fmt}")
    assert samples.dtype == np.float32 and samples.ndim == 1
    assert abs(samples.size / 16000 - 1.0) < 0.1
    assert abs(peak_hz(samples, 16000) - 300) < 5


def test_loud_samples_are_clipped_not_wrapped():
    samples, rate, _, _ = read_back(encode_all(np.full(RATE, 3.0, dtype=np.float32), "flac", RATE))
    assert samples.max() <= 1.0 and samples[rate // 2] > 0.99  # flac is lossless: +1.0, not a wrapped negative


def test_unknown_format_and_an_abandoned_encoder():
    with pytest.raises(BadInputError, match="unknown compressed audio format 'wma'"):
        Encoder("wma", RATE)
    encoder = Encoder("mp3", RATE)
    encoder.encode(tone(0.2))
    encoder.close()  # a client that left: no error, and nothing more to take
    assert encoder.finish() == b""
    assert Encoder("opus", RATE).encode(np.zeros(0, dtype=np.float32)) == b""


class _Watched:
    """A real output container that records its close (PyAV's own objects take no attributes)."""

    def __init__(self, container):
        self.container, self.closes = container, 0

    def __getattr__(self, name):
        return getattr(self.container, name)

    def close(self) -> None:
        self.closes += 1
        self.container.close()


@pytest.fixture
def watched(monkeypatch) -> list[_Watched]:
    """Every container av.open makes from here on, watched."""
    made: list[_Watched] = []
    real_open = av.open

    def open_watched(*args, **kwargs):
        made.append(_Watched(real_open(*args, **kwargs)))
        return made[-1]

    monkeypatch.setattr(av, "open", open_watched)
    return made


def test_a_failed_setup_closes_the_container(watched, monkeypatch):
    def no_resampler(*args, **kwargs):
        raise ValueError("no resampler")

    monkeypatch.setattr(av, "AudioResampler", no_resampler)
    with pytest.raises(ValueError, match="no resampler"):
        Encoder("flac", RATE)
    assert len(watched) == 1 and watched[0].closes == 1


def test_a_failed_flush_still_closes_the_container(watched):
    encoder = Encoder("mp3", RATE)
    encoder.encode(tone(0.2))

    def broken(frame):
        raise RuntimeError("flush failed")

    encoder._mux = broken  # the resampler or encoder failing as the file is finished
    with pytest.raises(RuntimeError, match="flush failed"):
        encoder.finish()
    assert watched[0].closes == 1
    encoder.close()  # already released: nothing more happens
    assert encoder.finish() == b"" and watched[0].closes == 1
