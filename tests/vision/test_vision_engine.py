"""Images through the engine on the LLaVA-layout test model (SmolLM2 + a random vision tower)."""

from __future__ import annotations

import numpy as np
import pytest

from mlxctl.api.prompt import render_chat
from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.prefix_config import PrefixConfig
from mlxctl.engine.sampling import SamplingParams
from mlxctl.engine.scheduler import SchedulerConfig
from mlxctl.errors import BadInputError
from mlxctl.vision.images import decode_image
from tests.vision.build_model import TOKENS_PER_IMAGE
from tests.vision.conftest import png_bytes

GREEDY = SamplingParams(temperature=0.0, max_tokens=5)


def prompt(engine, text="Describe this image.", images=1, system=None):
    token = engine.model.vision.image_token
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": token * images + "\n" + text}]
    return render_chat(engine.model.tokenizer, messages)


def image(seed):
    return decode_image(png_bytes(seed), f"image-{seed}")


def vision_stats(engine):
    return engine.stats()["vision"]


def test_the_model_loads_as_a_vision_model(vision_engine):
    vision = vision_engine.model.vision
    assert vision.image_token == "<image>" and vision.tokens_per_image == TOKENS_PER_IMAGE
    assert vision_engine.vocab_size == 49153


def test_an_image_request_generates(vision_engine):
    ids = prompt(vision_engine, "What is in this picture?")
    done = vision_engine.submit(ids, GREEDY, images=[image(10)]).collect()
    assert done.usage.prompt_tokens == len(ids) - 1 + TOKENS_PER_IMAGE
    assert done.usage.completion_tokens == 5 and done.text.strip()


def test_embeddings_equal_mlx_vlm_llava(vision_engine, llava_dir):
    """The spliced prompt embeddings are what mlx-vlm's own LLaVA model builds."""
    import mlx.core as mx
    import mlx_vlm
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    vision = vision_engine.model.vision
    img = image(11)
    tokens, spans = vision.expand(prompt(vision_engine), 1)
    ours = vision.embed(tokens, 0, spans, vision.encode([img]))
    ref_model, _ = mlx_vlm.load(str(llava_dir))
    ref_model.set_dtype(mx.float32)
    pixels = CLIPImageProcessorPil.from_pretrained(str(llava_dir))(img.image, return_tensors="np")["pixel_values"]
    theirs = ref_model.get_input_embeddings(mx.array([tokens]), mx.array(pixels)).inputs_embeds[0]
    np.testing.assert_allclose(np.array(ours), np.array(theirs), atol=2e-4)


def test_a_repeated_image_is_not_encoded_again(vision_engine):
    img = image(12)
    before = vision_stats(vision_engine)
    vision_engine.submit(prompt(vision_engine, "One."), GREEDY, images=[img]).collect()
    mid = vision_stats(vision_engine)
    assert mid["images_encoded"] == before["images_encoded"] + 1
    # another prompt whose text differs before the image: no prefix to share, but the features are cached
    vision_engine.submit(prompt(vision_engine, "Two.", system="Be brief."), GREEDY, images=[image(12)]).collect()
    after = vision_stats(vision_engine)
    assert after["images_encoded"] == mid["images_encoded"]
    assert after["feature_cache"]["hits"] == mid["feature_cache"]["hits"] + 1


def test_prefix_cache_is_keyed_by_the_image(vision_engine):
    ids = prompt(vision_engine, "Is there a cat?")
    first = vision_engine.submit(ids, GREEDY, images=[image(13)]).collect()
    again = vision_engine.submit(ids, GREEDY, images=[image(13)]).collect()
    other = vision_engine.submit(ids, GREEDY, images=[image(14)]).collect()
    assert first.usage.cached_tokens == 0
    assert again.usage.cached_tokens >= 16 and again.token_ids == first.token_ids
    assert other.usage.cached_tokens == 0


def test_image_and_text_requests_share_the_batch(vision_engine):
    text_ids = prompt(vision_engine, "What is the capital of France?", images=0)
    img_ids = prompt(vision_engine, "What colour dominates?")
    params = SamplingParams(temperature=0.0, max_tokens=6)
    text_alone = vision_engine.submit(text_ids, params).collect()
    img_alone = vision_engine.submit(img_ids, params, images=[image(15)], cache_salt="alone").collect()
    streams = [vision_engine.submit(img_ids, params, images=[image(15)], cache_salt="together"),
               vision_engine.submit(text_ids, params, cache_salt="together")]
    img_both, text_both = (s.collect() for s in streams)
    assert text_both.token_ids == text_alone.token_ids and "Paris" in text_alone.text
    assert img_both.token_ids == img_alone.token_ids


def test_two_images_in_one_prompt(vision_engine):
    ids = prompt(vision_engine, "Compare them.", images=2)
    done = vision_engine.submit(ids, GREEDY, images=[image(16), image(17)]).collect()
    assert done.usage.prompt_tokens == len(ids) - 2 + 2 * TOKENS_PER_IMAGE
    swapped = vision_engine.submit(ids, GREEDY, images=[image(17), image(16)]).collect()
    assert swapped.usage.cached_tokens == 0  # the order of the images is part of the key


def test_chunked_prefill_and_a_failed_step_give_the_same_answer(llava_loaded):
    """Chunks of 7 tokens cut through the image's span; a step that fails mid-decode resumes
    from its checkpoint (prompt embeddings, then the tokens already sent)."""
    params = SamplingParams(temperature=0.0, max_tokens=6)
    plain = Engine(lambda: llava_loaded, EngineConfig(prefix=PrefixConfig(enabled=False))).start()
    try:
        ids = prompt(plain, "Tell me more.")
        want = plain.submit(ids, params, images=[image(18)]).collect().token_ids
    finally:
        plain.shutdown()
    failed = []

    def fault(step):
        if step == 12 and not failed:
            failed.append(step)
            raise RuntimeError("injected fault")

    cfg = EngineConfig(scheduler=SchedulerConfig(prefill_chunk=7), prefix=PrefixConfig(enabled=False),
                       fault_hook=fault, retry_backoff_s=0.0)
    chunked = Engine(lambda: llava_loaded, cfg).start()
    try:
        got = chunked.submit(ids, params, images=[image(18)]).collect().token_ids
    finally:
        chunked.shutdown()
    assert failed and got == want


def test_placeholders_must_match_the_images(vision_engine):
    with pytest.raises(BadInputError, match="marks 1 image"):
        vision_engine.submit(prompt(vision_engine), GREEDY, images=[image(1), image(2)])


def test_a_text_only_model_refuses_images():
    from tests.engine.tiny import tiny_loaded

    engine = Engine(lambda: tiny_loaded()).start()
    try:
        with pytest.raises(BadInputError, match="this model does not accept images"):
            engine.submit([1, 2, 3], GREEDY, images=[image(1)])
    finally:
        engine.shutdown()
