"""Video frame sampling (the rule, then real clips decoded with PyAV) and the decoded-video cache."""

from __future__ import annotations

import pytest

from mlxctl.vision.sampling import MAX_FRAMES, VideoSampling, pick_frames, sample_times
from mlxctl.vision.video import (
    VideoError,
    VideoLimits,
    decode_video,
    read_video_file,
    video_prompt,
)
from mlxctl.vision.video_cache import VideoCache
from tests.vision.clips import audio_only_bytes, clip_bytes, frame_index


@pytest.mark.parametrize("duration, fps, max_frames, expected", [
    (4.0, 1.0, 8, [0, 1, 2, 3]),
    (4.0, 2.0, 8, [0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5]),
    (4.0, 2.0, 4, [0, 1, 2, 3]),  # capped: spread over the whole clip
    (10.0, 1.0, 4, [0, 2.5, 5, 7.5]),
    (4.05, 1.0, 8, [0, 1, 2, 3, 4]),  # 4.0 s is still inside the clip
    (0.3, 1.0, 8, [0]),
    (0.0, 1.0, 8, [0]),  # unknown length: the first frame
])
def test_sample_times(duration, fps, max_frames, expected):
    assert sample_times(duration, VideoSampling(fps, max_frames)) == pytest.approx(expected)


def test_pick_frames_takes_the_frame_on_screen():
    frames = [(0.1 * i, f"f{i}") for i in range(10)]  # 0.0 .. 0.9 s
    assert [f for _, f in pick_frames(frames, [0.0, 0.25, 0.3, 0.95])] == ["f0", "f2", "f3", "f9"]
    assert [f for _, f in pick_frames([(0.5, "late")], [0.0])] == ["late"]  # before the first frame
    assert pick_frames([], [0.0]) == []

    def endless():  # reading stops once every target is settled
        i = 0
        while True:
            yield i * 0.1, i
            i += 1
    assert [f for _, f in pick_frames(endless(), [0.0, 1.0])] == [0, 10]


@pytest.mark.parametrize("sampling, message", [
    (VideoSampling(0, 8), "fps must be more than 0"),
    (VideoSampling(31, 8), "at most 30"),
    (VideoSampling(1, 0), "max_frames must be an integer from 1 to 32"),
    (VideoSampling(1, MAX_FRAMES + 1), "max_frames"),
])
def test_sampling_checks(sampling, message):
    with pytest.raises(ValueError, match=message):
        sampling.check()


@pytest.mark.parametrize("codec, fmt", [("mpeg4", "mp4"), ("libx264", "mp4"), ("libvpx-vp9", "webm")])
def test_decoded_frames_are_the_sampled_ones(codec, fmt):
    data = clip_bytes(codec=codec, fmt=fmt)  # 40 frames at 10 fps: 4 s
    video = decode_video(data, "v", VideoSampling(1.0, 8))
    assert video.duration == pytest.approx(4.0)
    assert video.times == (0, 1, 2, 3)
    assert [frame_index(f.image) for f in video.frames] == [0, 10, 20, 30]
    assert all(f.image.mode == "RGB" and f.size == (64, 48) for f in video.frames)
    capped = decode_video(data, "v", VideoSampling(4.0, 5))  # 16 at 4 fps, capped: every 0.8 s
    assert capped.times == pytest.approx((0, 0.8, 1.6, 2.4, 3.2))
    assert [frame_index(f.image) for f in capped.frames] == [0, 8, 16, 24, 32]


def test_keys_follow_content_and_sampling():
    data = clip_bytes()
    one, again = decode_video(data, "v", VideoSampling(1.0, 8)), decode_video(data, "w", VideoSampling(1.0, 8))
    assert one.key == again.key and [f.key for f in one.frames] == [f.key for f in again.frames]
    half = decode_video(data, "v", VideoSampling(0.5, 8))  # frames at 0 and 2 s: the same frames
    assert half.key != one.key
    assert [f.key for f in half.frames] == [one.frames[0].key, one.frames[2].key]
    other = decode_video(clip_bytes(tint=50), "v", VideoSampling(1.0, 8))
    assert not {f.key for f in other.frames} & {f.key for f in one.frames}
    assert len({f.key for f in one.frames}) == 4


def test_prompt_labels_each_frame():
    video = decode_video(clip_bytes(), "v", VideoSampling(4.0, 3))
    assert video_prompt(video, "<image>") == "Frame at 0 s: <image>\nFrame at 1.33 s: <image>\nFrame at 2.67 s: <image>"


@pytest.mark.parametrize("data, message", [
    (b"", "the video is empty"),
    (b"\x00\x01garbage" * 50, "not a decodable video"),
    ("audio", "the file has no video stream"),
])
def test_bad_videos(data, message):
    data = audio_only_bytes() if data == "audio" else data
    with pytest.raises(VideoError, match=message) as caught:
        decode_video(data, "messages.0.content.0.video_url.url")
    assert caught.value.param == "messages.0.content.0.video_url.url"


def test_limits():
    data = clip_bytes()
    with pytest.raises(VideoError, match="more than the 100 allowed"):
        decode_video(data, "v", limits=VideoLimits(max_bytes=100))
    with pytest.raises(VideoError, match="64x48 pixels, more than the 1000 allowed"):
        decode_video(data, "v", limits=VideoLimits(max_pixels=1000))


def test_read_video_file(tmp_path):
    (tmp_path / "clip.mp4").write_bytes(clip_bytes())
    assert len(read_video_file(tmp_path / "clip.mp4").frames) == 4
    with pytest.raises(VideoError, match="no such file"):
        read_video_file(tmp_path / "missing.mp4", "--video missing.mp4")
    with pytest.raises(VideoError, match="is not a file"):
        read_video_file(tmp_path)


def test_the_cache_keeps_decoded_videos_within_its_budget():
    one = decode_video(clip_bytes(tint=10), "v")
    two = decode_video(clip_bytes(tint=20), "v")
    cache = VideoCache(max_bytes=one.nbytes + two.nbytes // 2)
    assert cache.get(one.key) is None
    cache.put(one)
    assert cache.get(one.key) is one
    cache.put(two)  # over budget: the least recently used goes
    assert cache.get(one.key) is None and cache.get(two.key) is two
    assert cache.stats() == {"entries": 1, "bytes": two.nbytes, "max_bytes": cache.max_bytes, "hits": 2, "misses": 2}
