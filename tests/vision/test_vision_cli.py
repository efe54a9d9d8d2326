"""`mlxctl run --image` as users run it (a fresh interpreter), on the LLaVA-layout test model."""

from __future__ import annotations

import json

import pytest

from mlxctl.errors import ExitStatus
from tests.cli.helpers import run_cli
from tests.vision.build_model import TOKENS_PER_IMAGE
from tests.vision.conftest import png_bytes


@pytest.mark.slow  # over 5 s on CI's two cores
def test_run_with_images(llava_dir, tmp_path):
    (tmp_path / "a.png").write_bytes(png_bytes(30))
    (tmp_path / "b.jpg").write_bytes(png_bytes(31, fmt="JPEG"))
    result = run_cli("run", "-m", str(llava_dir), "--image", str(tmp_path / "a.png"), "--image",
                     str(tmp_path / "b.jpg"), "-n", "3", "--json", "Compare the two pictures.")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["usage"]["completion_tokens"] == 3 and out["text"]
    assert out["usage"]["prompt_tokens"] > 2 * TOKENS_PER_IMAGE
    placed = run_cli("run", "-m", str(llava_dir), "--image", str(tmp_path / "a.png"), "-n", "1", "--raw",
                     "Picture: <image> Caption:")
    assert placed.returncode == 0, placed.stderr


@pytest.mark.slow  # several CLI runs, each loading the model: the slow step
def test_run_image_errors_are_one_line(llava_dir, smollm2, tmp_path):
    missing = run_cli("run", "-m", str(llava_dir), "--image", str(tmp_path / "nope.png"), "hi")
    assert missing.returncode == ExitStatus.BAD_INPUT
    assert missing.stderr.strip().splitlines() == [f"mlxctl: error: --image {tmp_path / 'nope.png'}: no such file: "
                                                   f"{tmp_path / 'nope.png'}"]
    (tmp_path / "notes.txt").write_text("not an image")
    bad = run_cli("run", "-m", str(llava_dir), "--image", str(tmp_path / "notes.txt"), "hi")
    assert bad.returncode == ExitStatus.BAD_INPUT and "not a decodable image" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    (tmp_path / "a.png").write_bytes(png_bytes(32))
    text_only = run_cli("run", "-m", str(smollm2.path), "--image", str(tmp_path / "a.png"), "hi")
    assert text_only.returncode == ExitStatus.BAD_INPUT
    assert text_only.stderr.strip().splitlines()[-1] == ("mlxctl: error: this model does not accept images: "
                                                         "it is a text-only model")
    too_many = run_cli("run", "-m", str(llava_dir), "--image", str(tmp_path / "a.png"), "--raw", "<image> <image>")
    assert too_many.returncode == ExitStatus.BAD_INPUT
    assert "the prompt has 2 <image> placeholder(s) for 1 image(s)" in too_many.stderr


def test_serve_checks_the_media_folder(tmp_path):
    import pytest

    from mlxctl.cli.serve import check_media_path
    from mlxctl.errors import BadInputError

    assert check_media_path(None) is None
    assert check_media_path(tmp_path) == str(tmp_path.resolve())
    with pytest.raises(BadInputError, match="no such folder"):
        check_media_path(tmp_path / "missing")
