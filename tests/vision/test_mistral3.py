"""Pixtral / Mistral 3: SmolLM2's real text tower (a llama, as Mistral 3's) with a random Pixtral
encoder and Mistral 3 projector. Its pixels, prompt block and greedy answer are checked against
Hugging Face's Pixtral image processor, mlx-vlm's Mistral 3 processor and mlx-vlm's generate on
the same folder; then batching and the daemon."""

from __future__ import annotations

import numpy as np
import pytest

from mlxctl.vision.images import decode_image
from tests.vision.build_mistral3 import PATCH_SIZE, build_mistral3
from tests.vision.conftest import engine_on, png_bytes
from tests.vision.layout_checks import GREEDY, batched_like_alone, daemon_chat, prompt


@pytest.fixture(scope="module")
def mistral3_dir(smollm2, tmp_path_factory):
    return build_mistral3(smollm2.path, tmp_path_factory.mktemp("models") / "mistral3-test")


@pytest.fixture(scope="module")
def mistral3_loaded(mistral3_dir):
    from mlxctl.models.loader import load_model

    return load_model(mistral3_dir)


@pytest.fixture(scope="module")
def mistral3_engine(mistral3_loaded):
    yield from engine_on(mistral3_loaded)


def image(seed, size=(80, 60)):
    return decode_image(png_bytes(seed, size=size), f"image-{seed}")


def reference_inputs(folder, img, text, merge=2):
    """input_ids, pixel_values and image_sizes as mlx-vlm's Mistral 3 processor makes them, with
    Hugging Face's Pixtral image processor (its PIL backend)."""
    from mlx_vlm.models.mistral3.processing_mistral3 import Mistral3Processor
    from transformers import PreTrainedTokenizerFast
    from transformers.models.pixtral.image_processing_pil_pixtral import PixtralImageProcessorPil

    processor = Mistral3Processor(image_processor=PixtralImageProcessorPil.from_pretrained(str(folder)),
                                  tokenizer=PreTrainedTokenizerFast.from_pretrained(str(folder)),
                                  patch_size=PATCH_SIZE, spatial_merge_size=merge)
    return processor(images=[img.image], text=text, add_special_tokens=False)


@pytest.mark.slow  # over 5 s on CI's two cores
def test_the_family_is_detected_from_model_type(mistral3_loaded, smollm2, tmp_path):
    from mlxctl.models.loader import load_model

    assert mistral3_loaded.vision.model_type == "mistral3" and mistral3_loaded.vision.image_token == "[IMG]"
    pixtral = load_model(build_mistral3(smollm2.path, tmp_path / "pixtral-test", model_type="pixtral"))
    assert pixtral.vision is not None and pixtral.vision.model_type == "pixtral"
    img = image(2)  # 80x60 fits 64x48: 8x6 patches of 8 pixels, unmerged
    tokens, spans = pixtral.vision.expand([pixtral.vision.image_token_id], [img])
    assert spans == ((0, 6 * 9),) and pixtral.vision.encode([img])[0].shape[0] == 6 * 9


@pytest.mark.parametrize("size", [(80, 60), (60, 80), (20, 30), (200, 40), (33, 33), (16, 16)])
def test_pixels_and_block_are_the_processors(mistral3_dir, mistral3_loaded, size):
    vision, img = mistral3_loaded.vision, image(3, size)
    tok = mistral3_loaded.tokenizer
    theirs = reference_inputs(mistral3_dir, img, "Look:[IMG]what?")
    pixels = np.array(theirs["pixel_values"][0]).transpose(1, 2, 0)
    np.testing.assert_allclose(vision.layout.resizing(img.image), pixels, atol=1e-5)
    ids = tok.encode("Look:", add_special_tokens=False) + [vision.image_token_id] + \
        tok.encode("what?", add_special_tokens=False)
    tokens, _ = vision.expand(ids, [img])
    assert tokens == np.array(theirs["input_ids"][0]).tolist()


def test_greedy_answer_equals_mlx_vlm_generate(mistral3_dir, mistral3_engine):
    import mlx.core as mx
    from mlx_vlm.generate import generate_step
    from mlx_vlm.utils import load_model

    img = image(4)
    ids = prompt(mistral3_engine)
    ours = mistral3_engine.submit(ids, GREEDY, images=[img]).collect()
    expanded, _ = mistral3_engine.model.vision.expand(ids, [img])
    text = mistral3_engine.model.tokenizer.decode(ids, skip_special_tokens=False)
    reference = reference_inputs(mistral3_dir, img, text)
    assert np.array(reference["input_ids"][0]).tolist() == expanded
    steps = generate_step(mx.array([expanded]), load_model(mistral3_dir), mx.array(reference["pixel_values"]),
                          None, max_tokens=GREEDY.max_tokens, temperature=0.0,
                          image_sizes=np.array(reference["image_sizes"]).tolist())
    theirs = [int(token) for token, _ in steps]
    assert ours.usage.prompt_tokens == len(expanded)
    assert list(ours.token_ids) == theirs[: len(ours.token_ids)] and len(ours.token_ids) == GREEDY.max_tokens


def test_an_image_request_batched_with_text_requests(mistral3_engine):
    batched_like_alone(mistral3_engine, image(5, (90, 50)))


def test_chat_with_an_image_url_through_the_daemon(serve, mistral3_engine):
    daemon_chat(serve, mistral3_engine, "mistral3-test")


@pytest.mark.parametrize("file, change, named", [
    ("processor_config.json", {"spatial_merge_size": 1}, "spatial_merge_size 1 is not the model's 2"),
    ("preprocessor_config.json", {"size": {"longest_edge": 128}}, "size.longest_edge 128"),
    ("processor_config.json", {"image_break_token": "[ROW]"}, r"no \[ROW\] token"),
])
def test_a_folder_that_disagrees_with_itself_is_refused(mistral3_dir, tmp_path, file, change, named):
    import json
    import shutil

    from mlxctl.errors import ModelFormatError
    from mlxctl.models.loader import load_model

    folder = shutil.copytree(mistral3_dir, tmp_path / "bad")
    (folder / file).write_text(json.dumps({**json.loads((folder / file).read_text()), **change}))
    with pytest.raises(ModelFormatError, match=f"cannot load the vision tower of bad: ValueError: .*{named}"):
        load_model(folder)


def test_run_with_an_image(mistral3_dir, tmp_path):
    """`mlxctl run --image` in a fresh interpreter places the image's [IMG] rows."""
    import json

    from tests.cli.helpers import run_cli

    (tmp_path / "a.png").write_bytes(png_bytes(30))
    result = run_cli("run", "-m", str(mistral3_dir), "--image", str(tmp_path / "a.png"), "-n", "3", "--json",
                     "What is this?")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["usage"]["completion_tokens"] == 3 and out["usage"]["prompt_tokens"] > 3 * 5  # 3 rows of 4 + break
