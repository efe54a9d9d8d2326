"""`mlxctl run -n N` against the context, through the entry point, on a tiny GGUF (context 256):
a given -n that does not fit is a one-line error (exit 4); the default -n is capped to the room."""

from __future__ import annotations

import json
import re

import pytest

from tests.cli.helpers import run_cli
from tests.models.helpers import write_tiny_gguf

PROMPT = " ".join(["a"] * 200)  # 200 tokens with the tiny model's byte-level vocabulary


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(model path, environment) of a tiny llama GGUF, imported into a store of its own."""
    root = tmp_path_factory.mktemp("tiny-run")
    path, _, config = write_tiny_gguf(root / "tiny.gguf")
    assert config["max_position_embeddings"] == 256
    return str(path), {"MLXCTL_HOME": str(root / "home"), "HF_HUB_OFFLINE": "1"}


def run(tiny, *args: str):
    path, env = tiny
    return run_cli("run", "-m", path, "--raw", "--json", "--ignore-eos", *args, PROMPT, env=env)


@pytest.mark.parametrize("flag", ["-n", "--max-tokens"])
def test_a_given_max_tokens_over_the_context_is_a_one_line_error(tiny, flag):
    r = run(tiny, flag, "100000000")
    assert r.returncode == 4, r.stderr
    assert r.stdout == "" and "Traceback" not in r.stderr
    (line,) = [line for line in r.stderr.splitlines() if line.startswith("mlxctl: error:")]
    assert line == ("mlxctl: error: --max-tokens/-n is 100000000 but the prompt has 200 tokens and the model's "
                    "context is 256: at most 56 new tokens fit"), r.stderr
    assert not [line for line in r.stderr.splitlines() if line.startswith("hint:")]


def test_the_default_max_tokens_is_capped_and_a_fitting_one_runs(tiny):
    default = run(tiny)  # -n defaults to 512: more than the room, capped to it
    assert default.returncode == 0, default.stderr
    usage = json.loads(default.stdout)["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (200, 56)
    exact = run(tiny, "-n", "56")
    assert exact.returncode == 0, exact.stderr
    assert json.loads(exact.stdout)["usage"]["completion_tokens"] == 56
    over = run(tiny, "-n", "57")
    assert over.returncode == 4 and re.search(r"is 57 .* at most 56 new tokens fit", over.stderr), over.stderr
