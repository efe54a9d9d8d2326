"""/v1/audio/transcriptions/stream: transcribe audio while it is still arriving.

Two transports over one session: ``POST`` with a chunked body (raw PCM or a WAV stream) answered
with server-sent events, for ``curl -T -`` and pipes; and a WebSocket at the same path (binary
messages are audio, ``{"type": "end"}`` ends the input), the shape realtime speech APIs use and
the only one browsers can stream into. The audio is cut into windows (``mlxctl.audio.live``);
each is transcribed on the speech-to-text model's own thread as soon as it is full, and its
segments go out as ``transcript.text.delta`` events with their times, then
``transcript.text.done``. Parameters travel in the query string, since the body is the audio.
Problems found before the first event are HTTP errors; later ones are an ``error`` event.
Besides ``max_s`` (audio seconds) and ``idle_timeout_s`` (between chunks), a session ends after
a wall-clock limit (``live_params.session_limit``), however the audio trickles in.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import WSMsgType, web

from mlxctl.audio.live import LiveInput, LiveTranscript
from mlxctl.audio.pcm_stream import PcmStream
from mlxctl.audio.transcribe import Segment
from mlxctl.errors import BadInputError, MlxctlError
from mlxctl.server.errors import ApiError
from mlxctl.server.keys import SETTINGS
from mlxctl.server.views.live_params import LiveParams, read_params, session_limit
from mlxctl.server.views.transcriptions import STT, SttService, check_model

log = logging.getLogger("mlxctl.server")
Emit = Callable[[dict], Awaitable[None]]


async def transcription_stream(request: web.Request) -> web.StreamResponse:
    """POST: a chunked audio body in, server-sent events out (headers sent with the first event)."""
    from mlxctl.server.sse import open_sse, send

    service, params = await _open(request)
    resp: web.StreamResponse | None = None

    async def emit(event: dict) -> None:
        nonlocal resp
        resp = resp or await open_sse(request)
        await send(resp, event, event=event["type"])

    try:
        await run_session(service, params, _body(request, params.idle_s), emit)
    except ApiError as err:
        if resp is None:
            raise
        await _send_error(emit, err)
    except ConnectionError:
        pass  # the client left: nothing more to send
    return resp or web.Response(status=204)


async def transcription_socket(request: web.Request) -> web.StreamResponse:
    """GET with a WebSocket upgrade: binary messages in, JSON text events out."""
    ws = web.WebSocketResponse(max_msg_size=4 << 20)
    if not ws.can_prepare(request).ok:
        raise ApiError(400, "this endpoint takes a WebSocket (GET with Upgrade: websocket), "
                            "or a POST with the audio as its body")
    service, params = await _open(request)
    await ws.prepare(request)
    try:
        await run_session(service, params, _messages(ws, params.idle_s), ws.send_json)
    except ApiError as err:
        await _send_error(ws.send_json, err)
        await ws.close(code=1011 if err.status >= 500 else 1008, message=err.code.encode() if err.code else b"")
    except ConnectionError:
        pass
    await ws.close()
    return ws


async def _open(request: web.Request) -> tuple[SttService, LiveParams]:
    """The parameters checked and the model loaded: every error here is still an HTTP status."""
    params = read_params(request.query)
    params.session_s = session_limit(params.max_s, request.app[SETTINGS].request_timeout_s)
    service: SttService = request.app[STT]
    check_model(service, params.model)

    try:
        await service.call(lambda whisper: whisper.check_language(params.language))  # loads it (503 if not)
    except MlxctlError as err:
        raise ApiError(400, f"invalid parameter 'language': {err.message}", param="language") from err
    return service, params


async def run_session(service: SttService, params: LiveParams, chunks: AsyncIterator[bytes], emit: Emit) -> None:
    """Feed the chunks to the windower; transcribe each full window; emit its segments; done.
    All of it within ``params.session_s`` seconds of wall-clock time."""
    live = LiveInput(PcmStream(params.format, params.sample_rate, params.channels), params.chunk_s)
    transcript = LiveTranscript(params.language, params.prompt, params.temperature)
    try:
        async with asyncio.timeout(params.session_s):
            await _feed(service, params, chunks, emit, live, transcript)
    except TimeoutError:  # only this limit's: _feed turns every other failure into an ApiError
        raise ApiError(408, f"the session lasted longer than its limit of {params.session_s:g} s (twice max_s, "
                            "at least 60 s, at most the server's request timeout)", param="max_s",
                       code="session_too_long") from None
    segments = [{"id": s.id, "start": s.start, "end": s.end, "text": s.text} for s in transcript.segments]
    await emit({"type": "transcript.text.done", "text": transcript.text, "logprobs": None,
                "duration": round(live.seconds, 3), "segments": segments,
                "usage": {"type": "duration", "seconds": max(1, math.ceil(live.seconds))}})


async def _feed(service: SttService, params: LiveParams, chunks: AsyncIterator[bytes], emit: Emit,
                live: LiveInput, transcript: LiveTranscript) -> None:
    async def transcribe(windows: list) -> None:
        for window in windows:
            for segment in await service.call(transcript.transcribe, window):
                await emit(_delta(segment, first=segment.id == 0))

    try:
        async for data in chunks:
            await transcribe(live.feed(data))
            if live.seconds > params.max_s:
                raise ApiError(413, f"the audio is longer than {params.max_s:g} s (max_s)", param="max_s",
                               code="audio_too_long")
        await transcribe(live.finish())
    except BadInputError as err:
        raise ApiError(400, err.message + (f" ({err.hint})" if err.hint else ""), code="invalid_audio") from err
    except MlxctlError as err:
        raise ApiError.from_mlxctl(err) from err
    except (ApiError, ConnectionError):
        raise
    except Exception as exc:  # the model thread failed: an error event, not a broken stream
        log.exception("stt stream: transcription failed")
        raise ApiError(500, f"the transcription failed: {type(exc).__name__}: {exc}") from exc


def _delta(segment: Segment, *, first: bool) -> dict:
    return {"type": "transcript.text.delta", "delta": segment.text.lstrip() if first else segment.text,
            "logprobs": None, "segment_id": segment.id, "start": segment.start, "end": segment.end}


async def _send_error(emit: Emit, err: ApiError) -> None:
    kind = "server_error" if err.status >= 500 else "invalid_request_error"
    log.info("stt stream: %s", err.message)
    try:
        await emit({"type": "error", "error": {"message": err.message, "type": kind, "param": err.param,
                                               "code": err.code}})
    except ConnectionError:
        pass


async def _body(request: web.Request, idle_s: float) -> AsyncIterator[bytes]:
    while True:
        try:
            async with asyncio.timeout(idle_s):
                data = await request.content.readany()
        except TimeoutError:
            raise _idle(idle_s) from None
        if not data:
            return
        yield data


async def _messages(ws: web.WebSocketResponse, idle_s: float) -> AsyncIterator[bytes]:
    while True:
        try:
            message = await ws.receive(timeout=idle_s)
        except TimeoutError:
            raise _idle(idle_s) from None
        if message.type == WSMsgType.BINARY:
            yield message.data
        elif message.type == WSMsgType.TEXT:
            try:
                kind = json.loads(message.data).get("type")
            except (ValueError, AttributeError):
                kind = None
            if kind != "end":
                raise ApiError(400, 'text messages must be {"type": "end"}; send audio as binary messages')
            return
        else:  # the client closed (or broke) the socket: no one is left to send text to
            raise ConnectionError("websocket closed")


def _idle(idle_s: float) -> ApiError:
    return ApiError(408, f"no audio arrived for {idle_s:g} s (idle_timeout_s)", param="idle_timeout_s",
                    code="idle_timeout")
