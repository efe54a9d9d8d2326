"""Video over HTTP: `video_url` parts on /v1/chat/completions (the official `openai` client),
frame sampling fields, the decoded-video and feature caches, and the 400s, on the LLaVA-layout
test model."""

from __future__ import annotations

import base64

import httpx
import pytest

from tests.vision.build_model import TOKENS_PER_IMAGE
from tests.vision.clips import audio_only_bytes, clip_bytes
from tests.vision.conftest import MODEL

QUESTION = "What happens in this video?"


def video_url(data: bytes, media_type: str = "video/mp4") -> str:
    return f"data:{media_type};base64," + base64.b64encode(data).decode()


def video_message(url: str, text: str = QUESTION, **sampling) -> list[dict]:
    part = {"type": "video_url", "video_url": {"url": url, **sampling}}
    return [{"role": "user", "content": [part, {"type": "text", "text": text}]}]


def expected_prompt_tokens(tokenizer, labels: list[str]) -> int:
    """What the model should see: the chat template over the text with one placeholder per
    frame, each placeholder then standing for TOKENS_PER_IMAGE positions."""
    frames = "\n".join(f"Frame at {t} s: <image>" for t in labels)
    tokens = tokenizer.apply_chat_template([{"role": "user", "content": f"{frames}\n{QUESTION}"}],
                                           add_generation_prompt=True)
    return len(tokens) + len(labels) * (TOKENS_PER_IMAGE - 1)


def vision_status(base: str) -> dict:
    return httpx.get(base + "/v1/status", timeout=30).json()["engine"]["vision"]


def chat(client, messages, **kw):
    return client.chat.completions.create(model=MODEL, messages=messages, temperature=0, max_tokens=3, **kw)


def test_a_video_answers_and_counts_its_frames(serve, llava_loaded):
    import openai

    base = serve()
    client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0)
    url = video_url(clip_bytes(tint=11))  # 4 s: frames at 0, 1, 2, 3 s by default (1 fps)
    before = vision_status(base)
    first = chat(client, video_message(url))
    assert first.choices[0].message.content and first.usage.completion_tokens == 3
    assert first.usage.prompt_tokens == expected_prompt_tokens(llava_loaded.tokenizer, ["0", "1", "2", "3"])
    after = vision_status(base)
    assert after["images_encoded"] - before["images_encoded"] == 4
    assert after["video_cache"]["misses"] - before["video_cache"]["misses"] == 1

    again = chat(client, video_message(url))  # not decoded again, its prefix cached
    assert again.choices[0].message.content == first.choices[0].message.content
    assert again.usage.prompt_tokens_details.cached_tokens > 4 * TOKENS_PER_IMAGE
    repeat = vision_status(base)
    assert repeat["video_cache"]["hits"] - after["video_cache"]["hits"] == 1
    assert repeat["images_encoded"] == after["images_encoded"]

    # other sampling of the same clip (frames at 0 and 2 s): decoded again, but both frames'
    # features come from the cache (or the prefix cache), never from the tower
    half = chat(client, video_message(url), extra_body={"fps": 0.5})
    assert half.usage.prompt_tokens == expected_prompt_tokens(llava_loaded.tokenizer, ["0", "2"])
    last = vision_status(base)
    assert last["images_encoded"] == after["images_encoded"]
    assert last["feature_cache"]["hits"] > repeat["feature_cache"]["hits"]


def test_sampling_fields_and_their_precedence(client, llava_loaded):
    url = video_url(clip_bytes(tint=12))
    tok = llava_loaded.tokenizer
    capped = chat(client, video_message(url), extra_body={"max_frames": 2})  # spread: 0 and 2 s
    assert capped.usage.prompt_tokens == expected_prompt_tokens(tok, ["0", "2"])
    vllm = chat(client, video_message(url), extra_body={"mm_processor_kwargs": {"fps": 0.5}})
    assert vllm.usage.prompt_tokens == capped.usage.prompt_tokens
    part = chat(client, video_message(url, fps=2.0, max_frames=3), extra_body={"fps": 0.25})
    assert part.usage.prompt_tokens == expected_prompt_tokens(tok, ["0", "1.33", "2.67"])
    streamed = list(chat(client, video_message(url, max_frames=3, fps=2.0), stream=True,
                         stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == part.choices[0].message.content
    assert streamed[-1].usage.prompt_tokens == part.usage.prompt_tokens


def test_a_local_video_file(serve, tmp_path):
    (tmp_path / "clip.mp4").write_bytes(clip_bytes(tint=13))
    url = f"file://{tmp_path / 'clip.mp4'}"
    refused = post(serve(), video_message(url))
    assert refused.status_code == 400
    assert "file:// video URLs are not allowed" in refused.json()["error"]["message"]
    resp = post(serve(allowed_local_media_path=str(tmp_path)), video_message(url, max_frames=2))
    assert resp.status_code == 200, resp.text
    with open(tmp_path / "huge.mp4", "wb") as f:
        f.truncate(101 * 1024 * 1024)  # sparse: refused by its size before it is read
    resp = post(serve(allowed_local_media_path=str(tmp_path)), video_message(f"file://{tmp_path / 'huge.mp4'}"))
    assert resp.status_code == 400 and "more than the 104857600 allowed" in resp.json()["error"]["message"]
    assert resp.json()["error"]["param"] == "messages.0.content.0.video_url.url"


def post(base: str, messages: list[dict], **body) -> httpx.Response:
    return httpx.post(base + "/v1/chat/completions", timeout=60,
                      json={"model": MODEL, "max_tokens": 2, "messages": messages, **body})


FIELD = "messages.0.content.0.video_url.url"


@pytest.mark.parametrize("url, message", [
    (video_url(b"\x00\x01garbage" * 40), "not a decodable video"),
    (video_url(audio_only_bytes(), "audio/wav"), "not a supported video type"),
    (video_url(audio_only_bytes()), "the file has no video stream"),
    ("data:video/mp4;base64,", "the video is empty"),
    ("data:video/mp4;base64,@@@", "not valid base64"),
    ("ftp://example.com/clip.mp4", "unsupported video URL scheme"),
])
def test_bad_videos_are_400s_naming_the_field(serve, url, message):
    resp = post(serve(), video_message(url))
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert message in error["message"] and error["param"] == FIELD


@pytest.mark.parametrize("extra, param, message", [
    ({"fps": 0}, "fps", "greater than 0"),
    ({"fps": 120}, "fps", "less than or equal to 30"),
    ({"max_frames": 33}, "max_frames", "less than or equal to 32"),
    ({"max_frames": 0}, "max_frames", "greater than or equal to 1"),
    ({"mm_processor_kwargs": {"num_frames": 4}}, "mm_processor_kwargs.num_frames", "unsupported field"),
    ({"fps": 1, "mm_processor_kwargs": {"fps": 2}}, "body", "give fps or mm_processor_kwargs.fps, not both"),
])
def test_bad_sampling_fields(serve, extra, param, message):
    resp = post(serve(), video_message(video_url(clip_bytes())), **extra)
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert message in error["message"] and error["param"] == param


@pytest.mark.parametrize("sampling, message", [
    ({"fps": -1}, "content.0.video_url.fps must be more than 0 and at most 30, got -1"),
    ({"max_frames": 64}, "content.0.video_url.max_frames must be an integer from 1 to 32, got 64"),
    ({"max_frames": 2.5}, "content.0.video_url.max_frames must be an integer"),
])
def test_bad_part_sampling_names_the_part(serve, sampling, message):
    resp = post(serve(), video_message(video_url(clip_bytes()), **sampling))
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert message in error["message"] and error["param"] == "messages.0.content"


def test_videos_only_from_users_and_not_for_text_only_models(serve, smollm2_engine):
    part = {"type": "video_url", "video_url": {"url": video_url(clip_bytes())}}
    resp = post(serve(), [{"role": "system", "content": [part]}, {"role": "user", "content": "Hi"}])
    assert resp.status_code == 400 and "only allowed in user messages" in resp.json()["error"]["message"]
    url = serve(engine=smollm2_engine, name="smollm2-135m")
    resp = httpx.post(url + "/v1/chat/completions", timeout=60, json={
        "model": "smollm2-135m", "messages": video_message(video_url(clip_bytes()))})
    assert resp.status_code == 400
    assert resp.json()["error"]["message"] == "this model does not accept images: it is a text-only model"
    assert resp.json()["error"]["param"] == "messages.0.content"


def test_a_concat_script_is_a_400_and_never_reads_the_file(serve, tmp_path, monkeypatch):
    (tmp_path / "secret.mp4").write_bytes(clip_bytes(tint=201))
    monkeypatch.chdir(tmp_path)  # where the server would find the file the script names
    resp = post(serve(), video_message(video_url(b"ffconcat version 1.0\nfile secret.mp4\n")))
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert "refused" in error["message"] and error["param"] == FIELD


def test_media_parts_and_frames_per_request_are_capped(serve):
    from mlxctl.server.images import MAX_MEDIA_PARTS, MAX_REQUEST_FRAMES

    base, url = serve(), video_url(clip_bytes(tint=14))
    part = {"type": "video_url", "video_url": {"url": url, "max_frames": 1}}
    many = [{"role": "user", "content": [part] * (MAX_MEDIA_PARTS + 1) + [{"type": "text", "text": "Hi"}]}]
    resp = post(base, many)
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["code"] == "too_many_media_parts" and f"at most {MAX_MEDIA_PARTS}" in error["message"]
    assert error["param"] == f"messages.0.content.{MAX_MEDIA_PARTS}.video_url.url"

    big = {"type": "video_url", "video_url": {"url": url, "max_frames": 32}}
    count = MAX_REQUEST_FRAMES // 32 + 1
    resp = post(base, [{"role": "user", "content": [big] * count}])
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["code"] == "too_many_video_frames" and f"at most {MAX_REQUEST_FRAMES}" in error["message"]
    assert error["param"] == f"messages.0.content.{count - 1}.video_url.url"
    within = post(base, [{"role": "user", "content": [big] * (count - 1)}])  # exactly the limit
    assert within.status_code == 200, within.text


def test_an_unreadable_local_file_is_a_400(serve, tmp_path):
    url = f"file://{tmp_path / ('v' * 300 + '.mp4')}"  # inside the folder, but no such name can exist
    resp = post(serve(allowed_local_media_path=str(tmp_path)), video_message(url))
    assert resp.status_code == 400, resp.text
    assert "File name too long" in resp.json()["error"]["message"] and resp.json()["error"]["param"] == FIELD
