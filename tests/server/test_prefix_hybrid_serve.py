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
