"""`input_image` parts on /v1/responses (the official `openai` client's responses.create), on the
LLaVA-layout test model: answers, follow-up turns that keep the image, streaming, and the 400s."""

from __future__ import annotations

import httpx
import pytest

from tests.vision.build_model import TOKENS_PER_IMAGE
from tests.vision.conftest import MODEL, data_url, png_bytes


def image_input(url: str, text: str = "What is in this picture?", **extra) -> list[dict]:
    return [{"role": "user", "content": [{"type": "input_image", "image_url": url, **extra},
                                         {"type": "input_text", "text": text}]}]


def respond(client, input, **kw):
    return client.responses.create(model=MODEL, input=input, max_output_tokens=3, temperature=0, **kw)


def test_an_input_image_answers(client):
    url = data_url(png_bytes(40))
    text_only = respond(client, [{"role": "user", "content": [{"type": "input_text", "text": "What is in this picture?"}]}])
    first = respond(client, image_input(url, detail="low"))
    assert first.status in ("completed", "incomplete") and first.output_text
    # the image is one placeholder, TOKENS_PER_IMAGE positions, plus the newline after it
    assert first.usage.input_tokens == text_only.usage.input_tokens + TOKENS_PER_IMAGE + 1
    other = respond(client, image_input(data_url(png_bytes(41))))
    assert other.usage.input_tokens == first.usage.input_tokens
    assert other.usage.input_tokens_details.cached_tokens < TOKENS_PER_IMAGE
    again = respond(client, image_input(url))
    assert again.output_text == first.output_text and again.usage.input_tokens_details.cached_tokens > 0


def test_a_follow_up_turn_keeps_the_image(client):
    first = respond(client, image_input(data_url(png_bytes(42))))
    follow = respond(client, "And what colour is it?", previous_response_id=first.id)
    assert follow.output_text
    assert follow.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens
    assert follow.usage.input_tokens_details.cached_tokens >= TOKENS_PER_IMAGE  # the image's positions


def test_streamed(client):
    messages = image_input(data_url(png_bytes(43)))
    whole = respond(client, messages)
    events = list(respond(client, messages, stream=True))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == whole.output_text
    assert events[-1].type in ("response.completed", "response.incomplete")  # max_output_tokens
    assert events[-1].response.usage.input_tokens == whole.usage.input_tokens


def post(base: str, input, model: str = MODEL) -> httpx.Response:
    return httpx.post(base + "/v1/responses", timeout=60, json={"model": model, "max_output_tokens": 2, "input": input})


@pytest.mark.parametrize("part, param, message", [
    ({"type": "input_image", "image_url": "data:image/png;base64,not*base64"}, "input.0.content.0.image_url",
     "not valid base64"),
    ({"type": "input_image", "image_url": "gopher://example.com/a.png"}, "input.0.content.0.image_url",
     "unsupported image URL scheme"),
    ({"type": "input_image", "file_id": "file_123"}, "input", "input.0.content.0.file_id is not supported"),
    ({"type": "input_image", "detail": "high"}, "input", "an input_image needs image_url"),
])
def test_bad_input_images(serve, part, param, message):
    resp = post(serve(), [{"role": "user", "content": [part]}])
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert message in error["message"] and error["param"] == param


def test_images_only_from_users_and_not_for_text_only_models(serve, smollm2_engine):
    image = {"type": "input_image", "image_url": data_url(png_bytes(44))}
    resp = post(serve(), [{"role": "system", "content": [image]}, {"role": "user", "content": "Hi"}])
    assert resp.status_code == 400 and "only allowed in user messages" in resp.json()["error"]["message"]
    url = serve(engine=smollm2_engine, name="smollm2-135m")
    resp = post(url, image_input(image["image_url"]), model="smollm2-135m")
    assert resp.status_code == 400
    assert resp.json()["error"]["message"] == "this model does not accept images: it is a text-only model"
    assert resp.json()["error"]["param"] == "input.0.content"
