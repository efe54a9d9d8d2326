"""Qwen2.5-VL, the third vision family, on SmolLM2's real text tower (as qwen2) and a random vision
tower: its pixels against Hugging Face's processor, its 3-D positions against mlx-vlm's
get_rope_index, greedy answers against mlx-vlm's own generate, batching with text requests, and a
chat with an image through the daemon."""

from __future__ import annotations

import json

import numpy as np
import openai
import pytest

from mlxctl.api.prompt import render_chat
from mlxctl.engine.sampling import SamplingParams
from mlxctl.errors import BadInputError
from mlxctl.vision.images import decode_image
from tests.vision.build_qwen_vl import MAX_PIXELS, build_qwen_vl
from tests.vision.conftest import data_url, engine_on, png_bytes

PAD = "<|image_pad|>"
SIZES = ((80, 60), (50, 130))  # 2x3 and 5x2 merged patches: two images of different sizes


@pytest.fixture(scope="module")
def qwen_dir(smollm2, tmp_path_factory):
    return build_qwen_vl(smollm2.path, tmp_path_factory.mktemp("models") / "qwen-vl-test")


@pytest.fixture(scope="module")
def qwen_loaded(qwen_dir):
    from mlxctl.models.loader import load_model

    return load_model(qwen_dir)


@pytest.fixture(scope="module")
def qwen_engine(qwen_loaded):
    yield from engine_on(qwen_loaded)


@pytest.fixture(scope="module")
def reference(qwen_dir):
    """mlx-vlm's own Qwen2.5-VL model on the same folder."""
    from mlx_vlm.utils import load_model

    return load_model(qwen_dir)


def image(seed, size=SIZES[0]):
    return decode_image(png_bytes(seed, size), f"image-{seed}")


def chat(loaded, text, images=1):
    return render_chat(loaded.tokenizer, [{"role": "user", "content": PAD * images + "\n" + text}])


def hf_pixels(qwen_dir, images):
    """Hugging Face's Qwen2VLImageProcessor (its Pillow backend) on the folder's config."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    cfg = json.loads((qwen_dir / "preprocessor_config.json").read_text())
    proc = Qwen2VLImageProcessorPil(**{k: v for k, v in cfg.items() if not k.endswith(("_type", "_class"))})
    out = proc([img.image for img in images], return_tensors="np")
    return out["pixel_values"], out["image_grid_thw"]


def mlx_vlm_greedy(reference, qwen_dir, tokens, images, n):
    """mlx-vlm's generate_step, greedy: the tokens and each one's logprob."""
    import mlx.core as mx
    from mlx_vlm.generate.ar import generate_step

    pixels, grid = hf_pixels(qwen_dir, images)
    steps = generate_step(mx.array([tokens]), reference, mx.array(pixels), None, max_tokens=n, temperature=0.0,
                          image_grid_thw=mx.array(grid))
    out = [(int(tok), float(logprobs.reshape(-1)[int(tok)])) for tok, logprobs in steps]
    return [t for t, _ in out], [lp for _, lp in out]


def test_a_qwen_folder_gets_its_vision_tower(qwen_loaded):
    vision = qwen_loaded.vision
    assert vision is not None and vision.model_type == "qwen2_5_vl" and vision.image_token == PAD
    tok = qwen_loaded.tokenizer
    begin, end, pad = (tok.encode(m, add_special_tokens=False)[0]
                       for m in ("<|vision_start|>", "<|vision_end|>", PAD))
    tokens, spans = vision.expand([7, pad, 8, pad, 9], [image(1, SIZES[0]), image(2, SIZES[1])])
    assert tokens == [7, begin, *[pad] * 6, end, 8, begin, *[pad] * 10, end, 9]  # as Qwen's processor writes it
    assert spans == ((2, 6), (11, 10))
    assert vision.stats()["tokens_per_image"] is None  # by image size


@pytest.mark.parametrize("size", [*SIZES, (600, 400), (20, 30)])
def test_pixels_and_grid_equal_hugging_faces_processor(qwen_loaded, qwen_dir, size):
    """smart_resize (to multiples of 28, within min/max pixels: 600x400 is scaled down, 20x30
    up), the patch order of the 2x2 merge and the two temporal copies."""
    img = image(3, size)
    want, grid = hf_pixels(qwen_dir, [img])
    processing = qwen_loaded.vision.processing
    np.testing.assert_allclose(processing(img.image), want, atol=1e-5)
    rows, cols = processing.grid(img.size)
    assert [1, rows * 2, cols * 2] == grid[0].tolist() and rows * cols * 28 * 28 <= MAX_PIXELS


def test_positions_equal_mlx_vlm_get_rope_index(qwen_loaded, reference):
    import mlx.core as mx

    vision = qwen_loaded.vision
    images = [image(4, SIZES[0]), image(5, SIZES[1])]
    tokens, spans = vision.expand(chat(qwen_loaded, "Compare them.", images=2), images)
    grid = mx.array([[1, 2 * r, 2 * c] for r, c in (vision.grid(img) for img in images)])
    want, delta = reference.language_model.get_rope_index(mx.array([tokens]), grid)
    layout = vision.mrope_layout(images, spans)
    assert layout.positions(0, len(tokens)).tolist() == np.array(want)[:, 0].tolist()
    assert layout.delta == int(delta.item()) < 0
    assert layout.positions(9, 5).tolist() == np.array(want)[:, 0, 9:14].tolist()  # any chunk of the prompt


def test_one_image_greedy_equals_mlx_vlm_generate(qwen_engine, qwen_dir, reference):
    ids = chat(qwen_engine.model, "Describe this image.")
    img = image(6)
    done = qwen_engine.submit(ids, SamplingParams(temperature=0.0, max_tokens=10, logprobs=True),
                              images=[img]).collect()
    tokens, _ = qwen_engine.model.vision.expand(ids, [img])
    want, logprobs = mlx_vlm_greedy(reference, qwen_dir, tokens, [img], 10)
    assert list(done.token_ids) == want and done.text.strip()
    np.testing.assert_allclose([lp.logprob for lp in done.logprobs], logprobs, atol=2e-2)


def test_two_images_of_different_sizes_equal_mlx_vlm_generate(qwen_engine, qwen_dir, reference):
    ids = chat(qwen_engine.model, "Describe these images.", images=2)
    images = [image(7, SIZES[0]), image(8, SIZES[1])]
    done = qwen_engine.submit(ids, SamplingParams(temperature=0.0, max_tokens=10, logprobs=True),
                              images=images).collect()
    tokens, _ = qwen_engine.model.vision.expand(ids, images)
    assert done.usage.prompt_tokens == len(ids) - 2 + 2 * 2 + 6 + 10  # each image's markers and positions
    want, logprobs = mlx_vlm_greedy(reference, qwen_dir, tokens, images, 10)
    assert list(done.token_ids) == want
    np.testing.assert_allclose([lp.logprob for lp in done.logprobs], logprobs, atol=2e-2)


def test_an_image_request_batched_with_text_requests_answers_as_alone(qwen_engine):
    """Decoding together, each row rotates by its own position (the image row's is its KV
    offset plus its delta, the text rows' their offset)."""
    params = SamplingParams(temperature=0.0, max_tokens=8)
    text_ids = render_chat(qwen_engine.model.tokenizer, [{"role": "user", "content": "What is the capital of France?"}])
    other_ids = render_chat(qwen_engine.model.tokenizer, [{"role": "user", "content": "Name a colour."}])
    img_ids = chat(qwen_engine.model, "What is in the picture?")
    text_alone = qwen_engine.submit(text_ids, params).collect()
    img_alone = qwen_engine.submit(img_ids, params, images=[image(9)], cache_salt="alone").collect()
    streams = [qwen_engine.submit(text_ids, params, cache_salt="together"),
               qwen_engine.submit(img_ids, params, images=[image(9)], cache_salt="together"),
               qwen_engine.submit(other_ids, params, cache_salt="together")]
    text_both, img_both, _ = (s.collect() for s in streams)
    assert "Paris" in text_alone.text and text_both.token_ids == text_alone.token_ids
    assert img_both.token_ids == img_alone.token_ids


def test_an_image_too_long_for_its_width_is_refused_by_name(qwen_engine):
    with pytest.raises(BadInputError, match="image-10.*more than 200 times"):
        qwen_engine.submit(chat(qwen_engine.model, "Hm?"), SamplingParams(max_tokens=2),
                           images=[image(10, (2010, 10))])


def test_chat_with_an_image_url_through_the_daemon(serve, qwen_engine):
    client = openai.OpenAI(base_url=serve(engine=qwen_engine, name="qwen-vl-test") + "/v1", api_key="x",
                           max_retries=0)
    content = [{"type": "image_url", "image_url": {"url": data_url(png_bytes(11, SIZES[1]))}},
               {"type": "text", "text": "What is in the picture?"}]
    answer = client.chat.completions.create(model="qwen-vl-test", messages=[{"role": "user", "content": content}],
                                            max_tokens=6, temperature=0)
    direct = qwen_engine.submit(chat(qwen_engine.model, "What is in the picture?"),
                                SamplingParams(temperature=0.0, max_tokens=6),
                                images=[decode_image(png_bytes(11, SIZES[1]), "x")]).collect()
    assert answer.choices[0].message.content == direct.text
    assert answer.usage.prompt_tokens == direct.usage.prompt_tokens


def test_anthropic_counts_each_images_own_positions(serve, qwen_engine):
    """count_tokens and a stream's usage count an image as its markers and its own number of
    positions (6 and 10 here), as the engine expands it."""
    import anthropic
    import base64

    client = anthropic.Anthropic(base_url=serve(engine=qwen_engine, name="qwen-vl-test"), api_key="x", max_retries=0)
    blocks = [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                           "data": base64.b64encode(png_bytes(12 + i, size)).decode()}}
              for i, size in enumerate(SIZES)]
    messages = [{"role": "user", "content": [*blocks, {"type": "text", "text": "Compare them."}]}]
    counted = client.messages.count_tokens(model="qwen-vl-test", messages=messages).input_tokens
    with client.messages.stream(model="qwen-vl-test", messages=messages, max_tokens=2) as stream:
        streamed = stream.get_final_message().usage
    assert counted == streamed.input_tokens + streamed.cache_read_input_tokens
    whole = client.messages.create(model="qwen-vl-test", messages=messages, max_tokens=2).usage
    assert counted == whole.input_tokens + whole.cache_read_input_tokens


def test_chunked_prefill_a_prefix_hit_and_a_failed_step_give_the_same_answer(qwen_loaded, qwen_engine):
    """Chunks of 5 tokens cut through both images (each chunk rotates by its own slice of the
    3-D positions); a repeat is served from the prefix cache and continues from the right
    position; a step that fails mid-decode resumes from its checkpoint."""
    from mlxctl.engine.engine import Engine, EngineConfig
    from mlxctl.engine.prefix_config import PrefixConfig
    from mlxctl.engine.scheduler import SchedulerConfig

    params = SamplingParams(temperature=0.0, max_tokens=8)
    ids = chat(qwen_loaded, "Tell me about them.", images=2)
    images = [image(14, SIZES[1]), image(15, SIZES[0])]
    want = qwen_engine.submit(ids, params, images=images).collect()
    again = qwen_engine.submit(ids, params, images=images).collect()
    assert again.usage.cached_tokens >= 16 and again.token_ids == want.token_ids
    failed = []

    def fault(step):
        if step == 14 and not failed:
            failed.append(step)
            raise RuntimeError("injected fault")

    cfg = EngineConfig(scheduler=SchedulerConfig(prefill_chunk=5), prefix=PrefixConfig(enabled=False),
                       fault_hook=fault, retry_backoff_s=0.0)
    chunked = Engine(lambda: qwen_loaded, cfg).start()
    try:
        got = chunked.submit(ids, params, images=images).collect().token_ids
    finally:
        chunked.shutdown()
    assert failed and got == want.token_ids
