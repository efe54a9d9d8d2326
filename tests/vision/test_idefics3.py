"""Idefics3 / SmolVLM: SmolLM2's real text tower with a random SigLIP tower and pixel-shuffle
connector. Its tiles and prompt block are checked against Hugging Face's own processor, its
greedy answer against mlx-vlm's generate on the same folder; then batching and the daemon."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from mlxctl.vision.images import decode_image
from tests.vision.build_idefics3 import SEQ_LEN, build_idefics3
from tests.vision.conftest import engine_on, png_bytes
from tests.vision.layout_checks import GREEDY, batched_like_alone, daemon_chat, prompt


@pytest.fixture(scope="module")
def idefics3_dir(smollm2, tmp_path_factory):
    return build_idefics3(smollm2.path, tmp_path_factory.mktemp("models") / "idefics3-test")


@pytest.fixture(scope="module")
def idefics3_loaded(idefics3_dir):
    from mlxctl.models.loader import load_model

    return load_model(idefics3_dir)


@pytest.fixture(scope="module")
def idefics3_engine(idefics3_loaded):
    yield from engine_on(idefics3_loaded)


def image(seed, size=(80, 60)):
    return decode_image(png_bytes(seed, size=size), f"image-{seed}")


def hf_processor(folder):
    from transformers.models.smolvlm.image_processing_pil_smolvlm import SmolVLMImageProcessorPil

    return SmolVLMImageProcessorPil.from_pretrained(str(folder))


@pytest.mark.slow  # over 5 s on CI's two cores
def test_the_family_is_detected_from_model_type(idefics3_loaded, smollm2, tmp_path):
    from mlxctl.models.loader import load_model

    assert idefics3_loaded.vision.model_type == "idefics3" and idefics3_loaded.vision.image_token == "<image>"
    smolvlm = load_model(build_idefics3(smollm2.path, tmp_path / "smolvlm-test", model_type="smolvlm"))
    assert smolvlm.vision is not None and smolvlm.vision.model_type == "smolvlm"
    assert smolvlm.vision.tokens_per_image == SEQ_LEN


@pytest.mark.parametrize("size", [(80, 60), (60, 80), (20, 30), (200, 40), (33, 33)])
def test_tiles_and_block_are_the_processors(idefics3_dir, idefics3_loaded, size):
    """Pixels and the prompt block for one image, as Hugging Face's SmolVLM processor makes
    them (its PIL image processor; its prompt-string function)."""
    from transformers.models.smolvlm.processing_smolvlm import get_image_prompt_string

    vision, img = idefics3_loaded.vision, image(3, size)
    theirs = hf_processor(idefics3_dir)(img.image, return_row_col_info=True)
    pixels = theirs["pixel_values"][0].transpose(0, 2, 3, 1)  # (tiles, H, W, C)
    np.testing.assert_allclose(vision.layout.tiling.tiles(img.image), pixels, atol=1e-6)
    rows, cols = theirs["rows"][0][0], theirs["cols"][0][0]
    assert vision.layout.tiling.grid(img.size) == (rows, cols)
    text = get_image_prompt_string(rows, cols, SEQ_LEN, "<fake_token_around_image>", "<image>", "<global-img>")
    tok = idefics3_loaded.tokenizer
    before, after = tok.encode("Look:", add_special_tokens=False), tok.encode("what?", add_special_tokens=False)
    tokens, spans = vision.expand(before + [vision.image_token_id] + after, [img])
    assert tokens == before + tok.encode(text, add_special_tokens=False) + after
    assert spans == ((len(before), len(tokens) - len(before) - len(after)),)


def test_greedy_answer_equals_mlx_vlm_generate(idefics3_dir, idefics3_engine):
    """One image request through the engine gives the tokens mlx-vlm's own generate_step gives
    on the same folder, image and prompt (pixels from Hugging Face's processor)."""
    import mlx.core as mx
    from mlx_vlm.generate import generate_step
    from mlx_vlm.utils import load_model

    img = image(4)
    ids = prompt(idefics3_engine)
    ours = idefics3_engine.submit(ids, GREEDY, images=[img]).collect()
    expanded, _ = idefics3_engine.model.vision.expand(ids, [img])
    reference = load_model(idefics3_dir)
    processed = hf_processor(idefics3_dir)(img.image)
    steps = generate_step(mx.array([expanded]), reference, mx.array(processed["pixel_values"]), None,
                          max_tokens=GREEDY.max_tokens, temperature=0.0,
                          pixel_attention_mask=mx.array(processed["pixel_attention_mask"]))
    theirs = [int(token) for token, _ in steps]
    assert ours.usage.prompt_tokens == len(expanded)
    assert list(ours.token_ids) == theirs[: len(ours.token_ids)] and len(ours.token_ids) == GREEDY.max_tokens


def test_an_image_request_batched_with_text_requests(idefics3_engine):
    batched_like_alone(idefics3_engine, image(5, (90, 50)))


def test_chat_with_an_image_url_through_the_daemon(serve, idefics3_engine):
    daemon_chat(serve, idefics3_engine, "idefics3-test")


def test_anthropic_counts_and_streams_the_tiled_positions(serve, idefics3_engine):
    """count_tokens and the stream's first usage count each image's whole block (its tiles),
    which depends on the image's size."""
    import anthropic

    client = anthropic.Anthropic(base_url=serve(engine=idefics3_engine, name="idefics3-test"), api_key="x",
                                 max_retries=0)
    png = png_bytes(seed=7, size=(200, 40))  # 4x1 tiles + the global image
    source = {"type": "base64", "media_type": "image/png", "data": base64.b64encode(png).decode()}
    messages = [{"role": "user", "content": [{"type": "image", "source": source},
                                             {"type": "text", "text": "What is this?"}]}]
    msg = client.messages.create(model="idefics3-test", messages=messages, max_tokens=2, extra_body={"temperature": 0})
    counted = client.messages.count_tokens(model="idefics3-test", messages=messages)
    assert counted.input_tokens == msg.usage.input_tokens + msg.usage.cache_read_input_tokens
    with client.messages.stream(model="idefics3-test", messages=messages, max_tokens=2) as stream:
        start = next(e for e in stream if e.type == "message_start")
        assert start.message.usage.input_tokens + start.message.usage.cache_read_input_tokens == counted.input_tokens


def test_ollama_num_ctx_leaves_room_after_the_tiled_positions(serve, idefics3_engine):
    """num_ctx caps the output at what the image's whole block leaves (Ollama's /api/chat)."""
    import ollama

    client = ollama.Client(host=serve(engine=idefics3_engine, name="idefics3-test"))
    messages = [{"role": "user", "content": "What is this?", "images": [png_bytes(seed=9, size=(200, 40))]}]
    whole = client.chat(model="idefics3-test", messages=messages, options={"temperature": 0, "num_predict": 4})
    capped = client.chat(model="idefics3-test", messages=messages,
                         options={"temperature": 0, "num_ctx": whole.prompt_eval_count + 2})
    assert capped.eval_count == 2 and capped.done_reason == "length"


@pytest.mark.parametrize("file, change, named", [
    ("processor_config.json", {"image_seq_len": 64}, "image_seq_len 64 is not the 4 positions"),
    ("preprocessor_config.json", {"max_image_size": {"longest_edge": 64}}, "max_image_size.longest_edge 64"),
])
def test_a_folder_that_disagrees_with_itself_is_refused(idefics3_dir, tmp_path, file, change, named):
    import json
    import shutil

    from mlxctl.errors import ModelFormatError
    from mlxctl.models.loader import load_model

    folder = shutil.copytree(idefics3_dir, tmp_path / "bad")
    (folder / file).write_text(json.dumps({**json.loads((folder / file).read_text()), **change}))
    with pytest.raises(ModelFormatError, match=f"cannot load the vision tower of bad: ValueError: .*{named}"):
        load_model(folder)


def test_run_with_an_image(idefics3_dir, tmp_path):
    """`mlxctl run --image` in a fresh interpreter: the text tower mlx-lm lacks loads, the image
    is tiled."""
    import json

    from tests.cli.helpers import run_cli

    (tmp_path / "a.png").write_bytes(png_bytes(30, size=(200, 40)))
    result = run_cli("run", "-m", str(idefics3_dir), "--image", str(tmp_path / "a.png"), "-n", "3", "--json",
                     "What is this?")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["usage"]["completion_tokens"] == 3 and out["usage"]["prompt_tokens"] > 5 * SEQ_LEN
