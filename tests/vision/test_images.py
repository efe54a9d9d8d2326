"""Images without a model: decoding, limits, URLs, the processor config, placeholder expansion."""

from __future__ import annotations

import asyncio
import base64
import os

import numpy as np
import pytest

from mlxctl.engine.kv.media import image_key
from mlxctl.vision.adapter import VisionAdapter
from mlxctl.vision.fetch import ImageRef, MediaPolicy, load_image
from mlxctl.vision.images import ImageError, ImageLimits, decode_image, read_image_file
from mlxctl.vision.preprocess import ImageProcessing
from tests.vision.conftest import data_url, png_bytes


def load(ref: ImageRef, policy: MediaPolicy = MediaPolicy()):
    return asyncio.run(load_image(ref, policy))


def test_decoded_images_are_keyed_by_content():
    data = png_bytes(1)
    img = decode_image(data, "x")
    assert img.key == image_key(data) and img.image.mode == "RGB" and img.size == (80, 60)
    assert decode_image(png_bytes(1, fmt="JPEG"), "x").key != img.key


def test_transparency_goes_onto_white():
    from PIL import Image
    import io

    buf = io.BytesIO()
    Image.new("RGBA", (4, 4), (10, 20, 30, 0)).save(buf, "PNG")
    assert decode_image(buf.getvalue(), "x").image.getpixel((0, 0)) == (255, 255, 255)
    assert decode_image(png_bytes(2, mode="L", fmt="GIF"), "x").image.mode == "RGB"


def test_bad_images_name_their_field():
    with pytest.raises(ImageError, match=r"^messages\.0\.content\.1: not a decodable image") as err:
        decode_image(b"this is not an image", "messages.0.content.1")
    assert err.value.param == "messages.0.content.1"
    with pytest.raises(ImageError, match="more than the 100 allowed"):
        decode_image(png_bytes(), "x", ImageLimits(max_bytes=100))
    with pytest.raises(ImageError, match="80x60 pixels, more than"):
        decode_image(png_bytes(), "x", ImageLimits(max_pixels=1000))
    with pytest.raises(ImageError, match="not a decodable image"):
        decode_image(png_bytes()[:60], "x")  # truncated
    with pytest.raises(ImageError, match="empty"):
        decode_image(b"", "x")


def test_eps_is_never_opened():
    eps = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nshowpage\n"
    with pytest.raises(ImageError, match="not a decodable image"):
        decode_image(eps, "x")


def test_data_urls():
    data = png_bytes(3)
    assert load(ImageRef("u", url=data_url(data))).key == image_key(data)
    assert load(ImageRef("u", url=data_url(data, "image/jpeg"))).key == image_key(data)  # the bytes decide
    for url, match in [("data:image/png;base64,@@@", "not valid base64"),
                       ("data:image/png,rawbytes", "only base64"),
                       ("data:text/plain;base64,aGk=", "not a supported image type"),
                       ("data:image/png;base64", "needs a comma"),
                       ("data:image/png;base64,aGVsbG8=", "not a decodable image")]:
        with pytest.raises(ImageError, match=match) as err:
            load(ImageRef("messages.0.content.0.image_url.url", url=url))
        assert err.value.param == "messages.0.content.0.image_url.url"
    big = ImageLimits(max_bytes=50)
    with pytest.raises(ImageError, match="more than the 50 bytes"):
        load(ImageRef("u", url=data_url(data)), MediaPolicy(limits=big))


def test_base64_sources():
    data = png_bytes(4)
    ref = ImageRef("s", data=base64.b64encode(data).decode(), media_type="image/png")
    assert load(ref).key == image_key(data)
    with pytest.raises(ImageError, match="not a supported image type"):
        load(ImageRef("s", data="aGk=", media_type="application/pdf"))


def test_unsupported_schemes():
    for url in ("ftp://example.com/cat.png", "cat.png", "s3://bucket/cat.png"):
        with pytest.raises(ImageError, match="unsupported image URL scheme"):
            load(ImageRef("u", url=url))
    for policy in (MediaPolicy(), MediaPolicy(allow_http=False)):  # remote media is off unless asked for
        with pytest.raises(ImageError, match="not fetched by this server") as err:
            load(ImageRef("u", url="https://example.com/cat.png"), policy)
        assert "--allow-remote-media" in err.value.hint


def test_file_urls_only_inside_the_allowed_folder(tmp_path):
    allowed, other = tmp_path / "media", tmp_path / "private"
    allowed.mkdir(), other.mkdir()
    (allowed / "cat.png").write_bytes(png_bytes(5))
    (other / "secret.png").write_bytes(png_bytes(6))
    os.symlink(other / "secret.png", allowed / "link.png")
    url = f"file://{allowed / 'cat.png'}"
    with pytest.raises(ImageError, match="not allowed on this server"):
        load(ImageRef("u", url=url))
    policy = MediaPolicy(local_root=str(allowed))
    assert load(ImageRef("u", url=url), policy).key == image_key(png_bytes(5))
    for bad in (f"file://{other / 'secret.png'}", f"file://{allowed / 'link.png'}",
                f"file://{allowed}/../private/secret.png"):
        with pytest.raises(ImageError, match="outside the folder"):
            load(ImageRef("u", url=bad), policy)
    with pytest.raises(ImageError, match="no such file"):
        load(ImageRef("u", url=f"file://{allowed / 'missing.png'}"), policy)
    with pytest.raises(ImageError, match="another host"):
        load(ImageRef("u", url="file://example.com/etc/passwd"), policy)


def test_read_image_file_errors(tmp_path):
    with pytest.raises(ImageError, match=r"^--image nope.png: no such file"):
        read_image_file(tmp_path / "nope.png", "--image nope.png")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ImageError, match="not a decodable image"):
        read_image_file(tmp_path / "notes.txt")
    with pytest.raises(ImageError, match="not a file"):
        read_image_file(tmp_path)


@pytest.mark.parametrize("size", [(80, 60), (60, 80), (56, 56), (300, 41), (30, 20)])
def test_preprocessing_matches_transformers_clip_processor(size):
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    cfg = {"size": {"shortest_edge": 56}, "crop_size": {"height": 56, "width": 56}, "do_center_crop": True,
           "resample": 3, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True}
    ours = ImageProcessing.from_config(cfg, 56)
    theirs = CLIPImageProcessorPil(**cfg)
    image = decode_image(png_bytes(7, size), "x").image
    want = theirs(image, return_tensors="np")["pixel_values"][0].transpose(1, 2, 0)
    got = ours(image)
    assert got.shape == want.shape == (56, 56, 3)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_processing_without_a_config_is_a_square_resize():
    proc = ImageProcessing.from_config({}, 32)
    assert proc(decode_image(png_bytes(8, (50, 20)), "x").image).shape == (32, 32, 3)


def _adapter(tokens_per_image=3, token_id=99):
    return VisionAdapter(None, ImageProcessing.from_config({}, 8), None, image_token="<image>",
                         image_token_id=token_id, tokens_per_image=tokens_per_image)


def test_placeholders_expand_to_feature_positions():
    tokens, spans = _adapter().expand([1, 99, 2, 3, 99, 4], 2)
    assert tokens == [1, 99, 99, 99, 2, 3, 99, 99, 99, 4]
    assert spans == ((1, 3), (6, 3))
    assert _adapter().expand([99], 1) == ([99, 99, 99], ((0, 3),))


def test_a_wrapped_family_expands_around_its_feature_token():
    adapter = VisionAdapter(None, None, None, image_token="<boi>", image_token_id=7, tokens_per_image=2,
                            feature_token_id=8, wrap=([5, 7], [6, 5]))  # Gemma 3: \n\n<boi> soft... <eoi>\n\n
    tokens, spans = adapter.expand([1, 7, 2], 1)
    assert tokens == [1, 5, 7, 8, 8, 6, 5, 2] and spans == ((3, 2),)


def test_placeholders_must_match_the_images():
    from mlxctl.errors import BadInputError

    with pytest.raises(BadInputError, match="marks 1 image"):
        _adapter().expand([1, 99, 2], 2)
    with pytest.raises(BadInputError, match="marks 0 image"):
        _adapter().expand([1, 2], 1)


def test_embed_splices_features_over_their_span():
    import mlx.core as mx

    table = mx.arange(10 * 2, dtype=mx.float32).reshape(10, 2)
    adapter = VisionAdapter(None, None, lambda ids: table[ids], image_token="<image>", image_token_id=9,
                            tokens_per_image=3)
    tokens, spans = adapter.expand([1, 9, 2, 3], 1)  # [1, 9, 9, 9, 2, 3]
    feats = [mx.full((3, 2), -1.0) * mx.array([[1.0], [2.0], [3.0]])]
    whole = adapter.embed(tokens, 0, spans, feats)
    assert whole[:, 0].tolist() == [2.0, -1.0, -2.0, -3.0, 4.0, 6.0]
    for cut in range(1, 6):  # any chunking gives the same rows
        parts = [adapter.embed(tokens[:cut], 0, spans, feats), adapter.embed(tokens[cut:], cut, spans, feats)]
        assert mx.concatenate(parts).tolist() == whole.tolist()
    assert adapter.embed(tokens[4:] + [5], 4, spans, [None]).tolist() == table[mx.array([2, 3, 5])].tolist()


def test_large_images_are_kept_at_a_bounded_size():
    from mlxctl.vision.images import MAX_KEPT_SIDE

    wide = decode_image(png_bytes(3, (3000, 1000)), "x")
    assert wide.size == (MAX_KEPT_SIDE, round(1000 * MAX_KEPT_SIDE / 3000))
    jpeg = decode_image(png_bytes(4, (4100, 300), fmt="JPEG"), "x")
    assert max(jpeg.size) == MAX_KEPT_SIDE and jpeg.image.mode == "RGB"
    small = decode_image(png_bytes(5, (80, 60)), "x")
    assert small.size == (80, 60)  # never enlarged
