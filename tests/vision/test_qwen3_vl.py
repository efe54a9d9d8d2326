"""Qwen3-VL on a tiny random model (tests/vision/build_qwen3_vl.py): 16 px patches, interleaved
mrope and deepstack. Greedy tokens and logprobs against mlx-vlm's own generate, batching with text
requests, and chunked prefill through the images (deepstack rows follow each chunk)."""

from __future__ import annotations

import numpy as np
import pytest

from mlxctl.engine.sampling import SamplingParams
from tests.vision.build_qwen3_vl import MAX_PIXELS, build_qwen3_vl
from tests.vision.conftest import engine_on
from tests.vision.test_qwen_vl import SIZES, chat, hf_pixels, image, mlx_vlm_greedy


@pytest.fixture(scope="module")
def qwen3_dir(smollm2, tmp_path_factory):
    return build_qwen3_vl(smollm2.path, tmp_path_factory.mktemp("models") / "qwen3-vl-test")


@pytest.fixture(scope="module")
def qwen3_loaded(qwen3_dir):
    from mlxctl.models.loader import load_model

    return load_model(qwen3_dir)


@pytest.fixture(scope="module")
def qwen3_engine(qwen3_loaded):
    yield from engine_on(qwen3_loaded)


def test_a_qwen3_folder_gets_its_vision_tower_and_deepstack(qwen3_loaded):
    vision = qwen3_loaded.vision
    assert (vision.model_type, vision.deepstack_levels, vision.mrope_interleaved) == ("qwen3_vl", 2, True)
    assert [vision.tokens_for(image(1, size)) for size in SIZES] == [2 * 2, 4 * 2]  # 32 px blocks
    assert type(qwen3_loaded.model.layers[1]).__name__ == "DeepstackLayer"
    assert type(qwen3_loaded.model.layers[2]).__name__ != "DeepstackLayer"


@pytest.mark.parametrize("size", [*SIZES, (400, 300)])
def test_pixels_equal_hugging_faces_processor(qwen3_loaded, qwen3_dir, size):
    img = image(2, size)
    want, grid = hf_pixels(qwen3_dir, [img])
    np.testing.assert_allclose(qwen3_loaded.vision.processing(img.image), want, atol=1e-5)
    rows, cols = qwen3_loaded.vision.grid(img)
    assert [1, 2 * rows, 2 * cols] == grid[0].tolist() and rows * cols * 32 * 32 <= MAX_PIXELS


def test_two_images_greedy_equals_mlx_vlm_generate(qwen3_engine, qwen3_dir):
    from mlx_vlm.utils import load_model

    ids = chat(qwen3_engine.model, "Describe these images.", images=2)
    images = [image(3, SIZES[0]), image(4, SIZES[1])]
    done = qwen3_engine.submit(ids, SamplingParams(temperature=0.0, max_tokens=8, logprobs=True),
                               images=images).collect()
    tokens, _ = qwen3_engine.model.vision.expand(ids, images)
    want, logprobs = mlx_vlm_greedy(load_model(qwen3_dir), qwen3_dir, tokens, images, 8)
    assert list(done.token_ids) == want
    np.testing.assert_allclose([lp.logprob for lp in done.logprobs], logprobs, atol=1e-3)


def test_batched_with_text_and_chunked_prefill_answer_as_alone(qwen3_loaded, qwen3_engine):
    from mlxctl.api.prompt import render_chat
    from mlxctl.engine.engine import Engine, EngineConfig
    from mlxctl.engine.prefix_config import PrefixConfig
    from mlxctl.engine.scheduler import SchedulerConfig

    params = SamplingParams(temperature=0.0, max_tokens=8, logprobs=True)
    text_ids = render_chat(qwen3_loaded.tokenizer, [{"role": "user", "content": "What is the capital of France?"}])
    img_ids = chat(qwen3_loaded, "Tell me about them.", images=2)
    images = [image(5, SIZES[1]), image(6, SIZES[0])]
    text_alone = qwen3_engine.submit(text_ids, params).collect()
    img_alone = qwen3_engine.submit(img_ids, params, images=images, cache_salt="alone").collect()
    streams = [qwen3_engine.submit(img_ids, params, images=images, cache_salt="together"),
               qwen3_engine.submit(text_ids, params, cache_salt="together")]
    img_both, text_both = (s.collect() for s in streams)
    assert text_both.token_ids == text_alone.token_ids and img_both.token_ids == img_alone.token_ids
    again = qwen3_engine.submit(img_ids, params, images=images, cache_salt="alone").collect()
    assert again.usage.cached_tokens > 32 and again.token_ids == img_alone.token_ids  # images' KV from the cache
    cfg = EngineConfig(scheduler=SchedulerConfig(prefill_chunk=5), prefix=PrefixConfig(enabled=False))
    chunked = Engine(lambda: qwen3_loaded, cfg).start()
    try:
        got = chunked.submit(img_ids, params, images=images).collect()
    finally:
        chunked.shutdown()
    assert got.token_ids == img_alone.token_ids
    np.testing.assert_allclose([lp.logprob for lp in got.logprobs], [lp.logprob for lp in img_alone.logprobs],
                               atol=1e-4)
