"""`mlxctl speak`: text (arguments or stdin) to speech, as WAV, raw PCM, MP3, Opus, AAC or FLAC,
a sentence at a time."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Annotated, Any, BinaryIO

import typer

from mlxctl.cli.blas import ensure_fast_blas
from mlxctl.cli.context import output_for
from mlxctl.cli.output import Output
from mlxctl.errors import BadInputError, UnavailableError

TextArg = Annotated[list[str] | None, typer.Argument(
    metavar="TEXT", show_default=False, help="The text to speak; '-' or omitted: read it from stdin.")]
ModelOpt = Annotated[str | None, typer.Option(
    "--model", "-m", metavar="MODEL", show_default=False,
    help="Catalog name (default: kokoro-82m, converted on first use), store name, Kokoro ONNX folder "
    "or mlx-audio Kokoro folder.")]
VoiceOpt = Annotated[str | None, typer.Option(
    "--voice", "-v", metavar="NAME", show_default=False,
    help="Voice pack (default: jf_alpha, or the model's first; see --list-voices).")]
SpeedOpt = Annotated[float, typer.Option(
    "--speed", "-s", metavar="X", min=0.25, max=4.0, help="Speaking rate, 0.25 to 4.0.")]
OutputOpt = Annotated[Path | None, typer.Option(
    "--output", "-o", metavar="PATH", show_default=False,
    help="Write the audio to PATH (default: stdout, unless --play).")]
FormatOpt = Annotated[str | None, typer.Option(
    "--format", "-f", metavar="FORMAT", show_default=False,
    help="wav (streaming header), pcm (raw signed 16-bit little-endian, 24 kHz mono), mp3, opus (Ogg), "
    "aac (ADTS) or flac; default: from PATH's suffix, else wav.")]
PlayFlag = Annotated[bool, typer.Option(
    "--play", help="Play the audio as it is made (aplay or ffplay; afplay once done).")]
ListFlag = Annotated[bool, typer.Option(
    "--list-voices", help="Print the model's voices and exit.")]


def speak(
    ctx: typer.Context,
    text: TextArg = None,
    model: ModelOpt = None,
    voice: VoiceOpt = None,
    speed: SpeedOpt = 1.0,
    output: OutputOpt = None,
    format_: FormatOpt = None,
    play: PlayFlag = False,
    list_voices: ListFlag = False,
) -> None:
    """Speak TEXT with Kokoro.

    Text becomes phonemes with espeak-ng (it must be installed), then audio a sentence at a
    time: each is written (or played) as soon as it is ready. Audio goes to stdout unless -o
    or --play is given; it is 24 kHz mono (16-bit wav or pcm; mp3, opus, aac or flac encoded
    in-process).
    """
    ensure_fast_blas()  # before stdin is read: it may re-execute this process
    from mlxctl.audio.models import resolve_tts
    from mlxctl.audio.phonemes import find_espeak
    from mlxctl.audio.speak import check_speed, check_voice, voice_files

    out = output_for(ctx)
    fmt = _format_of(format_, output)
    check_speed(speed)
    if list_voices:
        return _list_voices(out, resolve_tts(model, progress=out.message))
    words = _read_text(text, out)
    sink = None if output is not None or play else _stdout_bytes(out)
    player = _player(play, output, out)
    find_espeak()  # a missing espeak-ng is one line and exit 6, before the model loads
    folder = resolve_tts(model, progress=out.message)
    name = check_voice(voice, list(voice_files(folder.path)), folder.name)
    from mlxctl.audio.speak import load_kokoro

    kokoro = load_kokoro(folder.path, folder.name)
    speech = kokoro.speak(words, voice=name, speed=speed)
    _write(out, speech, fmt, output, sink, player)


SUFFIXES = {".wav": "wav", ".pcm": "pcm", ".raw": "pcm"}  # and encode.SUFFIXES


def _format_of(format_: str | None, output: Path | None) -> str:
    """--format, else what -o's suffix says (wav without either); when both are given they must agree."""
    from mlxctl.audio.encode import SUFFIXES as ENCODED_SUFFIXES
    from mlxctl.audio.speak import FORMATS, check_format

    fmt = check_format(format_) if format_ is not None else None
    if output is None or not output.suffix:
        return fmt or "wav"
    implied = {**SUFFIXES, **ENCODED_SUFFIXES}.get(output.suffix.lower())
    if implied is None and fmt is None:
        raise BadInputError(f"cannot tell the audio format from the name {output.name!r}",
                            hint=f"name it .wav, .mp3, .opus, .ogg, .aac or .flac, or give --format "
                                 f"({', '.join(FORMATS)})")
    if implied is not None and fmt is not None and fmt != implied:
        raise BadInputError(f"--format {fmt} does not match the name {output.name!r} ({implied})",
                            hint=f"drop --format, or name the file {output.stem}.{fmt}")
    return fmt or implied  # type: ignore[return-value]  # one of them is set here


def _list_voices(out: Output, folder: Any) -> None:
    from mlxctl.audio.speak import default_voice, voice_files, voice_info

    names = sorted(voice_files(folder.path))
    if not names:
        raise BadInputError(f"{folder.name} has no voices")
    default = default_voice(names)
    out.data({"model": folder.name, "default": default, "voices": [voice_info(n) for n in names]},
             human="\n".join(f"{n}{'  (default)' if n == default else ''}" for n in names))


def _read_text(text: list[str] | None, out: Output) -> str:
    if text and text != ["-"]:
        words = " ".join(text)
    elif not text and out.stdin_is_tty:
        raise BadInputError("no text given", hint="pass the text as arguments, or pipe it on stdin")
    else:
        words = out.read_stdin()
    if not words.strip():
        raise BadInputError("there is no text to speak")
    return words


def _stdout_bytes(out: Output) -> BinaryIO:
    if getattr(out.stdout, "isatty", lambda: False)():
        raise BadInputError("refusing to write audio to a terminal",
                            hint="write a file with -o out.wav, play it with --play, or pipe stdout")
    stream = getattr(out.stdout, "buffer", None)
    if stream is None:
        raise BadInputError("stdout takes no binary data here", hint="write a file with -o out.wav")
    return stream


def _player(play: bool, output: Path | None, out: Output) -> Any:
    if not play:
        return None
    from mlxctl.audio.speak import PLAYER_NAMES, find_player

    player = find_player()
    if player is None:
        message = f"--play found no audio player (looked for {PLAYER_NAMES})"
        if output is None:
            raise UnavailableError(message, hint="install alsa-utils (aplay) or ffmpeg (ffplay), or write a "
                                   "file with -o out.wav")
        out.warn(message + f"; writing {output} only")
    return player


class _Playback:
    """A player fed WAV as it is made (aplay, ffplay), or given a file once it is done (afplay)."""

    def __init__(self, player: Any, sample_rate: int):
        from mlxctl.audio.speak import wav_header

        self.player, self.file, self.proc = player, None, None
        if player.streams:
            self.proc = subprocess.Popen(player.command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
            self.sink = self.proc.stdin
        else:
            self.file = tempfile.NamedTemporaryFile(prefix="mlxctl-speak-", suffix=".wav", delete=False)  # noqa: SIM115
            self.sink = self.file
        self.sink.write(wav_header(sample_rate))

    def write(self, data: bytes) -> None:
        try:
            self.sink.write(data)
            self.sink.flush()
        except BrokenPipeError:
            raise UnavailableError(f"the audio player {Path(self.player.command[0]).name} stopped") from None

    def finish(self, ok: bool) -> None:
        from mlxctl.audio.speak import fix_wav_sizes

        if self.proc is not None:
            try:
                self.sink.close()
            except BrokenPipeError:
                pass
            if ok:
                self.proc.wait()
            else:
                self.proc.terminate()
                self.proc.wait()
            return
        fix_wav_sizes(self.file)
        self.file.close()
        try:
            if ok:
                subprocess.run([*self.player.command, self.file.name], check=False)
        finally:
            Path(self.file.name).unlink(missing_ok=True)


def _write(out: Output, speech: Any, fmt: str, output: Path | None, sink: BinaryIO | None, player: Any) -> None:
    """Audio to the file, stdout and/or player, each chunk as soon as it is synthesised (and, for
    mp3, opus, aac and flac, encoded); the player always gets WAV."""
    from mlxctl.audio.encode import ENCODED, Encoder
    from mlxctl.audio.speak import fix_wav_sizes, pcm16, wav_header

    file = None
    if output is not None:
        try:
            file = open(output.expanduser(), "wb")  # noqa: SIM115 (closed in the finally below)
        except OSError as exc:
            raise BadInputError(f"cannot write {output}: {exc.strerror or exc}") from None
        sink = file
    playback = _Playback(player, speech.sample_rate) if player is not None else None
    encoder = Encoder(fmt, speech.sample_rate) if sink is not None and fmt in ENCODED else None
    ok = False
    try:
        if sink is not None and fmt == "wav":
            sink.write(wav_header(speech.sample_rate))
        for samples in speech:
            data = pcm16(samples)
            if sink is not None:
                sink.write(encoder.encode(samples) if encoder is not None else data)
                sink.flush()
            if playback is not None:
                playback.write(data)
        if encoder is not None and sink is not None:
            sink.write(encoder.finish())
            sink.flush()
        ok = True
    finally:
        if encoder is not None:
            encoder.close()
        if file is not None:
            if fmt == "wav":
                fix_wav_sizes(file)
            file.close()
        if playback is not None:
            playback.finish(ok)
    where = f" to {output}" if output is not None else ""
    out.message(f"mlxctl: {speech.duration:.1f} s of speech{where} (voice {speech.voice}, {len(speech.chunks)} "
                f"chunk{'s' if len(speech.chunks) != 1 else ''})")
