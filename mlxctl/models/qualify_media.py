"""Scorecards for the catalog's non-chat models: embeddings, speech to text, text to speech.

Each kind gets the checks that mean something for it, run in process on the real model:

- embed: loads; deterministic (the same text twice gives the same vector); semantic sense (two
  paraphrases are closer than an unrelated sentence); throughput (texts/s).
- stt: loads; a clip spoken by espeak-ng is transcribed with its words; deterministic; speed
  (real-time factor). Skipped, not failed, when espeak-ng is missing.
- tts: loads; "Hello world." gives non-silent audio of a plausible length; speed (real-time
  factor); and, when a Whisper model is available, the speech transcribed back contains "hello".
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mlxctl.models.qualify import Check, Scorecard

PARAPHRASES = ("A man is eating food.", "A man is eating a piece of bread.", "The stock market fell sharply today.")
SPOKEN = "hello world, this is a test"


def qualify_kind(kind: str, ref: str, progress: Callable[[str], None] | None = None) -> Scorecard:
    card = Scorecard(model=ref, target="in-process")
    run = {"embed": _embed, "stt": _stt, "tts": _tts}[kind]
    run(ref, card, progress)
    return card


def _timed(card: Scorecard, name: str, fn: Callable[[], tuple[str, str]]) -> bool:
    start = time.perf_counter()
    try:
        status, detail = fn()
    except Exception as exc:  # noqa: BLE001 - a check that raises is a failed check, reported
        status, detail = "fail", f"{type(exc).__name__}: {getattr(exc, 'message', exc)}"
    card.checks.append(Check(name, status, detail, round(time.perf_counter() - start, 3)))
    return status != "fail"


def _skip_rest(card: Scorecard, names: tuple[str, ...]) -> None:
    card.checks += [Check(n, "skip", "the model did not load") for n in names]


# -- embeddings ---------------------------------------------------------------------------------


def _embed(ref: str, card: Scorecard, progress) -> None:
    from mlxctl.embed.model import Embedder
    from mlxctl.embed.resolve import resolve_embedding_model

    box: dict[str, Any] = {}

    def load():
        name, folder = resolve_embedding_model(ref, progress=progress)
        box["model"] = Embedder.load(folder, name)
        return "pass", f"{name}: {box['model'].max_tokens} tokens at most"

    if not _timed(card, "loads", load):
        return _skip_rest(card, ("deterministic", "semantic sense", "speed"))
    model = box["model"]

    def vectors(texts):
        return model.embed(model.prepare(list(texts), truncate=False).ids)

    def deterministic():
        a, b = vectors(PARAPHRASES[:1]), vectors(PARAPHRASES[:1])
        return ("pass", "identical vectors") if np.allclose(a, b, atol=1e-6) else ("fail", "two runs differ")

    def sense():
        v = vectors(PARAPHRASES)
        v = v / np.linalg.norm(v, axis=1, keepdims=True)
        close, far = float(v[0] @ v[1]), float(v[0] @ v[2])
        detail = f"cos(paraphrase) {close:.3f} > cos(unrelated) {far:.3f}"
        return ("pass" if close > far else "fail"), detail

    def speed():
        texts = [f"{PARAPHRASES[i % 3]} ({i})" for i in range(32)]
        start = time.perf_counter()
        vectors(texts)
        rate = len(texts) / (time.perf_counter() - start)
        card.metrics["texts_per_s"] = round(rate, 1)
        return "pass", f"{rate:.1f} texts/s"

    for name, fn in (("deterministic", deterministic), ("semantic sense", sense), ("speed", speed)):
        _timed(card, name, fn)


# -- speech to text -----------------------------------------------------------------------------


def _speak_clip(text: str) -> np.ndarray | None:
    """16 kHz mono float32 speech from espeak-ng, or None when it is not installed."""
    if shutil.which("espeak-ng") is None:
        return None
    from mlxctl.audio.decode import read_audio_file

    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "clip.wav"
        subprocess.run(["espeak-ng", "-v", "en-us", "-s", "110", "-w", str(wav), text], check=True, capture_output=True,
                       timeout=60)
        return read_audio_file(wav)


def _stt(ref: str, card: Scorecard, progress) -> None:
    from mlxctl.audio.models import resolve_stt
    from mlxctl.audio.transcribe import load_whisper

    box: dict[str, Any] = {}

    def load():
        folder = resolve_stt(ref, progress=progress)
        box["model"] = load_whisper(folder.path, folder.name)
        return "pass", folder.name

    if not _timed(card, "loads", load):
        return _skip_rest(card, ("transcribes speech", "deterministic", "speed"))
    clip = _speak_clip(SPOKEN)
    if clip is None:
        card.checks += [Check(n, "skip", "espeak-ng is not installed (it speaks the test clip)")
                        for n in ("transcribes speech", "deterministic", "speed")]
        return

    def text_of() -> str:
        return " ".join(s.text for s in box["model"].transcribe(clip)).strip()

    def words():
        start = time.perf_counter()
        heard = text_of()
        seconds = time.perf_counter() - start
        box["heard"], card.metrics["real_time_factor"] = heard, round(seconds / (len(clip) / 16000), 2)
        ok = all(w in heard.lower() for w in ("hello", "test"))
        return ("pass" if ok else "fail"), f"heard {heard!r} for {SPOKEN!r}"

    def deterministic():
        again = text_of()
        return ("pass", "identical text") if again == box.get("heard") else ("fail", f"then {again!r}")

    def speed():
        rtf = card.metrics.get("real_time_factor")
        return ("pass", f"took {rtf}x the clip's duration") if rtf is not None else ("skip", "no transcription")

    for name, fn in (("transcribes speech", words), ("deterministic", deterministic), ("speed", speed)):
        _timed(card, name, fn)


# -- text to speech -----------------------------------------------------------------------------


def _tts(ref: str, card: Scorecard, progress) -> None:
    from mlxctl.audio.models import resolve_tts
    from mlxctl.audio.speak import load_kokoro

    box: dict[str, Any] = {}

    def load():
        folder = resolve_tts(ref, progress=progress)
        box["model"] = load_kokoro(folder.path, folder.name)
        return "pass", f"{folder.name}: {len(box['model'].voice_names)} voices"

    if not _timed(card, "loads", load):
        return _skip_rest(card, ("speaks", "speed", "heard back"))
    model = box["model"]

    def speaks():
        start = time.perf_counter()
        audio = np.concatenate([np.asarray(c, dtype=np.float32) for c in model.speak("Hello world.")])
        seconds = len(audio) / model.sample_rate
        card.metrics["real_time_factor"] = round((time.perf_counter() - start) / max(seconds, 1e-6), 2)
        rms = float(np.sqrt(np.mean(audio ** 2))) if len(audio) else 0.0
        box["audio"] = audio
        ok = rms > 0.01 and 0.4 < seconds < 6.0
        return ("pass" if ok else "fail"), f"{seconds:.2f} s of audio, RMS {rms:.3f}"

    def speed():
        rtf = card.metrics.get("real_time_factor")
        return ("pass", f"took {rtf}x the audio's duration") if rtf is not None else ("skip", "no audio")

    def heard_back():
        if "audio" not in box:
            return "skip", "no audio"
        from mlxctl.audio.models import resolve_stt
        from mlxctl.audio.transcribe import load_whisper

        try:
            folder = resolve_stt(None, progress=progress)
        except Exception as exc:  # noqa: BLE001 - no Whisper here: nothing to check with
            return "skip", f"no Whisper model to listen with ({getattr(exc, 'message', exc)})"
        audio = _resample(box["audio"], model.sample_rate, 16000)
        heard = " ".join(s.text for s in load_whisper(folder.path, folder.name).transcribe(audio)).strip()
        return ("pass" if "hello" in heard.lower() else "fail"), f"Whisper heard {heard!r}"

    for name, fn in (("speaks", speaks), ("speed", speed), ("heard back", heard_back)):
        _timed(card, name, fn)


def _resample(audio: np.ndarray, rate: int, target: int) -> np.ndarray:
    if rate == target:
        return audio
    positions = np.arange(0, len(audio), rate / target)
    return np.interp(positions, np.arange(len(audio)), audio).astype(np.float32)
