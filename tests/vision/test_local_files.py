"""Local media files (``run --image``/``--video``, ``file://`` URLs): every OS error reading one is
an ImageError naming the field and the reason, never an unhandled exception (a 500)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlxctl.vision.images import ImageError, read_image_file, read_limited
from mlxctl.vision.video import VideoError, read_video_file


def test_a_name_too_long_is_bad_input(tmp_path):
    path = tmp_path / ("a" * 300 + ".png")
    with pytest.raises(ImageError, match="cannot read .*: File name too long") as caught:
        read_image_file(path, "messages.0.content.0.image_url.url")
    assert caught.value.param == "messages.0.content.0.image_url.url"
    with pytest.raises(VideoError, match="File name too long"):
        read_video_file(tmp_path / ("v" * 300 + ".mp4"))


def test_an_io_error_is_bad_input(tmp_path, monkeypatch):
    (tmp_path / "clip.png").write_bytes(b"x" * 10)

    def failing(self):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(Path, "read_bytes", failing)
    with pytest.raises(ImageError, match=r"cannot read .*clip.png: Input/output error"):
        read_limited(tmp_path / "clip.png", "image", 100, "image")


def test_permission_denied_is_still_said_so(tmp_path, monkeypatch):
    (tmp_path / "clip.png").write_bytes(b"x" * 10)

    def denied(self):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(ImageError, match="permission denied"):
        read_limited(tmp_path / "clip.png", "image", 100, "image")
