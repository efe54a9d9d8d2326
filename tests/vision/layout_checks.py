"""Checks every vision family whose image block depends on the image (Idefics3, Mistral 3)
runs: an image request batched with text requests, and one chat through the daemon."""

from __future__ import annotations

import openai

from mlxctl.api.prompt import render_chat
from mlxctl.engine.sampling import SamplingParams
from mlxctl.vision.images import decode_image
from tests.vision.conftest import data_url, png_bytes

GREEDY = SamplingParams(temperature=0.0, max_tokens=8)


def prompt(engine, text="Describe this image.", images=1):
    content = engine.model.vision.image_token * images + "\n" + text
    return render_chat(engine.model.tokenizer, [{"role": "user", "content": content}])


def batched_like_alone(engine, img) -> None:
    """The image request's tokens, and two text requests', are the same in one batch as alone."""
    text_ids = prompt(engine, "What is the capital of France?", images=0)
    img_ids = prompt(engine, "What colour dominates?")
    text_alone = engine.submit(text_ids, GREEDY).collect()
    img_alone = engine.submit(img_ids, GREEDY, images=[img], cache_salt="alone").collect()
    streams = [engine.submit(text_ids, GREEDY, cache_salt="together"),
               engine.submit(img_ids, GREEDY, images=[img], cache_salt="together"),
               engine.submit(text_ids, GREEDY, cache_salt="together-2")]
    text_a, img_both, text_b = (s.collect() for s in streams)
    assert img_both.token_ids == img_alone.token_ids
    assert text_a.token_ids == text_b.token_ids == text_alone.token_ids and "Paris" in text_alone.text


def daemon_chat(serve, engine, name: str) -> None:
    """An image_url data URI through the official openai client: an answer, and the prompt
    counted with the image's whole block in place of its placeholder."""
    client = openai.OpenAI(base_url=serve(engine=engine, name=name) + "/v1", api_key="x", max_retries=0)
    png = png_bytes(seed=6)
    content = [{"type": "image_url", "image_url": {"url": data_url(png)}},
               {"type": "text", "text": "What is in the picture?"}]
    done = client.chat.completions.create(model=name, messages=[{"role": "user", "content": content}],
                                          max_tokens=6, temperature=0)
    placeholder = engine.model.vision.image_token
    text_only = client.chat.completions.create(model=name, max_tokens=1, messages=[
        {"role": "user", "content": f"{placeholder}\nWhat is in the picture?"}])  # the same prompt, no image
    block = engine.model.vision.layout.block(decode_image(png, "x").image)
    assert done.choices[0].finish_reason in ("length", "stop") and done.choices[0].message.content
    assert done.usage.prompt_tokens == text_only.usage.prompt_tokens - 1 + len(block)
