"""The query parameters of /v1/audio/transcriptions/stream, checked one by one.

The request body is the audio itself, so everything else comes in the query string; a bad or
unknown parameter is a 400 in OpenAI's error shape whose ``param`` names it, before any audio
is read. The session's wall-clock limit (:func:`session_limit`) is derived, not a parameter:
``idle_timeout_s`` restarts with every chunk and ``max_s`` counts audio seconds, so without it a
client sending two bytes every few seconds would hold the connection open for ever.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from mlxctl.audio.live import CHUNK_S
from mlxctl.audio.pcm_stream import FORMATS, MAX_CHANNELS, RATES
from mlxctl.errors import MlxctlError
from mlxctl.server.errors import ApiError

MAX_S = 3600.0  # the longest live input (max_s may lower it)
IDLE_S = (1.0, 30.0, 600.0)  # seconds without audio before the stream is dropped: least, default, most
MIN_SESSION_S = 60.0  # the shortest wall-clock limit a session gets, however small max_s is
NAMES = ("format", "sample_rate", "channels", "chunk_s", "language", "prompt", "temperature", "model",
         "max_s", "idle_timeout_s")
N = TypeVar("N", int, float)


@dataclass
class LiveParams:
    format: str = "wav"
    sample_rate: int = 16000
    channels: int = 1
    chunk_s: float = CHUNK_S[1]
    language: str | None = None
    prompt: str | None = None
    temperature: float = 0.0
    model: str | None = None
    max_s: float = MAX_S
    idle_s: float = IDLE_S[1]
    session_s: float = 2 * MAX_S  # wall-clock seconds the session may last (set by session_limit)


def session_limit(max_s: float, request_timeout_s: float) -> float:
    """Wall-clock seconds a live session may last: twice its audio limit (live audio arrives in
    real time; the rest is room for a slow sender and the transcription), at least a minute, and
    never longer than the server's request timeout (serve --request-timeout)."""
    return min(max(2 * max_s, MIN_SESSION_S), request_timeout_s)


def read_params(query: Mapping[str, str]) -> LiveParams:
    from mlxctl.audio.transcribe import language_code

    for name in query:
        if name not in NAMES:
            raise ApiError(400, f"unsupported parameter '{name}': mlxctl does not implement it "
                                f"(known: {', '.join(NAMES)})", param=name)
    params = LiveParams(model=query.get("model") or None, prompt=query.get("prompt") or None)
    params.format = (query.get("format") or "wav").strip().lower()
    if params.format not in FORMATS:
        raise ApiError(400, f"invalid parameter 'format': {params.format!r} is not wav or pcm", param="format")
    for name in ("sample_rate", "channels"):
        if name in query and params.format == "wav":
            raise ApiError(400, f"invalid parameter '{name}': a WAV stream's header gives it (use it with "
                                "format=pcm)", param=name)
    params.sample_rate = _number(query, "sample_rate", int, RATES[0], RATES[1], params.sample_rate)
    params.channels = _number(query, "channels", int, 1, MAX_CHANNELS, params.channels)
    params.chunk_s = _number(query, "chunk_s", float, CHUNK_S[0], CHUNK_S[2], params.chunk_s)
    params.temperature = _number(query, "temperature", float, 0.0, 1.0, params.temperature)
    params.max_s = _number(query, "max_s", float, 1.0, MAX_S, params.max_s)
    params.idle_s = _number(query, "idle_timeout_s", float, IDLE_S[0], IDLE_S[2], params.idle_s)
    try:
        params.language = language_code(query.get("language"))
    except MlxctlError as err:
        raise ApiError(400, f"invalid parameter 'language': {err.message}", param="language") from err
    return params


def _number(query: Mapping[str, str], name: str, kind: Callable[[str], N], lo: N, hi: N, default: N) -> N:
    raw = query.get(name)
    if raw is None:
        return default
    try:
        value = kind(raw.strip())
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise ApiError(400, f"invalid parameter '{name}': {raw!r} is not {what}", param=name) from None
    if not lo <= value <= hi:
        raise ApiError(400, f"invalid parameter '{name}': must be between {lo:g} and {hi:g}", param=name)
    return value
