"""`mlxctl transcribe`: speech in an audio file (or stdin) to text, SRT, WebVTT or JSON.

With ``--live`` the audio is read as it arrives (a recorder piping raw PCM or a WAV stream) and
each window is transcribed as soon as it is full (``mlxctl.audio.live``), so text appears while
the recording goes on. Audio on stdin is read from its byte stream (``sys.stdin.buffer``): a
text stream would have decoded, and so corrupted, the samples.
"""

from __future__ import annotations

import contextlib
import io
from typing import IO, Annotated

import typer

from mlxctl.cli.blas import ensure_fast_blas
from mlxctl.cli.context import output_for
from mlxctl.cli.output import Output
from mlxctl.errors import BadInputError

FORMATS = ("text", "srt", "vtt", "json")

AudioArg = Annotated[str | None, typer.Argument(
    metavar="AUDIO", show_default=False,
    help="Audio file (WAV, FLAC, MP3, Ogg Vorbis; anything else FFmpeg reads goes through PyAV); '-' or omitted: stdin.")]
ModelOpt = Annotated[str | None, typer.Option(
    "--model", "-m", metavar="MODEL", show_default=False,
    help="Catalog name (default: whisper-tiny-en; whisper-base is multilingual), store name, "
    "faster-whisper folder or mlx-audio Whisper folder. Catalog models are converted on first use.")]
FormatOpt = Annotated[str, typer.Option(
    "--format", "-f", metavar="FORMAT", help="text (one line per segment), srt, vtt or json.")]
LanguageOpt = Annotated[str | None, typer.Option(
    "--language", "-l", metavar="LANG", show_default=False,
    help="Spoken language, as a code (en, de) or name; default: detected (English-only models: en).")]
PromptOpt = Annotated[str | None, typer.Option(
    "--prompt", metavar="TEXT", show_default=False,
    help="Text that came before, or words to spell as given (names, jargon).")]
TemperatureOpt = Annotated[float, typer.Option(
    "--temperature", "-t", metavar="T", min=0.0, max=1.0,
    help="0: greedy, retried hotter when a window decodes badly; above 0: sample at T.")]
JsonFlag = Annotated[bool, typer.Option(
    "--json", help="Same as --format json: one JSON document with the segments' start and end.")]
LiveFlag = Annotated[bool, typer.Option(
    "--live", help="Read the audio as it arrives (a WAV stream, or raw PCM with --raw-pcm) and print "
    "each window's segments while more is coming.")]
RawPcmFlag = Annotated[bool, typer.Option(
    "--raw-pcm", help="The input is raw signed 16-bit little-endian samples (implies --live).")]
SampleRateOpt = Annotated[int | None, typer.Option(
    "--sample-rate", metavar="HZ", min=8000, max=48000, show_default=False,
    help="Sample rate of --raw-pcm input (default 16000).")]
ChannelsOpt = Annotated[int | None, typer.Option(
    "--channels", metavar="N", min=1, max=8, show_default=False,
    help="Interleaved channels of --raw-pcm input, mixed down (default 1).")]
ChunkOpt = Annotated[float, typer.Option(
    "--chunk-s", metavar="SECONDS", min=1.0, max=30.0,
    help="With --live: window length; each is cut at a quiet point near its end and transcribed when full.")]


def transcribe(
    ctx: typer.Context,
    audio: AudioArg = None,
    model: ModelOpt = None,
    format_: FormatOpt = "text",
    language: LanguageOpt = None,
    prompt: PromptOpt = None,
    temperature: TemperatureOpt = 0.0,
    json_: JsonFlag = False,
    live: LiveFlag = False,
    raw_pcm: RawPcmFlag = False,
    sample_rate: SampleRateOpt = None,
    channels: ChannelsOpt = None,
    chunk_s: ChunkOpt = 10.0,
) -> None:
    """Transcribe the speech in AUDIO.

    Segments are printed as each 30-second window is decoded (text, srt and vtt); json prints
    one document at the end. The model runs in float32 on the CPU. With --live, audio is
    transcribed while it arrives: arecord -f S16_LE -r 16000 -c 1 | mlxctl transcribe --live -
    """
    ensure_fast_blas()  # before stdin is read: it may re-execute this process
    fmt = format_.strip().lower()
    if json_ and fmt not in ("text", "json"):
        raise BadInputError(f"--json and --format {format_} disagree", hint="give one of them")
    fmt = "json" if json_ else fmt
    if fmt not in FORMATS:
        raise BadInputError(f"unknown format {format_!r}", hint=f"use one of: {', '.join(FORMATS)}")
    out = output_for(ctx, json=fmt == "json")
    from mlxctl.audio.transcribe import language_code

    language_code(language)  # an unknown language fails before any work
    live = live or raw_pcm
    if not raw_pcm and (sample_rate or channels):
        raise BadInputError("--sample-rate and --channels describe --raw-pcm input",
                            hint="a WAV stream's header gives them")
    if live:
        from mlxctl.audio.pcm_stream import PcmStream

        stream = PcmStream("pcm" if raw_pcm else "wav", sample_rate or 16000, channels or 1)
    else:
        samples = _read_audio(audio, out)
    from mlxctl.audio.models import resolve_stt
    from mlxctl.audio.transcribe import load_whisper

    folder = resolve_stt(model, progress=out.message)
    whisper = load_whisper(folder.path, folder.name)
    with contextlib.ExitStack() as files:  # a --live input file is closed however the run ends
        if live:
            run = _live_run(whisper, stream, audio, out, files, language=language, prompt=prompt,
                            temperature=temperature, chunk_s=chunk_s)
        else:
            run = whisper.transcribe(samples, language=language, prompt=prompt, temperature=temperature)
        _print(out, fmt, run, whisper.name)


def _live_run(whisper, stream, audio: str | None, out: Output, files: contextlib.ExitStack, *,
              chunk_s: float, **options):
    """A LiveRun over stdin (or a file, opened into ``files``) read a piece at a time, as the
    bytes arrive."""
    from pathlib import Path

    from mlxctl.audio.live import LiveInput, LiveRun, LiveTranscript

    code = whisper.check_language(options.pop("language"))
    if audio is not None and audio != "-":
        try:
            source = files.enter_context(Path(audio).expanduser().open("rb"))
        except OSError as exc:
            raise BadInputError(f"cannot read {audio}: {exc.strerror or exc}") from None
    elif audio is None and out.stdin_is_tty:
        raise BadInputError("no audio given", hint="pipe a recording on stdin, e.g. arecord -f S16_LE -r 16000 | ...")
    else:
        source = stdin_bytes(out)
    read = getattr(source, "read1", source.read)
    return LiveRun(whisper, lambda: bytes(read(1 << 14)), LiveInput(stream, chunk_s), LiveTranscript(code, **options))


def stdin_bytes(out: Output) -> IO[bytes]:
    """stdin's byte stream (``sys.stdin.buffer``); a text stream without one cannot carry audio
    unchanged, so it is refused rather than re-encoded."""
    stream = getattr(out.stdin, "buffer", out.stdin)
    if isinstance(stream, io.TextIOBase):
        raise BadInputError("stdin is a text stream, so the audio bytes on it cannot be read unchanged",
                            hint="pipe the audio in, or pass its file name")
    return stream


def _read_audio(audio: str | None, out: Output):
    from pathlib import Path

    from mlxctl.audio.decode import decode_audio, read_audio_file

    if audio is not None and audio != "-":
        return read_audio_file(Path(audio))
    if audio is None and out.stdin_is_tty:
        raise BadInputError("no audio given", hint="pass an audio file, or pipe one on stdin")
    return decode_audio(stdin_bytes(out).read(), name="the audio on stdin")


def _print(out: Output, fmt: str, run, model_name: str) -> None:
    from mlxctl.audio import formats

    if fmt == "json":
        list(run)
        out.data({"model": model_name, "language": run.language, "duration": round(run.duration, 3),
                  "text": run.text, "segments": [formats.segment_json(s) for s in run.segments]})
        return
    if fmt == "vtt":
        out.text(formats.VTT_HEADER)
    count = 0
    for segment in run:
        if fmt == "text":
            out.text(formats.cue_text(segment.text) + "\n")
        elif fmt == "srt":
            count += 1
            out.text(formats.srt_cue(count, segment))
        else:
            out.text(formats.vtt_cue(segment))
    if not run.segments:
        out.message("mlxctl: no speech found")
