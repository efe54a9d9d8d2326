"""`mlxctl transcribe` input handling without a model: audio on stdin is read from its byte stream
unchanged (a text stream is refused, never re-encoded), and a --live input file is closed."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from mlxctl.cli.output import Output
from mlxctl.cli.transcribe import _live_run, stdin_bytes
from mlxctl.errors import BadInputError, ExitStatus
from tests.audio.test_cli import _Bytes, mlxctl

AUDIO = bytes(range(256)) * 4  # every byte value: what a latin-1 / utf-8 round trip would break


class _Whisper:
    def check_language(self, language):
        return language


def test_stdin_is_read_as_bytes_unchanged():
    assert stdin_bytes(Output(stdin=_Bytes(AUDIO))).read() == AUDIO


def test_a_text_stdin_is_refused():
    with pytest.raises(BadInputError, match="text stream"):
        stdin_bytes(Output(stdin=io.StringIO("RIFF\u00ff")))
    status, _, err = mlxctl("transcribe", "-", stdin=io.StringIO("RIFF" * 100))
    assert status == ExitStatus.BAD_INPUT and "text stream" in err


def test_live_reads_stdin_bytes_unchanged():
    from mlxctl.audio.pcm_stream import PcmStream

    with contextlib.ExitStack() as files:
        run = _live_run(_Whisper(), PcmStream("pcm", 16000, 1), "-", Output(stdin=_Bytes(AUDIO)), files,
                        chunk_s=10.0, language=None, prompt=None, temperature=0.0)
        got = b"".join(iter(run.read, b""))
    assert got == AUDIO


def test_a_live_input_file_is_closed(tmp_path, monkeypatch):
    from mlxctl.audio.pcm_stream import PcmStream

    (tmp_path / "in.pcm").write_bytes(AUDIO)
    opened = []
    real_open = Path.open

    def recording_open(self, *args, **kwargs):
        opened.append(real_open(self, *args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(Path, "open", recording_open)
    with pytest.raises(RuntimeError, match="the run failed"), contextlib.ExitStack() as files:
        run = _live_run(_Whisper(), PcmStream("pcm", 16000, 1), str(tmp_path / "in.pcm"), Output(), files,
                        chunk_s=10.0, language=None, prompt=None, temperature=0.0)
        assert run.read() == AUDIO and not opened[0].closed
        raise RuntimeError("the run failed")  # as printing or transcribing might
    assert len(opened) == 1 and opened[0].closed
