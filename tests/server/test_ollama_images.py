"""Images (base64 lists on messages, and on /api/generate) with the ollama client, on the
LLaVA-layout test model of tests/vision."""

from __future__ import annotations

import base64

import httpx
import ollama
import pytest

from tests.vision.build_model import TOKENS_PER_IMAGE
from tests.vision.conftest import MODEL, llava_dir, llava_loaded, png_bytes, serve, vision_engine  # noqa: F401

PNG = base64.b64encode(png_bytes()).decode()


@pytest.fixture
def url(serve) -> str:  # noqa: F811
    return serve()


@pytest.fixture
def client(url) -> ollama.Client:
    return ollama.Client(host=url)


def test_a_chat_image_becomes_the_models_image_positions(client):
    text = client.chat(model=MODEL, messages=[{"role": "user", "content": "Look."}], options={"num_predict": 1})
    seen = client.chat(model=MODEL, messages=[{"role": "user", "content": "Look.", "images": [PNG]}],
                       options={"num_predict": 1})
    assert seen.prompt_eval_count == text.prompt_eval_count + TOKENS_PER_IMAGE + 1  # + the newline joining parts


def test_generate_takes_images(client):
    out = client.generate(model=MODEL, prompt="Look.", images=[PNG], options={"num_predict": 1})
    assert out.prompt_eval_count > TOKENS_PER_IMAGE and out.eval_count == 1


def test_bad_base64_is_400_naming_the_image(url):
    """The client checks images itself: the body it would not send, posted with httpx."""
    r = httpx.post(f"{url}/api/chat", timeout=60, json={"model": MODEL, "stream": False, "messages": [
        {"role": "user", "content": "x", "images": ["not base64!"]}]})
    assert r.status_code == 400 and "messages.0.images.0" in r.json()["error"]
