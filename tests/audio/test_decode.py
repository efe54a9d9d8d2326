"""Audio files and bytes to 16 kHz mono float32."""

from __future__ import annotations

import numpy as np
import pytest

from mlxctl.audio import decode
from mlxctl.audio.decode import decode_audio, read_audio_file
from mlxctl.errors import BadInputError, ExitStatus
from tests.audio.conftest import tone, write_wav


def test_stereo_44k_wav_becomes_16k_mono(tmp_path):
    mono = tone(1.0, rate=44100)
    stereo = np.stack([mono, mono], axis=1).reshape(-1)
    samples = read_audio_file(write_wav(tmp_path / "a.wav", stereo, rate=44100, channels=2))
    assert samples.dtype == np.float32 and samples.ndim == 1
    assert abs(samples.size - 16000) <= 16
    assert 0.2 < np.abs(samples).max() < 0.4  # the 0.3 tone, mixed down without doubling


def test_16k_wav_bytes_round_trip(tmp_path):
    path = write_wav(tmp_path / "b.wav", tone(0.5))
    samples = decode_audio(path.read_bytes())
    np.testing.assert_allclose(samples, tone(0.5), atol=2e-4)


@pytest.mark.parametrize("data, message", [(b"", "is empty"), (b"\x00" * 4000, "cannot decode"),
                                           (bytes(range(256)) * 40, "cannot decode")])
def test_undecodable_audio_is_bad_input(monkeypatch, data, message):
    monkeypatch.setattr(decode.shutil, "which", lambda name: None)  # as without ffmpeg
    with pytest.raises(BadInputError, match=message) as info:
        decode_audio(data, name="x.bin")
    assert info.value.exit_status == ExitStatus.BAD_INPUT
    if message == "cannot decode":
        assert "ffmpeg" in info.value.hint


def test_missing_file_and_folder_are_bad_input(tmp_path):
    with pytest.raises(BadInputError, match="no such audio file"):
        read_audio_file(tmp_path / "nope.wav")
    with pytest.raises(BadInputError, match="is a folder"):
        read_audio_file(tmp_path)
