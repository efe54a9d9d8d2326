"""Issue 20, memory, through a real server on loopback: ``--max-model-len`` (the context requests
may use), ``--kv-bits`` (running requests' KV quantised) and ``--memory-budget-gb`` (a request
starts only when its KV fits; 400 when it never can, 503 + Retry-After for a burst), over a tiny
random llama (head dimension 32) with a byte tokenizer; and the serve flags refused before any
model loads."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.kv_config import KVQuant
from mlxctl.engine.memory import STEP, KVFootprint
from mlxctl.engine.prefix_config import PrefixConfig
from mlxctl.engine.wired import model_bytes
from mlxctl.errors import ExitStatus
from tests.cli.helpers import run_cli
from tests.engine.gate import StepGate
from tests.engine.tiny import TinyModel, tiny_llama
from tests.server.infra import served
from tests.server.scripted_engine import ByteTokenizer

MODEL = "smollm2-135m"  # the name tests.server.infra.served gives the server
BACKSTOP_S = 60  # a deadlock backstop, never what a test waits for


def tiny(context_length: int = 512) -> TinyModel:
    """A random llama over byte tokens: hidden 128 with 4 heads, so head dimension 32."""
    return TinyModel(model=tiny_llama(seed=0, vocab=256, hidden=128), tokenizer=ByteTokenizer(),
                     context_length=context_length, vocab_size=256, config={"vocab_size": 256})


def chat(content: str = "hello", **extra) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], "temperature": 0, **extra}


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=BACKSTOP_S)


class Steps(StepGate):
    """A StepGate that also records, before each step (on the engine thread), the most requests in
    flight (prefilling or running) and the kinds of KV cache a batch of several rows decoded with."""

    def __init__(self, engine_ref: list):
        super().__init__(hold=lambda: False)
        self.engine_ref, self.peak, self.batch_caches = engine_ref, 0, set()

    def __call__(self, step: int) -> None:
        engine = self.engine_ref[0]
        self.peak = max(self.peak, len(engine.scheduler.running) + len(engine.scheduler.prefilling))
        if len(engine.batch) > 1:
            self.batch_caches |= {(type(c).__name__, getattr(c, "bits", None), getattr(c, "group_size", None))
                                  for c in engine.batch.caches}
        super().__call__(step)


def gated_engine(loaded: TinyModel, **config) -> tuple[Engine, Steps]:
    ref: list = []
    steps = Steps(ref)
    engine = Engine(lambda: loaded, EngineConfig(fault_hook=steps, **config))
    ref.append(engine)
    return engine.start(), steps


@pytest.fixture(scope="module")
def capped():
    engine = Engine(lambda: tiny(context_length=512), EngineConfig(max_model_len=64)).start()
    with served(engine) as url:
        yield url
    engine.shutdown()


def test_max_model_len_is_the_context_reported_and_enforced(capped):
    """--max-model-len: /v1/models reports it; prompt + max_tokens over it is a 400 naming max_tokens."""
    models = httpx.get(f"{capped}/v1/models").json()["data"]
    assert [m["context_length"] for m in models] == [64]
    with pytest.raises(openai.BadRequestError) as refused:
        client(capped).chat.completions.create(**chat(max_tokens=60))
    assert refused.value.code == "context_length_exceeded" and refused.value.param == "max_tokens"
    assert "maximum context length is 64 tokens" in refused.value.message
    reply = client(capped).chat.completions.create(**chat(max_tokens=8))
    assert reply.usage.completion_tokens == 8 and reply.usage.prompt_tokens + 8 <= 64


PROMPTS = ["a", "hello there", "the quick brown fox jumps over the lazy dog", "0123456789" * 5]


@pytest.fixture(scope="module")
def kv8():
    engine, steps = gated_engine(tiny(), kv=KVQuant(8, 32), prefix=PrefixConfig(enabled=False))
    with served(engine) as url:
        yield url, engine, steps
    engine.shutdown()


def test_kv_bits_batched_replies_equal_single_ones(kv8, monkeypatch):
    """--kv-bits 8 --kv-group-size 32: /v1/status says so; greedy replies batched equal those alone."""
    url, engine, steps = kv8
    status = httpx.get(f"{url}/v1/status").json()["engine"]
    assert (status["kv_bits"], status["kv_group_size"]) == (8, 32)
    alone = [client(url).chat.completions.create(**chat(p, max_tokens=24)).choices[0].message.content
             for p in PROMPTS]
    assert steps.peak == 1
    submit, seen = engine.submit, []

    def counted(*args, **kwargs):  # the engine is held until every request of the batch is in
        seen.append(submit(*args, **kwargs))
        if len(seen) == len(PROMPTS):
            steps.release()
        return seen[-1]

    async def together() -> list[str]:
        async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=BACKSTOP_S) as c:
            replies = await asyncio.gather(*(c.chat.completions.create(**chat(p, max_tokens=24)) for p in PROMPTS))
        return [r.choices[0].message.content for r in replies]

    steps.hold_next(lambda: True)
    monkeypatch.setattr(engine, "submit", counted)
    batched = asyncio.run(together())
    assert steps.peak == len(PROMPTS) and steps.batch_caches == {("BatchQuantizedKV", 8, 32)}
    assert batched == alone


MAX_TOKENS = 16  # a burst request's reservation: prompt + 16 tokens, one 256-position step of KV
FIT = 2  # requests of that size the budget's KV room holds at once


@pytest.fixture(scope="module")
def budget():
    """A server whose memory budget is the weights plus KV room for FIT requests and a half."""
    loaded = tiny(context_length=4096)
    step = KVFootprint.of(loaded.model, KVQuant()).bytes_for(STEP)
    total = model_bytes(loaded.model) + FIT * step + step // 2
    engine, steps = gated_engine(loaded, memory_budget_bytes=total, prefix=PrefixConfig(enabled=False))
    with served(engine) as url:
        yield url, engine, steps, total
    engine.shutdown()


def test_a_burst_over_the_budget_gets_503_with_retry_after(budget):
    """A burst while the engine is held: FIT requests are queued, the rest get 503 + Retry-After at once;
    the queued ones complete, never more than FIT in flight, and the server answers afterwards."""
    url, engine, steps, total = budget
    burst = 8
    steps.hold_next(lambda: True)

    async def fire():
        async with httpx.AsyncClient(base_url=url, timeout=BACKSTOP_S) as c:
            tasks = [asyncio.create_task(c.post("/v1/chat/completions", json=chat(f"burst {i}", max_tokens=MAX_TOKENS)))
                     for i in range(burst)]
            done = []
            for next_done in asyncio.as_completed(tasks, timeout=BACKSTOP_S):
                done.append(await next_done)
                if sum(r.status_code == 503 for r in done) == burst - FIT:  # the refusals came while held
                    steps.release()
            return done

    replies = asyncio.run(fire())
    refused, accepted = replies[:burst - FIT], replies[burst - FIT:]
    for r in refused:
        assert r.status_code == 503 and int(r.headers["Retry-After"]) >= 1, r.text
        assert r.json()["error"]["code"] == "memory_budget_busy" and "memory budget" in r.json()["error"]["message"]
    for r in accepted:
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["completion_tokens"] == MAX_TOKENS
    assert steps.peak == FIT
    after = client(url).chat.completions.create(**chat("after", max_tokens=4))
    assert after.usage.completion_tokens == 4
    memory = httpx.get(f"{url}/v1/status").json()["engine"]["memory"]
    assert memory["budget_bytes"] == total and memory["kv_reserved_bytes"] == memory["kv_queued_bytes"] == 0


def test_max_tokens_that_can_never_fit_the_budget_is_a_400(budget):
    """A request whose own KV exceeds the budget's room is refused (400), naming the memory budget."""
    url, engine, _, _ = budget
    assert engine.memory.longest < 4096 - 1000  # inside the model's context, outside the budget
    with pytest.raises(openai.BadRequestError) as refused:
        client(url).chat.completions.create(**chat(max_tokens=1000))
    assert refused.value.param == "max_tokens" and refused.value.code == "context_length_exceeded"
    assert "memory budget" in refused.value.message


def test_without_max_tokens_a_request_gets_what_fits_the_budget(budget):
    """No max_tokens under a budget: the reply runs to the longest sequence the KV room holds."""
    url, engine, _, _ = budget
    reply = client(url).chat.completions.create(**chat())
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage.prompt_tokens + reply.usage.completion_tokens == engine.memory.longest


def test_a_requests_own_choices_do_not_queue_against_each_other(budget):
    """n choices that fit the budget one by one but not all at once are queued, not refused: a 503
    would come back on every retry, the request being its own queue."""
    url, _, _, _ = budget
    reply = client(url).chat.completions.create(**chat("choices", max_tokens=MAX_TOKENS), n=FIT + 1)
    assert [c.index for c in reply.choices] == list(range(FIT + 1))
    assert reply.usage.completion_tokens == (FIT + 1) * MAX_TOKENS


@pytest.mark.parametrize("flags, message", [
    (["--kv-group-size", "32"], "--kv-group-size needs --kv-bits"),
    (["--kv-bits", "3"], "--kv-bits must be 8 or 4 (or 0 for none), not 3"),
    (["--kv-bits", "8", "--kv-group-size", "48"], "--kv-group-size must be 32, 64 or 128, not 48"),
    (["--memory-budget-gb", "abc"], "--memory-budget-gb must be a number of GiB, auto or 0, got 'abc'"),
    (["--prefix-cache-bits", "4", "--kv-bits", "8"], "--prefix-cache-bits 4 differs from --kv-bits 8"),
])
def test_bad_memory_flags_are_refused_before_a_model_is_looked_for(flags, message):
    """Bad --kv-bits / --kv-group-size / --memory-budget-gb values: one error line (and a hint), exit 4."""
    r = run_cli("serve", *flags, "--model", "/no/such/model")
    assert r.returncode == ExitStatus.BAD_INPUT and "Traceback" not in r.stderr, r.stderr
    first, *rest = r.stderr.splitlines()
    assert first.startswith(f"mlxctl: error: {message}") and all(line.startswith("hint: ") for line in rest), r.stderr


def test_top_shows_the_budget_and_what_requests_reserve_of_it(budget):
    """`mlxctl top`'s memory panel, fed the daemon's own /v1/status: the budget's lines appear with
    what a running request reserves of the KV room."""
    from mlxctl.tui.top import memory_text

    url, engine, steps, total = budget
    steps.hold_next(lambda: bool(engine.scheduler.running))
    with httpx.Client(timeout=BACKSTOP_S) as http:
        import threading

        done = threading.Thread(target=lambda: http.post(f"{url}/v1/chat/completions", json=chat(max_tokens=MAX_TOKENS)))
        done.start()
        assert steps.held.wait(BACKSTOP_S)
        text = memory_text(http.get(f"{url}/v1/status").json()).plain
        steps.hold_next(lambda: False)
        done.join(BACKSTOP_S)
    assert "budget" in text and "queued" in text
    reserved = next(line for line in text.splitlines() if line.startswith("KV res"))
    assert "0 B" not in reserved and "%" in reserved
