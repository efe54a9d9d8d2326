"""`mlxctl serve --tensor-parallel 2` under mlx.launch: the daemon answers as a one-process
daemon on the same model does, with concurrent clients, and stops every rank on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from mlxctl.server.runner import free_port
from tests.cli.helpers import REPO, clean_env
from tests.distributed.helpers import dummy_model, launch_argv
from tests.e2e.test_bench_smoke import wait_healthy

PROMPTS = ["Tell me about the sea.", "List three colours.", "What is two plus two?", "Say hello."]


def _serve(ranks: int, model: str, home) -> tuple[subprocess.Popen, str]:
    port = free_port()
    argv = launch_argv(ranks, "-m", "tests.distributed.long_grace", "serve", "--tensor-parallel", str(ranks),
                       "--load-format", "dummy", "-m", f"split={model}", "--port", str(port))
    proc = subprocess.Popen(argv, cwd=REPO, env=clean_env({"MLXCTL_HOME": str(home)}), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, proc, seconds=240)
    return proc, url


def _answers(url: str) -> tuple[list[str], dict]:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", timeout=240)

    def ask(i: int) -> str:
        prompt = PROMPTS[i % len(PROMPTS)]
        if i % 2:
            return client.completions.create(model="split", prompt=prompt, max_tokens=12, temperature=0).choices[0].text
        return client.chat.completions.create(model="split", messages=[{"role": "user", "content": prompt}],
                                              max_tokens=12, temperature=0.9, seed=i).choices[0].message.content

    with ThreadPoolExecutor(6) as pool:  # they batch together on the ranks
        texts = list(pool.map(ask, range(6)))
    status = client.get("/status", cast_to=object)
    return texts, status


@pytest.mark.slow  # two daemons, one of them two processes, on two cores
def test_split_daemon_answers_like_one_process(tmp_path, model_home, smollm2):
    model = str(dummy_model(tmp_path))
    results = {}
    for ranks in (1, 2):
        proc, url = _serve(ranks, model, model_home)
        try:
            results[ranks] = _answers(url)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)  # every process of the job, as a supervisor would
            proc.wait(120)
        # rank 0 drains, then stops the followers, which leave the signal to it; one that waited
        # out its grace instead (an hour, with long_grace) would still be running at the backstop
        assert _gone(proc.pid, within=120), f"ranks left running: {_members(proc.pid)}"
    assert results[2][0] == results[1][0]
    tp = results[2][1]["engine"]["tensor_parallel"]
    assert tp["ranks"] == 2 and tp["broadcasts"] > 0 and tp["doorbell"] is True
    assert "tensor_parallel" not in results[1][1]["engine"]


def _members(group: int) -> str:
    return subprocess.run(["ps", "-o", "pid,stat,args", "-g", str(group)], capture_output=True, text=True).stdout


def _gone(group: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.5)
    return False
