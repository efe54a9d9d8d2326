"""Transcripts as text, SRT subtitles, WebVTT subtitles or JSON.

Each format can be written a segment at a time (the CLI prints cues as they are decoded) or
whole (the server's response bodies). Segments are :class:`mlxctl.audio.transcribe.Segment`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

FORMATS = ("text", "srt", "vtt", "json")


class Timed(Protocol):
    start: float
    end: float
    text: str


def timestamp(seconds: float, separator: str = ".") -> str:
    """``HH:MM:SS.mmm`` (``,`` before the milliseconds for SRT); never negative."""
    ms = max(0, round(seconds * 1000))
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    secs, ms = divmod(ms, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{separator}{ms:03d}"


def cue_text(text: str) -> str:
    """A segment's text on one line, without the space Whisper puts before it."""
    return " ".join(text.split())


def srt_cue(index: int, segment: Timed) -> str:
    """One SRT cue (``index`` counts from 1), ending in a blank line."""
    times = f"{timestamp(segment.start, ',')} --> {timestamp(segment.end, ',')}"
    return f"{index}\n{times}\n{cue_text(segment.text)}\n\n"


VTT_HEADER = "WEBVTT\n\n"


def vtt_cue(segment: Timed) -> str:
    """One WebVTT cue, ending in a blank line; ``&``, ``<`` and ``>`` are escaped as VTT requires."""
    text = cue_text(segment.text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return f"{timestamp(segment.start)} --> {timestamp(segment.end)}\n{text}\n\n"


def srt(segments: Iterable[Timed]) -> str:
    return "".join(srt_cue(i, s) for i, s in enumerate(spoken(segments), start=1))


def vtt(segments: Iterable[Timed]) -> str:
    return VTT_HEADER + "".join(vtt_cue(s) for s in spoken(segments))


def joined_text(segments: Iterable[Timed]) -> str:
    """The transcript as one string (segments joined as Whisper spaced them)."""
    return "".join(s.text for s in segments).strip()


def spoken(segments: Iterable[Timed]) -> list[Timed]:
    """The segments with any text (subtitles skip empty cues)."""
    return [s for s in segments if s.text.strip()]


def segment_json(segment: Any, *, full: bool = False) -> dict:
    """A segment as JSON: id, start, end and text; with ``full`` also Whisper's decoding figures
    (the fields of OpenAI's ``verbose_json`` segments)."""
    data = {"id": segment.id, "start": round(segment.start, 3), "end": round(segment.end, 3), "text": segment.text}
    if full:
        data.update(seek=segment.seek, tokens=list(segment.tokens), temperature=segment.temperature,
                    avg_logprob=segment.avg_logprob, compression_ratio=segment.compression_ratio,
                    no_speech_prob=segment.no_speech_prob)
    return data
