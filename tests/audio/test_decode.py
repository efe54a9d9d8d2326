"""Audio files and bytes to 16 kHz mono float32."""

from __future__ import annotations

import io

import numpy as np
import pytest

from mlxctl.audio import decode
from mlxctl.audio.decode import decode_audio, read_audio_file
from mlxctl.errors import BadInputError, ExitStatus
from tests.audio.conftest import tone, write_wav

av = pytest.importorskip("av")


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


@pytest.mark.parametrize("data, message", [(b"", "is empty"), (b"\x00" * 4000, "not audio FFmpeg can read"),
                                           (bytes(range(256)) * 40, "not audio FFmpeg can read")])
def test_undecodable_audio_is_bad_input(data, message):
    with pytest.raises(BadInputError, match=message) as info:
        decode_audio(data, name="x.bin")
    assert info.value.exit_status == ExitStatus.BAD_INPUT
    assert str(info.value).startswith("x.bin is empty" if not data else "cannot decode x.bin: ")
    if data:
        assert "M4A/AAC" in info.value.hint and "Invalid data" in str(info.value)


def _encoded(container: str, codec: str, rate: int = 48000, seconds: float = 1.0) -> bytes:
    """A stereo 300 Hz tone (left and right equal) in ``container``, written by PyAV."""
    buf = io.BytesIO()
    with av.open(buf, mode="w", format=container) as out:
        stream = out.add_stream(codec, rate=rate, layout="stereo")
        planes = np.tile(tone(seconds, rate=rate, hz=300.0), (2, 1))
        frame = av.AudioFrame.from_ndarray(planes, format="fltp", layout="stereo")
        frame.sample_rate = rate
        for converted in av.AudioResampler(format=stream.codec_context.format, layout="stereo", rate=rate).resample(frame):
            out.mux(stream.encode(converted))
        out.mux(stream.encode(None))
    return buf.getvalue()


@pytest.mark.parametrize("container, codec", [("ipod", "aac"), ("mp4", "aac"), ("webm", "libopus"),
                                              ("ogg", "libopus"), ("adts", "aac"), ("matroska", "libmp3lame")])
def test_formats_miniaudio_lacks_go_through_pyav(container, codec):
    data = _encoded(container, codec)
    assert decode._miniaudio(data) is None  # so this is the PyAV path
    samples = decode_audio(data, name=f"x.{container}")
    assert samples.dtype == np.float32 and samples.ndim == 1
    assert abs(samples.size / 16000 - 1.0) < 0.08  # 48 kHz stereo -> 16 kHz mono (plus codec padding)
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(samples.size)))
    assert abs(np.argmax(spectrum) * 16000 / samples.size - 300) < 5
    assert 0.25 < np.abs(samples[4000:-4000]).max() < 0.36  # the 0.3 tone, averaged, not summed


def test_a_file_with_no_audio_track_says_so(tmp_path):
    buf = io.BytesIO()
    with av.open(buf, mode="w", format="matroska") as out:
        stream = out.add_stream("ffv1", rate=1)
        stream.width = stream.height = 16
        frame = av.VideoFrame.from_ndarray(np.zeros((16, 16, 3), dtype=np.uint8), format="rgb24")
        out.mux(stream.encode(frame.reformat(format=stream.codec_context.pix_fmt)))
        out.mux(stream.encode(None))
    with pytest.raises(BadInputError, match="cannot decode clip.mkv: it has no audio track"):
        decode_audio(buf.getvalue(), name="clip.mkv")


def test_a_playlist_cannot_make_ffmpeg_read_other_files(tmp_path, monkeypatch):
    """An uploaded concat script or HLS playlist naming a file beside the server must not read it."""
    (tmp_path / "secret.aac").write_bytes(_encoded("adts", "aac"))
    monkeypatch.chdir(tmp_path)
    for script in (b"ffconcat version 1.0\nfile 'secret.aac'\n",
                   b"#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\nsecret.aac\n#EXT-X-ENDLIST\n"):
        with pytest.raises(BadInputError, match="cannot decode"):
            decode_audio(script, name="upload")


@pytest.mark.parametrize("script", [
    b"ffconcat version 1.0\nfile secret.m4a\n",
    b"ffconcat version 1.0\nfile 'secret.m4a'\nfile 'secret.m4a'\n",
    b";FFMETADATA1\ntitle=secret\n",
])
def test_a_script_naming_a_server_file_is_refused_before_it_is_read(tmp_path, monkeypatch, script):
    """Refused by its demuxer (mlxctl.media_safety, shared with video), not only by the missing
    protocols: the secret beside the server decodes, the script naming it does not."""
    (tmp_path / "secret.m4a").write_bytes(_encoded("mp4", "aac"))
    monkeypatch.chdir(tmp_path)
    assert decode_audio((tmp_path / "secret.m4a").read_bytes(), name="secret").size > 0
    with pytest.raises(BadInputError, match="upload: FFmpeg would not open it: it is a playlist, script"):
        decode_audio(script, name="upload")


def test_missing_file_and_folder_are_bad_input(tmp_path):
    with pytest.raises(BadInputError, match="no such audio file"):
        read_audio_file(tmp_path / "nope.wav")
    with pytest.raises(BadInputError, match="is a folder"):
        read_audio_file(tmp_path)
