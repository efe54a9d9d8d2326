"""Video decoding is bounded and reads only the bytes it is given: playlists and concat scripts
are refused (never the files they name), sampled frames are scaled down in the conversion, each
decoded frame's own size is checked, and no more than a couple of full-size frames are held."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mlxctl.media_safety import (
    DENIED_DEMUXERS,
    RefusedMedia,
    _options,
    check_format,
    open_input,
)
from mlxctl.vision.sampling import VideoSampling, pick_frames, sample_times
from mlxctl.vision.video import (
    MAX_FRAME_SIDE,
    VideoError,
    VideoLimits,
    _frames,
    decode_video,
)
from tests.vision.clips import clip_bytes, frame_index, resized_midway_bytes

FIELD = "messages.0.content.0.video_url.url"


@pytest.mark.parametrize("script", [
    b"ffconcat version 1.0\nfile secret.mp4\n",
    b"ffconcat version 1.0\nfile 'secret.mp4'\nfile 'secret.mp4'\n",
    b"#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\nsecret.mp4\n#EXT-X-ENDLIST\n",
    b";FFMETADATA1\ntitle=secret\n",
])
def test_a_script_naming_a_server_file_never_reads_it(tmp_path, monkeypatch, script):
    (tmp_path / "secret.mp4").write_bytes(clip_bytes(tint=200))  # a real clip beside the server
    monkeypatch.chdir(tmp_path)
    assert len(decode_video((tmp_path / "secret.mp4").read_bytes(), "v").frames) == 4  # it is decodable
    with pytest.raises(VideoError) as caught:
        decode_video(script, FIELD)
    assert caught.value.param == FIELD  # a 400 naming the field, with no frames of the secret


def test_a_concat_script_is_refused_by_name():
    with pytest.raises(VideoError, match="playlist, script or image sequence .* refused"):
        decode_video(b"ffconcat version 1.0\nfile secret.mp4\n", "v")


def test_the_open_options_allow_real_formats_only():
    options = dict(_options())
    assert options["protocol_whitelist"] == "none"
    allowed = set(options["format_whitelist"].split(","))
    assert {"mov", "mp4", "matroska", "webm", "mpegts", "wav", "ogg"} <= allowed
    assert not allowed & DENIED_DEMUXERS


def test_a_denied_demuxer_is_refused_after_opening_too():
    """In case a build ignores format_whitelist: the opened format's name is checked again."""
    closed = []
    fake = SimpleNamespace(format=SimpleNamespace(name="concat"), close=lambda: closed.append(True))
    with pytest.raises(RefusedMedia, match="FFmpeg reads it as concat"):
        check_format(fake)
    assert closed == [True]
    with open_input(clip_bytes()) as container:  # a real format passes
        check_format(container)


def test_frames_are_scaled_in_the_conversion():
    wide = decode_video(clip_bytes(frames=10, size=(2000, 1000), codec="libx264"), "v")
    assert {f.size for f in wide.frames} == {(MAX_FRAME_SIDE, MAX_FRAME_SIDE // 2)}
    assert all(f.image.mode == "RGB" for f in wide.frames)
    tall = decode_video(clip_bytes(frames=10, size=(64, 48)), "v", limits=VideoLimits(max_side=32))
    assert {f.size for f in tall.frames} == {(32, 24)}
    assert [frame_index(f.image) for f in tall.frames] == [0]  # 1 s of frames: the first only
    small = decode_video(clip_bytes(), "v")
    assert {f.size for f in small.frames} == {(64, 48)}  # never enlarged


def test_each_decoded_frame_is_checked_not_the_header():
    data = resized_midway_bytes()  # the header says 64x48; from 1 s on the frames are 640x480
    sampling = VideoSampling(4.0, 8)
    assert {f.size for f in decode_video(data, "v", sampling).frames} == {(64, 48), (640, 480)}
    with pytest.raises(VideoError, match=r"is 640x480 pixels, not 1 to the 10000 allowed") as caught:
        decode_video(data, FIELD, sampling, VideoLimits(max_pixels=10_000))
    assert caught.value.param == FIELD


def test_only_the_sampled_frames_keep_pixels_and_those_small():
    data = clip_bytes(frames=40, rate=10)  # 4 s
    targets = sample_times(4.0, VideoSampling(1.0, 8))
    seen = []

    def spy(frames):
        for item in frames:
            seen.append(item[1])
            assert sum(f.raw is not None for f in seen) <= 2  # decoding holds two full frames at most
            yield item

    with open_input(data) as container:
        picked = pick_frames(spy(_frames(container, container.streams.video[0], targets, "v", VideoLimits())),
                             targets)
        assert all(f.rgb is not None and f.raw is None for _, f in picked)  # converted when settled
        assert [frame_index(f.image(MAX_FRAME_SIDE)) for _, f in picked] == [0, 10, 20, 30]
        assert sum(f.raw is not None for f in seen) == 1  # the frame that settled the last time
        assert sum(f.rgb is not None for f in seen) == 4
    with open_input(data) as container:  # a time after the stream ends: its last frame, converted on demand
        end = pick_frames(_frames(container, container.streams.video[0], [0.0, 9.0], "v", VideoLimits()),
                          [0.0, 9.0])
        assert end[1][1].rgb is None and frame_index(end[1][1].image(MAX_FRAME_SIDE)) == 39


def test_the_cache_counts_a_frame_shown_twice_once():
    video = decode_video(clip_bytes(frames=8, rate=2), "v", VideoSampling(4.0, 32))  # 16 times, 8 frames
    assert len(video.frames) == 16 and len({id(f.image) for f in video.frames}) == 8
    assert video.nbytes == 8 * 64 * 48 * 4
