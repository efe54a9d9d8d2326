"""Cache keys beyond the tokens: media content hashes and tenant salts."""

from __future__ import annotations

import os

from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.kv.media import VideoRef, cache_salt, image_key, video_key
from mlxctl.engine.prefix_config import PrefixConfig
from mlxctl.engine.sampling import SamplingParams
from tests.engine.tiny import tiny_loaded

GREEDY = SamplingParams(temperature=0.0, max_tokens=4)
PROMPT = list(range(1, 30))


def test_image_keys_follow_the_bytes_not_the_name():
    assert image_key(b"png-bytes") == image_key(bytes(b"png-bytes"))
    assert image_key(b"png-bytes") != image_key(b"png-bytez")


def test_video_keys_follow_the_file_and_the_frame_sampling(tmp_path):
    clip = tmp_path / "clip.mp4"
    clip.write_bytes(b"frames")
    ref = VideoRef(str(clip), fps=2.0, max_frames=16)
    assert video_key(ref) == video_key(VideoRef(str(clip), 2.0, 16))
    assert video_key(ref) != video_key(VideoRef(str(clip), 1.0, 16))
    assert video_key(ref) != video_key(VideoRef(str(clip), 2.0, 8))
    before = video_key(ref)
    clip.write_bytes(b"other frames")
    os.utime(clip, ns=(1, 1))
    assert video_key(ref) != before


def test_salts_compose_and_empty_means_none():
    assert cache_salt() == ""
    assert cache_salt([image_key(b"a")]) != cache_salt([image_key(b"b")])
    assert cache_salt(salt="tenant-a") != cache_salt(salt="tenant-b")


def test_requests_share_blocks_only_with_the_same_salt():
    loaded = tiny_loaded()
    eng = Engine(lambda: loaded, EngineConfig(prefix=PrefixConfig(block_size=4))).start()
    try:
        a = cache_salt([image_key(b"cat.png bytes")])
        b = cache_salt([image_key(b"dog.png bytes")])
        eng.submit(PROMPT, GREEDY, cache_salt=a).collect()
        assert eng.submit(PROMPT, GREEDY, cache_salt=b).collect().usage.cached_tokens == 0
        assert eng.submit(PROMPT, GREEDY).collect().usage.cached_tokens == 0
        assert eng.submit(PROMPT, GREEDY, cache_salt=a).collect().usage.cached_tokens == 28
    finally:
        eng.shutdown()
