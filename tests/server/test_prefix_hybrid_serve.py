"""A recorded agent session replayed through `serve` on sliding-window and hybrid models (tiny
random weights of real mlx-lm architectures, the default model's tokenizer): each turn's prompt
comes back from the previous turn's checkpoints, as for a dense model, and the cache reports them."""

from __future__ import annotations

import json

import httpx
import pytest

from mlxctl.engine.engine import Engine
from mlxctl.models.dummy import load_dummy
from mlxctl.server.app import init_app
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings
from tests.engine.hybrid_configs import CONFIGS
from tests.server.test_prefix_replay import ROOT, replay_module

TOKENIZER_VOCAB = 49152


def served_config(arch: str) -> dict:
    config = json.loads(json.dumps(CONFIGS[arch]))
    inner = config.get("text_config") or config
    inner["vocab_size"], inner["max_position_embeddings"] = TOKENIZER_VOCAB, 8192
    return config


@pytest.mark.parametrize("arch", ["gemma3_text", "gpt_oss", "qwen3_next"])
def test_an_agent_replay_is_served_from_checkpoints(arch, smollm2, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(served_config(arch)))
    engine = Engine(lambda: load_dummy(str(tmp_path), smollm2.path, "float32")).start()
    server = BackgroundServer(init_app(engine, ServeSettings(model_name=arch))).start()
    try:
        replay = replay_module()
        transcript = json.loads((ROOT / "docs" / "workloads" / "agent_transcript.json").read_text())
        transcript["messages"] = transcript["messages"][:8]  # four assistant turns
        turns = replay.replay(server.url, arch, transcript, max_tokens=1)
        stats = httpx.get(f"{server.url}/v1/cache/stats").json()
    finally:
        server.stop()
        engine.shutdown()
    assert len(turns) == 4 and turns[0]["cached_tokens"] == 0
    assert replay.reuse(turns)["share"] >= 0.9, turns
    assert stats["mode"] == "checkpoints" and stats["checkpoints"] > 0 and stats["hits"] >= 3


def test_a_warm_system_prompt_serves_the_first_request_of_a_hybrid_model(smollm2, tmp_path):
    import asyncio

    import openai

    from mlxctl.api.prompt import render_chat  # (with the generation prompt, after the system's end)
    from mlxctl.server.warm import WarmProgress, load_warm_prompts, warm

    (tmp_path / "config.json").write_text(json.dumps(served_config("qwen3_next")))
    system = "You are a careful coding agent. Read the repository before you change it. " * 8
    (tmp_path / "warm.json").write_text(json.dumps([system]))
    engine = Engine(lambda: load_dummy(str(tmp_path), smollm2.path, "float32")).start()
    server = BackgroundServer(init_app(engine, ServeSettings(model_name="hybrid"))).start()
    try:
        progress = asyncio.run(warm(engine, load_warm_prompts(tmp_path / "warm.json"), 1, WarmProgress()))
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
        done = client.chat.completions.create(model="hybrid", max_tokens=1, messages=[
            {"role": "system", "content": system}, {"role": "user", "content": "Which file first?"}])
        system_only = render_chat(engine.model.tokenizer, [{"role": "system", "content": system}])
    finally:
        server.stop()
        engine.shutdown()
    assert progress.done == 1 and progress.failed == 0
    end = engine.model.tokenizer.convert_tokens_to_ids("<|im_end|>")
    through_end = system_only.index(end) + 1  # the system message up to its end-of-turn token
    assert done.usage.prompt_tokens_details.cached_tokens == through_end
