"""`serve --max-waiting N` bounds a burst: requests that arrive while an engine step runs count.

The engine drains its inbox only between steps, so a burst that arrives meanwhile was never in
the scheduler's waiting queue, and a check against that queue let all of it in. Here the engine
(the real SmolLM2, max_num_seqs 2) is held by a StepGate while both of its sequences decode;
a burst then has exactly max_waiting requests accepted (they wait), the others get 503 at
once. So at most max_num_seqs + max_waiting are ever accepted and unfinished; once the engine
goes on, everything accepted completes.
"""

from __future__ import annotations

import asyncio
import itertools

import httpx
import pytest

from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.scheduler import SchedulerConfig
from tests.engine.gate import StepGate
from tests.server.infra import chat_body, served
from tests.server.test_infra_metrics import samples

MAX_NUM_SEQS, MAX_WAITING, BURST = 2, 2, 10


@pytest.fixture
def gated(smollm2):
    """(engine, gate): a fresh SmolLM2 engine with two sequences, held once both decode."""
    from mlxctl.models.loader import load_model

    gate = StepGate()
    config = EngineConfig(scheduler=SchedulerConfig(max_num_seqs=MAX_NUM_SEQS), fault_hook=gate)
    engine = Engine(lambda: load_model(smollm2.path), config).start()
    gate.hold = lambda: len(engine.scheduler.running) == MAX_NUM_SEQS
    yield engine, gate
    gate.release()
    engine.shutdown()


async def chat(http: httpx.AsyncClient, url: str) -> httpx.Response:
    return await http.post(f"{url}/v1/chat/completions", json=chat_body(max_tokens=4))


async def burst_while_held(url: str, gate: StepGate) -> tuple[list, list, dict, dict, list]:
    async with httpx.AsyncClient(timeout=120) as http, asyncio.timeout(240):  # a hang is a failure
        occupants = [asyncio.create_task(chat(http, url)) for _ in range(MAX_NUM_SEQS)]
        assert await asyncio.to_thread(gate.held.wait, 120)  # both sequences decode; nothing else runs
        burst = [asyncio.create_task(chat(http, url)) for _ in range(BURST)]
        refused = [await r for r in itertools.islice(asyncio.as_completed(burst), BURST - MAX_WAITING)]
        status = (await http.get(f"{url}/v1/status")).json()["engine"]
        metrics = samples((await http.get(f"{url}/metrics")).text)
        pending = [t for t in burst if not t.done()]
        gate.release()
        done = await asyncio.gather(*occupants, *pending)
    return refused, pending, status, metrics, done


def test_a_burst_while_a_step_runs_gets_exactly_max_waiting_in(gated):
    engine, gate = gated
    with served(engine, max_waiting=MAX_WAITING) as url:
        refused, pending, status, metrics, done = asyncio.run(burst_while_held(url, gate))
        after = httpx.get(f"{url}/v1/status").json()["engine"]
    assert [r.status_code for r in refused] == [503] * (BURST - MAX_WAITING)
    assert {r.json()["error"]["type"] for r in refused} == {"server_error"}
    assert len(pending) == MAX_WAITING  # accepted, waiting for a sequence
    assert status["num_waiting"] == len(status["waiting"]) == MAX_WAITING  # what admission counted
    assert status["num_running"] == MAX_NUM_SEQS
    assert metrics[("mlxctl:num_requests_waiting", ())] == MAX_WAITING
    assert [r.status_code for r in done] == [200] * (MAX_NUM_SEQS + MAX_WAITING)
    assert after["num_waiting"] == 0 and engine.queued == 0
