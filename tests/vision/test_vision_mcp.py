"""Images with the MCP tool loop: the client's image goes with every round, in the server's
loop and in `mlxctl run --mcp-config`, encoded once."""

from __future__ import annotations

import json
import subprocess
import sys

import openai
import pytest

from tests.cli.helpers import REPO, clean_env
from tests.mcp.helpers import calc_stdio
from tests.vision.conftest import MODEL, data_url, png_bytes

pytest.importorskip("mcp")

ADD = {"type": "function", "function": {"name": "calc__add"}}
QUESTION = "What is 2 + 3? Use the calculator."


@pytest.fixture
def calc_config(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"calc": calc_stdio(allow=["add"])}}))
    return path


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
def test_the_image_goes_with_every_round_of_the_server_loop(serve, vision_engine, calc_config):
    url = serve(mcp_config=str(calc_config))
    client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=300)
    image = data_url(png_bytes(seed=4141, size=(77, 53)))  # seen by no other test: the shared cache lacks it
    content = [{"type": "image_url", "image_url": {"url": image}}, {"type": "text", "text": QUESTION}]
    encoded = vision_engine.stats()["vision"]["images_encoded"]
    resp = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": content}],
                                          tool_choice=ADD, max_tokens=160, extra_body={"mcp": True})
    calls = resp.model_extra["mcp_calls"]
    assert calls and calls[0]["name"] == "calc__add" and calls[0]["is_error"] is False, resp
    assert resp.model_extra["mcp_rounds"] >= 2
    positions = vision_engine.model.vision.tokens_per_image
    assert resp.usage.prompt_tokens > 2 * positions  # both rounds' prompts hold the image's positions
    assert vision_engine.stats()["vision"]["images_encoded"] == encoded + 1  # encoded in round 1 only


@pytest.mark.slow  # several CLI runs, each loading the model: the slow step
def test_run_with_an_image_and_mcp_tools(llava_dir, calc_config, tmp_path):
    picture = tmp_path / "p.png"
    picture.write_bytes(png_bytes(seed=42))
    result = subprocess.run([sys.executable, "-m", "mlxctl", "run", "-m", str(llava_dir), "--image", str(picture),
                             "--mcp-config", str(calc_config), "--tool-choice", "calc__add", "--json", "-n", "160",
                             QUESTION], cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    (call, *_) = doc["mcp_calls"]
    assert call["name"] == "calc__add" and call["is_error"] is False
    assert doc["usage"]["prompt_tokens"] > 2 * 16  # the image's positions, in each round
