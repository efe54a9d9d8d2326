"""Gemma 3, the second vision family: its image block, its features (checked against mlx-vlm's own
Gemma 3 model on the same weights) and a chat with an image through the daemon."""

from __future__ import annotations

import json

import numpy as np
import openai
import pytest

from tests.vision.build_gemma3 import TOKENS_PER_IMAGE, build_gemma3
from tests.vision.conftest import data_url, engine_on, png_bytes


@pytest.fixture(scope="module")
def gemma3_dir(smollm2, tmp_path_factory):
    return build_gemma3(smollm2.path, tmp_path_factory.mktemp("models") / "gemma3-test")


@pytest.fixture(scope="module")
def gemma3_loaded(gemma3_dir):
    from mlxctl.models.loader import load_model

    return load_model(gemma3_dir)


@pytest.fixture(scope="module")
def gemma3_engine(gemma3_loaded):
    yield from engine_on(gemma3_loaded)


def test_a_gemma3_folder_gets_its_vision_tower(gemma3_loaded):
    vision = gemma3_loaded.vision
    assert vision is not None and vision.model_type == "gemma3"
    assert vision.image_token == "<start_of_image>" and vision.tokens_per_image == TOKENS_PER_IMAGE
    tok = gemma3_loaded.tokenizer
    begin, soft, end = (tok.encode(m, add_special_tokens=False)[0]
                        for m in ("<start_of_image>", "<image_soft_token>", "<end_of_image>"))
    tokens, spans = vision.expand([7, begin, 8], 1)
    gap = tok.encode("\n\n", add_special_tokens=False)
    assert tokens == [7, *gap, begin, *[soft] * TOKENS_PER_IMAGE, end, *gap, 8]  # as Gemma 3's processor writes it
    assert spans == ((1 + len(gap) + 1, TOKENS_PER_IMAGE),)


def test_input_embeddings_match_mlx_vlm_gemma3(gemma3_dir, gemma3_loaded):
    import mlx.core as mx
    from mlx_vlm.models.gemma3 import Model, ModelConfig
    from mlx_vlm.models.gemma3.config import TextConfig, VisionConfig

    from mlxctl.vision.images import decode_image

    config = json.loads((gemma3_dir / "config.json").read_text())
    reference = Model(ModelConfig.from_dict({**config, "hidden_size": config["text_config"]["hidden_size"],
                                             "text_config": TextConfig.from_dict(config["text_config"]),
                                             "vision_config": VisionConfig.from_dict(config["vision_config"])}))
    weights = mx.load(str(gemma3_dir / "model.safetensors"))
    reference.load_weights(list(weights.items()), strict=False)  # same names: language_model.*, vision_tower.*, ...
    assert mx.array_equal(reference.multi_modal_projector.mm_input_projection_weight,
                          weights["multi_modal_projector.mm_input_projection_weight"])
    vision = gemma3_loaded.vision
    image = decode_image(png_bytes(seed=5, size=(90, 70)), "x")
    tok = gemma3_loaded.tokenizer
    begin = tok.encode("<start_of_image>", add_special_tokens=False)[0]
    tokens, spans = vision.expand(tok.encode("Look:", add_special_tokens=False) + [begin] +
                                  tok.encode(" what is it?", add_special_tokens=False), 1)
    ours = vision.embed(tokens, 0, spans, vision.encode([image]))
    pixels = mx.array(vision.processing(image.image)[None]).transpose(0, 3, 1, 2)  # mlx-vlm takes NCHW
    theirs = reference.get_input_embeddings(mx.array([tokens]), pixels, mask=mx.ones((1, len(tokens)))).inputs_embeds[0]
    np.testing.assert_allclose(np.array(ours), np.array(theirs), rtol=1e-4, atol=1e-5)
    start, n = spans[0]
    assert float(mx.abs(ours[start : start + n]).sum()) > 0  # the features, not zeros


def test_chat_with_an_image_through_the_daemon(serve, gemma3_engine):
    client = openai.OpenAI(base_url=serve(engine=gemma3_engine, name="gemma3-test") + "/v1", api_key="x",
                           max_retries=0)
    content = [{"type": "image_url", "image_url": {"url": data_url(png_bytes(seed=6))}},
               {"type": "text", "text": "What is in the picture?"}]
    messages = [{"role": "user", "content": content}]
    first = client.chat.completions.create(model="gemma3-test", messages=messages, max_tokens=6, temperature=0)
    text_only = client.chat.completions.create(model="gemma3-test", max_tokens=1, messages=[
        {"role": "user", "content": "<start_of_image>\nWhat is in the picture?"}])  # the same prompt, no image
    assert first.choices[0].finish_reason in ("length", "stop")
    gap = 2 * len(gemma3_engine.model.tokenizer.encode("\n\n", add_special_tokens=False))
    assert first.usage.prompt_tokens == text_only.usage.prompt_tokens + gap + TOKENS_PER_IMAGE + 1
    encoded = gemma3_engine.stats()["vision"]["images_encoded"]
    again = client.chat.completions.create(model="gemma3-test", messages=messages, max_tokens=6, temperature=0)
    assert again.choices[0].message.content == first.choices[0].message.content
    assert gemma3_engine.stats()["vision"]["images_encoded"] == encoded  # the feature cache had it


def test_anthropic_count_tokens_counts_the_image_block(serve, gemma3_engine):
    """count_tokens counts Gemma 3's whole image block: the soft tokens and the begin/end marks
    with their blank lines."""
    import base64

    import anthropic

    client = anthropic.Anthropic(base_url=serve(engine=gemma3_engine, name="gemma3-test"), api_key="x",
                                 max_retries=0)
    source = {"type": "base64", "media_type": "image/png", "data": base64.b64encode(png_bytes(seed=8)).decode()}
    messages = [{"role": "user", "content": [{"type": "image", "source": source},
                                             {"type": "text", "text": "What is this?"}]}]
    msg = client.messages.create(model="gemma3-test", messages=messages, max_tokens=1)
    counted = client.messages.count_tokens(model="gemma3-test", messages=messages)
    assert counted.input_tokens == msg.usage.input_tokens + msg.usage.cache_read_input_tokens
