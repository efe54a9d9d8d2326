"""Live input without a model: PCM/WAV bytes cut anywhere, windows cut at quiet points, and the
transcript's offsets and prompt carried from window to window (a fake Whisper records them)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import pytest

from mlxctl.audio.live import LiveInput, LiveTranscript, Windower, quiet_cut, to_whisper_rate
from mlxctl.audio.pcm_stream import PcmStream
from mlxctl.audio.transcribe import Segment
from mlxctl.errors import BadInputError

RATE = 16000


def noise(seconds: float, level: float = 0.3, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(int(seconds * RATE)) * level).astype(np.float32)


def bursts(pattern: list[tuple[float, bool]]) -> np.ndarray:
    """Loud noise (speech) and near-silence (pauses) in turn: (seconds, loud)."""
    return np.concatenate([noise(s, 0.3 if loud else 0.002, seed=i) for i, (s, loud) in enumerate(pattern)])


def wav_header(rate: int = RATE, channels: int = 1, bits: int = 16, tag: int = 1, size: int = 0xFFFFFFFF,
               extra: bytes = b"") -> bytes:
    fmt = struct.pack("<HHIIHH", tag, channels, rate, rate * channels * bits // 8, channels * bits // 8, bits)
    return (b"RIFF" + struct.pack("<I", 0xFFFFFFFF) + b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
            + extra + b"data" + struct.pack("<I", size))


def pieces(data: bytes, sizes: tuple[int, ...] = (1, 3, 7, 500, 2)) -> list[bytes]:
    out, at, i = [], 0, 0
    while at < len(data):
        out.append(data[at : at + sizes[i % len(sizes)]])
        at, i = at + sizes[i % len(sizes)], i + 1
    return out


def test_quiet_cut_finds_the_pause():
    signal = bursts([(2.0, True), (0.3, False), (0.7, True)])  # pause at 2.0-2.3 s
    cut = quiet_cut(signal, RATE, int(1.5 * RATE), signal.size)
    assert 2.0 * RATE <= cut <= 2.3 * RATE
    loud = noise(3.0)
    assert int(2.0 * RATE) <= quiet_cut(loud, RATE, int(2.0 * RATE), loud.size) <= loud.size  # no pause: still inside
    assert quiet_cut(loud, RATE, 100, 110) == 110  # a range under two frames: cut at its end


def test_windows_cover_the_input_and_end_in_pauses():
    signal = bursts([(3.6, True), (0.25, False), (3.5, True), (0.25, False), (2.0, True)])
    windower = Windower(RATE, chunk_s=4.0, search_s=1.0)
    windows = [w for chunk in np.array_split(signal, 37) for w in windower.push(chunk)] + windower.flush()
    assert np.array_equal(np.concatenate([w.samples for w in windows]), signal)
    assert [round(w.start * RATE) for w in windows[1:]] == [round(w.end * RATE) for w in windows[:-1]]
    first, second = windows[0], windows[1]
    assert 3.6 <= first.end <= 3.85 and 7.35 <= second.end <= 7.6, [w.end for w in windows]
    assert all(w.samples.size <= 4 * RATE for w in windows)
    assert windower.flush() == []


@pytest.mark.parametrize("sizes", [(1,), (3, 5), (4096,)])
def test_raw_pcm_cut_anywhere_gives_the_same_samples(sizes):
    ints = (np.sin(np.arange(4000) / 7) * 20000).astype("<i2")
    stream = PcmStream("pcm", RATE, 1)
    got = np.concatenate([stream.feed(p) for p in pieces(ints.tobytes(), sizes)])
    assert np.allclose(got, ints / 32768.0) and stream.frames == 4000 and stream.seconds == 4000 / RATE
    stereo = PcmStream("pcm", 8000, 2).feed(np.array([1000, 3000, -2000, 0], "<i2").tobytes() + b"\x01")
    assert np.allclose(stereo, [2000 / 32768, -1000 / 32768])  # mixed down; the odd byte waits


def test_wav_stream_header_split_at_every_byte():
    ints = np.arange(-500, 500, dtype="<i2")
    data = wav_header(rate=22050, extra=b"LIST" + struct.pack("<I", 5) + b"abcde\0") + ints.tobytes()
    for split in range(1, 60):
        stream = PcmStream("wav")
        got = np.concatenate([stream.feed(data[:split]), stream.feed(data[split:])])
        assert stream.rate == 22050 and np.allclose(got, ints / 32768.0), split
    sized = PcmStream("wav")  # a real data size: what follows the data (a trailing chunk) is not audio
    assert sized.feed(wav_header(size=8) + ints[:4].tobytes() + b"LIST\x04\0\0\0abcd").size == 4
    floats = np.array([0.5, -0.25, 0.125], "<f4")
    stream = PcmStream("wav")
    assert np.allclose(stream.feed(wav_header(bits=32, tag=3) + floats.tobytes()), floats)


@pytest.mark.parametrize("data, message", [
    (b"OggS" + bytes(40), "not a WAV stream"),
    (wav_header(rate=96000), "96000 Hz"),
    (wav_header(channels=12), "12 channels"),
    (wav_header(bits=24), "24-bit"),
    (b"RIFF\0\0\0\0WAVEdata\0\0\0\0", "no fmt chunk"),
])
def test_bad_wav_streams(data, message):
    with pytest.raises(BadInputError, match=message):
        PcmStream("wav").feed(data)


def test_incomplete_input_and_bad_layouts():
    stream = PcmStream("wav")
    stream.feed(b"RIFF")
    with pytest.raises(BadInputError, match="before its WAV header"):
        stream.finish()
    with pytest.raises(BadInputError, match="no audio"):
        PcmStream("wav").finish()
    with pytest.raises(BadInputError, match="4000 Hz"):
        PcmStream("pcm", 4000, 1)
    with pytest.raises(BadInputError, match="mp3"):
        PcmStream("mp3")
    assert to_whisper_rate(np.zeros(48000, np.float32), 48000).size in (16000, 16001)


@dataclass
class FakeRun:
    segments: list[Segment]
    language: str = "en"

    def __iter__(self):
        return iter(self.segments)


class FakeWhisper:
    """Says "word<n>" once per window, timed 0.5-1.5 s into it; records what it was given."""

    def __init__(self):
        self.calls: list[tuple[int, str | None, str | None]] = []

    def transcribe(self, audio, *, language=None, prompt=None, temperature=0.0):
        self.calls.append((audio.size, language, prompt))
        text = f" word{len(self.calls)}"
        return FakeRun([Segment(-1, 0, 0.5, 1.5, text, [], temperature, -0.1, 1.0, 0.0)])


def test_transcript_offsets_segments_and_carries_the_text():
    signal = bursts([(2.9, True), (0.2, False), (2.8, True), (0.3, False), (1.0, True), (2.0, False)])
    live = LiveInput(PcmStream("pcm", RATE, 1), chunk_s=3.0)
    windows = [w for p in pieces((signal * 32767).astype("<i2").tobytes(), (3200,)) for w in live.feed(p)]
    windows += live.finish()
    whisper, transcript = FakeWhisper(), LiveTranscript(prompt="Glossary: Zyx.")
    for window in windows:
        transcript.transcribe(whisper, window)
    starts = [s.start for s in transcript.segments]
    assert [round(s - 0.5 - w.start, 3) for s, w in zip(starts, windows)] == [0.0] * len(starts)
    assert [s.id for s in transcript.segments] == list(range(len(starts)))
    assert whisper.calls[0][2] == "Glossary: Zyx." and whisper.calls[1][2] == "Glossary: Zyx. word1"
    assert whisper.calls[1][1] == "en"  # the language found in the first window is kept
    assert transcript.text == " ".join(f"word{i + 1}" for i in range(len(starts)))
    assert transcript.duration == pytest.approx(signal.size / RATE)


def test_silent_and_tiny_windows_are_not_transcribed():
    whisper, transcript = FakeWhisper(), LiveTranscript()
    live = LiveInput(PcmStream("pcm", RATE, 1), chunk_s=2.0)
    for window in live.feed(bytes(2 * RATE * 3)) + live.finish():  # 3 s of digital silence
        transcript.transcribe(whisper, window)
    assert whisper.calls == [] and transcript.segments == [] and transcript.duration == 3.0
