"""Images over HTTP: /v1/chat/completions (the official `openai` client, images as data URLs or
local files) and /v1/messages (Anthropic image blocks), on the LLaVA-layout test model."""

from __future__ import annotations

import base64

import anthropic
import httpx
import pytest

from tests.vision.build_model import TOKENS_PER_IMAGE
from tests.vision.conftest import MODEL, data_url, png_bytes


def user(text: str, *urls: str) -> list[dict]:
    parts = [{"type": "image_url", "image_url": {"url": u}} for u in urls]
    return [{"role": "user", "content": [*parts, {"type": "text", "text": text}]}]


def chat(client, messages, **kw):
    return client.chat.completions.create(model=MODEL, messages=messages, temperature=0, max_tokens=4, **kw)


def post(url: str, body: dict) -> httpx.Response:
    return httpx.post(url + "/v1/chat/completions", json={"model": MODEL, "max_tokens": 2, **body}, timeout=60)


def test_an_image_as_a_data_url(client):
    messages = user("What is in this image?", data_url(png_bytes(20)))
    first = chat(client, messages)
    assert first.choices[0].message.content and first.usage.completion_tokens == 4
    assert first.usage.prompt_tokens > TOKENS_PER_IMAGE
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    again = chat(client, messages)
    assert again.usage.prompt_tokens_details.cached_tokens > 0
    assert again.choices[0].message.content == first.choices[0].message.content
    other = chat(client, user("What is in this image?", data_url(png_bytes(21))))
    assert other.usage.prompt_tokens == first.usage.prompt_tokens
    assert other.usage.prompt_tokens_details.cached_tokens == 0


def test_two_images_streamed(client):
    messages = user("Which one is brighter?", data_url(png_bytes(22)), data_url(png_bytes(23, fmt="JPEG"), "image/jpeg"))
    whole = chat(client, messages)
    chunks = list(chat(client, messages, stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == whole.choices[0].message.content
    assert chunks[-1].usage.prompt_tokens == whole.usage.prompt_tokens
    one = chat(client, user("Which one is brighter?", data_url(png_bytes(22))))
    assert whole.usage.prompt_tokens == one.usage.prompt_tokens + TOKENS_PER_IMAGE + 1  # + the newline joining parts


def test_local_files_only_from_the_allowed_folder(serve, tmp_path):
    (tmp_path / "cat.png").write_bytes(png_bytes(24))
    url = f"file://{tmp_path / 'cat.png'}"
    refused = post(serve(), {"messages": user("Hi", url)})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert "file:// image URLs are not allowed" in error["message"]
    assert error["param"] == "messages.0.content.0.image_url.url"
    base = serve(allowed_local_media_path=str(tmp_path))
    allowed = post(base, {"messages": user("Hi", url)})
    assert allowed.status_code == 200, allowed.text
    assert allowed.json()["usage"]["prompt_tokens"] > TOKENS_PER_IMAGE
    vision = httpx.get(base + "/v1/status", timeout=30).json()["engine"]["vision"]
    assert vision["tokens_per_image"] == TOKENS_PER_IMAGE and vision["images_encoded"] >= 1
    assert set(vision["feature_cache"]) >= {"entries", "bytes", "hits", "misses"}


@pytest.mark.parametrize("url, message", [
    ("data:image/png;base64,not*base64", "not valid base64"),
    ("data:image/png;base64," + base64.b64encode(b"GIF89a but not really").decode(), "not a decodable image"),
    ("ftp://example.com/cat.png", "unsupported image URL scheme"),
    ("data:application/pdf;base64,aGk=", "not a supported image type"),
])
def test_bad_images_are_400s_naming_the_field(serve, url, message):
    resp = post(serve(), {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "Look:"}, {"type": "image_url", "image_url": {"url": url}}]}]})
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert message in error["message"] and error["type"] == "invalid_request_error"
    assert error["param"] == "messages.0.content.1.image_url.url"


def test_request_shape_errors(serve):
    url = serve()
    system_image = {"role": "system", "content": [{"type": "image_url", "image_url": {"url": data_url(png_bytes())}}]}
    resp = post(url, {"messages": [system_image, *user("Hi")]})
    assert resp.status_code == 400 and "only allowed in user messages" in resp.json()["error"]["message"]
    resp = post(url, {"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]})
    assert resp.status_code == 400 and "text, image_url and video_url only" in resp.json()["error"]["message"]


def test_images_count_against_the_body_limit(serve):
    resp = post(serve(max_body_bytes=4096), {"messages": user("Hi", data_url(png_bytes(25, (200, 200))))})
    assert resp.status_code == 413


def test_a_text_only_model_refuses_images(serve, smollm2_engine):
    url = serve(engine=smollm2_engine, name="smollm2-135m")
    resp = httpx.post(url + "/v1/chat/completions", timeout=60, json={
        "model": "smollm2-135m", "messages": user("Hi", data_url(png_bytes()))})
    assert resp.status_code == 400
    assert "this model does not accept images" in resp.json()["error"]["message"]
    assert resp.json()["error"]["param"] == "messages.0.content"
    resp = httpx.post(url + "/v1/messages", timeout=60, json={
        "model": "smollm2-135m", "max_tokens": 2, "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": base64.b64encode(png_bytes()).decode()}}]}]})
    assert resp.status_code == 400 and "does not accept images" in resp.json()["error"]["message"]


def test_anthropic_image_blocks(serve):
    url = serve()
    client = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": base64.b64encode(png_bytes(26)).decode()}}
    messages = [{"role": "user", "content": [image, {"type": "text", "text": "What is this?"}]}]
    msg = client.messages.create(model=MODEL, messages=messages, max_tokens=3, extra_body={"temperature": 0})
    assert msg.content[0].text and msg.usage.output_tokens == 3
    counted = client.messages.count_tokens(model=MODEL, messages=messages)
    assert counted.input_tokens == msg.usage.input_tokens + msg.usage.cache_read_input_tokens > TOKENS_PER_IMAGE
    with client.messages.stream(model=MODEL, messages=messages, max_tokens=3, extra_body={"temperature": 0}) as stream:
        assert "".join(stream.text_stream) == msg.content[0].text
        assert stream.get_final_message().usage.input_tokens + stream.get_final_message().usage.cache_read_input_tokens \
            == counted.input_tokens
    bad = {"type": "image", "source": {"type": "file", "file_id": "file_123"}}
    resp = httpx.post(url + "/v1/messages", timeout=60, json={
        "model": MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": [bad]}]})
    assert resp.status_code == 400 and "base64 or url" in resp.json()["error"]["message"]
    url_source = {"type": "image", "source": {"type": "url", "url": "gopher://example.com/cat.png"}}
    resp = httpx.post(url + "/v1/messages", timeout=60, json={
        "model": MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": [url_source]}]})
    assert resp.status_code == 400 and "unsupported image URL scheme" in resp.json()["error"]["message"]
