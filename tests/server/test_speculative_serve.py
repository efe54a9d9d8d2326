"""`--speculative ngram` through the daemon (the official OpenAI client, a real aiohttp server on
loopback, the real SmolLM2) and through `mlxctl run`: the reply is the one plain decoding gives,
and the drafts are counted in /v1/status, /metrics and `run -v`."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.speculative import SpeculationConfig
from mlxctl.server.app import init_app
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings
from tests.cli.helpers import run_cli
from tests.engine.test_speculative import CODE

ASK = "Repeat this code exactly:\n\n" + CODE


@pytest.fixture(scope="module")
def servers(smollm2):
    from mlxctl.models.loader import load_model

    loaded = load_model(smollm2.path)
    running = []
    for mode in ("off", "ngram"):
        engine = Engine(lambda: loaded, EngineConfig(speculation=SpeculationConfig(mode=mode))).start()
        running.append((engine, BackgroundServer(init_app(engine, ServeSettings(model_name="smol"))).start()))
    yield [server.url for _, server in running]
    for engine, server in running:
        server.stop()
        engine.shutdown()


@pytest.mark.slow  # two servers on the real model: the slow step
def test_the_reply_is_unchanged_and_the_drafts_are_counted(servers):
    replies = []
    for url in servers:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="none")
        reply = client.chat.completions.create(model="smol", messages=[{"role": "user", "content": ASK}],
                                               temperature=0, max_tokens=48)
        replies.append((reply.choices[0].message.content, reply.usage.completion_tokens))
    assert replies[1] == replies[0]
    status = httpx.get(f"{servers[1]}/v1/status").json()["engine"]["speculative"]
    assert status["mode"] == "ngram" and status["active"] and status["accepted_tokens"] > 0
    metrics = httpx.get(f"{servers[1]}/metrics").text
    accepted = [line for line in metrics.splitlines() if line.startswith("mlxctl:spec_decode_num_accepted_tokens_total")]
    assert accepted and float(accepted[0].split()[-1]) == status["accepted_tokens"]
    off = httpx.get(f"{servers[0]}/v1/status").json()["engine"]["speculative"]
    assert off == {"mode": "off", "active": False}


@pytest.mark.slow  # two servers on the real model: the slow step
def test_a_request_sets_its_own_draft_length_where_the_server_speculates(servers):
    messages = [{"role": "user", "content": ASK}]
    spec = openai.OpenAI(base_url=f"{servers[1]}/v1", api_key="none")
    before = httpx.get(f"{servers[1]}/v1/status").json()["engine"]["speculative"]["steps"]
    spec.chat.completions.create(model="smol", messages=messages, max_tokens=16, extra_body={"num_draft_tokens": 0})
    assert httpx.get(f"{servers[1]}/v1/status").json()["engine"]["speculative"]["steps"] == before
    plain = openai.OpenAI(base_url=f"{servers[0]}/v1", api_key="none")
    with pytest.raises(openai.BadRequestError) as refused:
        plain.chat.completions.create(model="smol", messages=messages, max_tokens=16, extra_body={"num_draft_tokens": 4})
    assert "this server does not speculate" in refused.value.message and refused.value.param == "num_draft_tokens"
    with pytest.raises(openai.BadRequestError) as bad:
        spec.chat.completions.create(model="smol", messages=messages, max_tokens=16, extra_body={"num_draft_tokens": 65})
    assert bad.value.param == "num_draft_tokens"


@pytest.mark.slow  # two servers on the real model: the slow step
def test_anthropic_and_ollama_requests_set_their_own_draft_length(servers):
    import anthropic
    import ollama

    def steps():
        return httpx.get(f"{servers[1]}/v1/status").json()["engine"]["speculative"]["steps"]

    messages = [{"role": "user", "content": ASK}]
    claude = anthropic.Anthropic(base_url=servers[1], api_key="none")
    before = steps()
    claude.messages.create(model="smol", messages=messages, max_tokens=16,
                           extra_body={"num_draft_tokens": 0})
    assert steps() == before  # drafting off for that request
    reply = claude.messages.create(model="smol", messages=messages, max_tokens=16, extra_body={"num_draft_tokens": 3})
    assert reply.usage.output_tokens > 0  # taken (whether drafts pay is the policy's to measure)
    with pytest.raises(anthropic.BadRequestError) as refused:
        anthropic.Anthropic(base_url=servers[0], api_key="none").messages.create(
            model="smol", messages=messages, max_tokens=16, extra_body={"num_draft_tokens": 3})
    assert "num_draft_tokens: this server does not speculate" in str(refused.value)
    before = steps()
    ollama.Client(host=servers[1]).chat(model="smol", messages=messages,
                                        options={"num_predict": 16, "temperature": 0, "num_draft_tokens": 0})
    assert steps() == before
    with pytest.raises(ollama.ResponseError) as bad:
        ollama.Client(host=servers[1]).chat(model="smol", messages=messages, options={"num_draft_tokens": 65})
    assert bad.value.status_code == 400 and "num_draft_tokens" in str(bad.value)


@pytest.mark.slow  # two runs of the real model: the slow step
def test_run_speculates_and_says_how_much_was_accepted(model_home):
    env = {"MLXCTL_HOME": str(model_home), "HF_HUB_OFFLINE": "1"}
    plain = run_cli("run", "-n", "40", "-t", "0", ASK, env=env)
    spec = run_cli("run", "-n", "40", "-t", "0", "--speculative", "ngram", "--num-draft-tokens", "5", "-v", ASK,
                   env=env)
    assert plain.returncode == 0 and spec.returncode == 0, spec.stderr
    assert spec.stdout == plain.stdout
    assert "accepted | TTFT" in spec.stderr and "| draft: " in spec.stderr
    grown = run_cli("run", "-n", "40", "-t", "0", "--speculative", "ngram", "--num-draft-tokens", "5",
                    "--grow-drafts", ASK, env=env)
    assert grown.returncode == 0 and grown.stdout == plain.stdout, grown.stderr
    fixed = run_cli("run", "-n", "40", "-t", "0", "--speculative", "ngram", "--no-grow-drafts", ASK, env=env)
    assert fixed.returncode == 0 and fixed.stdout == plain.stdout, fixed.stderr
    as_json = json.loads(run_cli("run", "-n", "40", "-t", "0", "--speculative", "ngram", "--json", ASK, env=env).stdout)
    assert as_json["timings"]["accepted_tokens"] > 0 and "draft_tokens" not in json.loads(
        run_cli("run", "-n", "4", "-t", "0", "--json", ASK, env=env).stdout)["timings"]


@pytest.mark.parametrize("command, args, message", [
    ("run", ["--speculative", "medusa"], "mlxctl: error: unknown --speculative mode 'medusa'"),
    ("serve", ["--speculative", "ngram", "--num-draft-tokens", "0"],
     "mlxctl: error: --num-draft-tokens must be between 1 and 64, got 0"),
    ("run", ["--num-draft-tokens", "4"], "mlxctl: error: --num-draft-tokens needs --speculative"),
    ("serve", ["--speculative", "draft"], "mlxctl: error: --speculative draft needs --draft-model"),
    ("run", ["--speculative", "ngram", "--draft-model", "smollm2-135m"],
     "mlxctl: error: --draft-model needs --speculative draft"),
    ("serve", ["--grow-drafts"], "mlxctl: error: --grow-drafts needs --speculative ngram"),
    ("run", ["--speculative", "draft", "--draft-model", "smollm2-135m", "--grow-drafts"],
     "mlxctl: error: --grow-drafts needs --speculative ngram"),
    ("chat", ["--no-grow-drafts"], "mlxctl: error: --no-grow-drafts needs --speculative ngram"),
    ("run", ["--speculative", "draft", "--draft-model", "smollm2-135m", "--draft-dtype", "f8"],
     "mlxctl: error: --draft-dtype: unknown dtype 'f8'"),
])
def test_bad_speculation_flags_are_one_line_errors(model_home, command, args, message):
    r = run_cli(command, *args, *(["hi"] if command == "run" else []),
                env={"MLXCTL_HOME": str(model_home), "HF_HUB_OFFLINE": "1"})
    assert r.returncode == 4 and "Traceback" not in r.stderr, r.stderr
    assert message in r.stderr.splitlines(), r.stderr
