"""The engine in lockstep over local ranks (MLX's ring backend between processes on this CPU):
a model split over 2 or 3 ranks gives what one process gives, and every rank agrees."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.cli.helpers import REPO, clean_env
from tests.distributed.helpers import dummy_model, launch, launch_argv

WORKER = ("-m", "tests.distributed.tp_worker")
MLXCTL = ("-m", "tests.distributed.long_grace")  # python -m mlxctl, with followers that never wait out a grace
BACKSTOP_S = 300  # a job that has not stopped by then never will: nothing here is timed
SEEDED = [0, 1, 2, 3]  # the worker's requests whose tokens are fixed (greedy or seeded); 4 is unseeded


def _job(ranks: int, model: str, out, home, *extra: str) -> dict:
    done = launch(ranks, *WORKER, str(ranks), model, str(out), *extra, home=home)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(out.read_text())
    for rank in range(1, ranks):
        follower = json.loads(out.with_name(f"{out.name}.rank{rank}").read_text())["stats"]
        assert follower["digest"] == record["stats"]["digest"], f"rank {rank} went its own way"
        assert follower["ranks"] == ranks and follower["rank"] == rank
    return record


def _same(one: dict, split: dict) -> None:
    for i in SEEDED:
        assert split["tokens"][i] == one["tokens"][i], (i, one["texts"][i], split["texts"][i])
    assert split["finish"] == one["finish"]
    assert split["again"] == one["again"]


@pytest.mark.slow  # 12.6 s: the slow step (the CLI test below runs two ranks too)
def test_two_ranks_generate_what_one_does(tmp_path, model_home, smollm2):
    model = str(dummy_model(tmp_path))
    one = _job(1, model, tmp_path / "one.json", model_home, "dummy")
    split = _job(2, model, tmp_path / "two.json", model_home, "dummy")
    _same(one, split)
    assert split["finish"][2] == "FinishReason.STOP" and json.loads(split["texts"][2])["city"]  # the schema held
    assert "," not in split["texts"][3]  # the stop string ends it and is left out, on every rank
    assert split["aborted"] == "FinishReason.ABORT"
    assert split["cached"] > 0  # the prefix cache works on every rank alike
    stats = split["stats"]
    assert stats["ranks"] == 2 and stats["broadcasts"] > 0 and stats["broadcast_bytes"] > 0
    assert stats["doorbell"] is True  # the follower slept on it while rank 0 waited for work
    assert one["stats"] is None


@pytest.mark.slow  # three processes on two cores: about a minute
def test_real_model_split_three_ways_answers_as_one_process(tmp_path, model_home, smollm2):
    # SmolLM2-135M has 9 query and 3 key/value heads and an MLP of 1536: it splits by 3, not 2.
    one = _job(1, str(smollm2.path), tmp_path / "one.json", model_home)
    split = _job(3, str(smollm2.path), tmp_path / "three.json", model_home)
    _same(one, split)
    assert "Paris" in split["texts"][0]


@pytest.mark.slow  # a long end-to-end run: the slow step
def test_run_cli_over_two_ranks_prints_once_what_one_process_prints(tmp_path, model_home, smollm2):
    args = ("-m", "mlxctl", "run", "--load-format", "dummy", "-m", str(dummy_model(tmp_path)), "-n", "10",
            "--temperature", "0.7", "--seed", "3", "Tell me about the sea.")
    one = launch(1, *args, home=model_home)
    split = launch(2, *args[:3], "--tensor-parallel", "2", *args[3:], home=model_home)
    assert one.returncode == 0 and split.returncode == 0, split.stderr[-2000:]
    assert split.stdout == one.stdout and one.stdout.strip()  # rank 0 alone prints, and the same


@pytest.mark.slow  # over 5 s on CI's two cores
def test_a_failed_step_stops_the_whole_job_with_the_error(tmp_path, model_home, smollm2):
    # One process would re-queue its requests; a rank cannot (the others wait in a collective it
    # will not join), so the client gets the error, and every rank exits: rank 0 waits for ever
    # after writing the outcome, so only the job being stopped ends it.
    out = tmp_path / "fault.json"
    done = subprocess.run(launch_argv(2, *WORKER, "2", str(dummy_model(tmp_path)), str(out), "dummy"), cwd=REPO,
                          env=clean_env({"MLXCTL_HOME": str(model_home), "TP_FAULT": "0:3"}), capture_output=True,
                          text=True, timeout=BACKSTOP_S)
    assert "rank 0 exited with code 70" in done.stderr  # (mlx.launch itself exits 0 whatever the ranks do)
    outcome = json.loads(out.read_text())
    assert "tensor-parallel job, which stops" in outcome["error"] and "injected fault" in outcome["error"]


def test_a_model_rank_0_cannot_resolve_fails_every_rank(model_home):
    # With the followers' grace longer than the backstop, a follower that waited it out would
    # make this time out: the job ends at all only if they leave at once.
    done = launch(2, *MLXCTL, "run", "--tensor-parallel", "2", "-m", "no-such-model-xyz", "hi", home=model_home,
                  timeout=BACKSTOP_S)
    assert "rank 1 exited with code 1" in done.stderr or "rank 0 exited with code 3" in done.stderr, done.stderr
    assert "no-such-model-xyz" in done.stderr and "Traceback" not in done.stderr
