"""`mlxctl run --video` as users run it (a fresh interpreter), on the LLaVA-layout test model."""

from __future__ import annotations

import json

import pytest

from mlxctl.errors import ExitStatus
from tests.cli.helpers import run_cli
from tests.vision.build_model import TOKENS_PER_IMAGE
from tests.vision.clips import clip_bytes
from tests.vision.conftest import png_bytes


@pytest.mark.slow  # over 5 s on CI's two cores
def test_run_with_a_video(llava_dir, tmp_path):
    (tmp_path / "clip.mp4").write_bytes(clip_bytes(tint=60))
    (tmp_path / "a.png").write_bytes(png_bytes(33))
    args = ("run", "-m", str(llava_dir), "-n", "2", "--json", "--video", str(tmp_path / "clip.mp4"))
    four = run_cli(*args, "What happens?")  # 1 fps over 4 s: 4 frames
    assert four.returncode == 0, four.stderr
    two = run_cli(*args, "--max-frames", "2", "--image", str(tmp_path / "a.png"), "What happens?")
    assert two.returncode == 0, two.stderr
    four_tokens = json.loads(four.stdout)["usage"]["prompt_tokens"]
    two_tokens = json.loads(two.stdout)["usage"]["prompt_tokens"]
    assert four_tokens > 4 * TOKENS_PER_IMAGE
    # two frames fewer ("Frame at N s: " labels are about 6 tokens each), one image more (and its newline)
    assert 2 * TOKENS_PER_IMAGE - 20 < four_tokens - two_tokens + TOKENS_PER_IMAGE + 1 <= 2 * TOKENS_PER_IMAGE + 20


@pytest.mark.slow  # several CLI runs, each loading the model: the slow step
def test_run_video_errors_are_one_line(llava_dir, smollm2, tmp_path):
    missing = run_cli("run", "-m", str(llava_dir), "--video", str(tmp_path / "nope.mp4"), "hi")
    assert missing.returncode == ExitStatus.BAD_INPUT
    nope = tmp_path / "nope.mp4"
    assert missing.stderr.strip().splitlines() == [f"mlxctl: error: --video {nope}: no such file: {nope}"]
    (tmp_path / "notes.mp4").write_text("not a video")
    bad = run_cli("run", "-m", str(llava_dir), "--video", str(tmp_path / "notes.mp4"), "hi")
    assert bad.returncode == ExitStatus.BAD_INPUT and "not a decodable video" in bad.stderr
    (tmp_path / "clip.mp4").write_bytes(clip_bytes(tint=61))
    fps = run_cli("run", "-m", str(llava_dir), "--video", str(tmp_path / "clip.mp4"), "--fps", "0", "hi")
    assert fps.returncode == ExitStatus.BAD_INPUT and "--fps must be more than 0" in fps.stderr
    frames = run_cli("run", "-m", str(llava_dir), "--video", str(tmp_path / "clip.mp4"), "--max-frames", "99", "hi")
    assert frames.returncode == ExitStatus.BAD_INPUT and "--max-frames must be an integer from 1 to 32" in frames.stderr
    alone = run_cli("run", "-m", str(llava_dir), "--fps", "2", "hi")
    assert alone.returncode == ExitStatus.BAD_INPUT and "--fps needs --video" in alone.stderr
    text_only = run_cli("run", "-m", str(smollm2.path), "--video", str(tmp_path / "clip.mp4"), "hi")
    assert text_only.returncode == ExitStatus.BAD_INPUT
    assert text_only.stderr.strip().splitlines()[-1] == ("mlxctl: error: this model does not accept images: "
                                                         "it is a text-only model")
