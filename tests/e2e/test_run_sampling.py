"""`mlxctl run`'s omitted sampling flags: the model's generation_config.json, else run's built-ins
(greedy), the flags winning; `run -v` says on stderr what it used and where each value came from,
and stdout stays the answer only. The real entry point on the real SmolLM2 weights."""

from __future__ import annotations

import json

import pytest

GENERATION_CONFIG = {"temperature": 0.6, "top_k": 20, "bos_token_id": 1}


@pytest.fixture(scope="module")
def tuned(smollm2, tmp_path_factory):
    """SmolLM2 from a folder of links to its files, with a generation_config.json of its own."""
    folder = tmp_path_factory.mktemp("smol-tuned-run")
    for item in smollm2.path.iterdir():
        if item.name != "generation_config.json":
            (folder / item.name).symlink_to(item)
    (folder / "generation_config.json").write_text(json.dumps(GENERATION_CONFIG))
    return folder


def sampling_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("sampling: ")]


def test_verbose_shows_generation_config_flags_and_defaults(cli, tuned):
    r = cli("run", "-m", str(tuned), "-v", "--top-p", "0.9", "--seed", "1", "-n", "3", "Hi")
    assert r.returncode == 0, r.stderr
    assert sampling_lines(r.stderr) == ["sampling: temperature=0.6 (generation_config.json) top_p=0.9 (flag) "
                                        "top_k=20 (generation_config.json) min_p=0 (default) "
                                        "repetition_penalty=1 (default)"]
    assert "sampling:" not in r.stdout


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
def test_a_flag_wins_and_without_v_nothing_is_shown(cli, tuned):
    r = cli("run", "-m", str(tuned), "-t", "0", "--top-k", "0", "-v", "-n", "3", "Hi")
    assert r.returncode == 0, r.stderr
    assert sampling_lines(r.stderr)[0].startswith("sampling: temperature=0 (flag) top_p=1 (default) top_k=0 (flag)")
    quiet = cli("run", "-m", str(tuned), "-t", "0", "-n", "3", "Hi")
    assert quiet.returncode == 0 and sampling_lines(quiet.stderr) == []
    assert quiet.stdout == r.stdout  # the answer only, the same greedy one


def test_without_a_generation_config_run_stays_greedy(cli):
    r = cli("run", "-v", "-n", "3", "Hi")
    assert r.returncode == 0, r.stderr
    assert sampling_lines(r.stderr) == ["sampling: temperature=0 (default) top_p=1 (default) top_k=0 (default) "
                                        "min_p=0 (default) repetition_penalty=1 (default)"]
