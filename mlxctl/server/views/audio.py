"""The audio endpoints' wiring: speech to text (views/transcriptions.py, live input in
views/transcription_stream.py) and text to speech (views/speech.py), each model on a thread of
its own (server/model_thread.py)."""

from __future__ import annotations

from aiohttp import web

from mlxctl.server.keys import SETTINGS
from mlxctl.server.views.speech import TTS, TtsService, speech, voices
from mlxctl.server.views.transcription_stream import transcription_socket, transcription_stream
from mlxctl.server.views.transcriptions import STT, SttService, transcriptions


def setup(app: web.Application) -> None:
    """The route, and the model's thread (loading at start when serve --stt-model names one)."""
    app[STT] = SttService(app[SETTINGS].stt_model)
    app[TTS] = TtsService(app[SETTINGS].tts_model)
    app.router.add_post("/v1/audio/transcriptions", transcriptions)
    app.router.add_post("/v1/audio/transcriptions/stream", transcription_stream)  # chunked body, SSE back
    app.router.add_get("/v1/audio/transcriptions/stream", transcription_socket)  # the WebSocket
    app.router.add_post("/v1/audio/speech", speech)
    app.router.add_get("/v1/audio/voices", voices)
    app.on_startup.append(_start)
    app.on_cleanup.append(_stop)


async def _start(app: web.Application) -> None:
    if app[SETTINGS].stt_model:
        app[STT].start()
    if app[SETTINGS].tts_model:
        app[TTS].start()


async def _stop(app: web.Application) -> None:
    app[STT].close()
    app[TTS].close()
