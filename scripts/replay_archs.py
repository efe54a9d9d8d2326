#!/usr/bin/env python3
"""The agent replay (scripts/replay_agent.py) on tiny random models of sliding-window and
hybrid architectures, each served in-process by mlxctl's real server on loopback.

  python scripts/replay_archs.py [--arch gemma3_text ...] [--turns N] [--json]

Each architecture's tiny config (tests/engine/hybrid_configs.py) is built with random weights
and the default model's tokenizer (as `--load-format dummy` does); the whole recorded transcript
(or its first N assistant turns) is replayed with max_tokens 1, and the share of the previous
prompt's tokens served from the cache is reported per architecture.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def served_config(config: dict) -> dict:
    """The tiny config with the tokenizer's vocabulary and room for the transcript."""
    config = json.loads(json.dumps(config))
    inner = config.get("text_config") or config
    inner["vocab_size"], inner["max_position_embeddings"] = 49152, 32768
    return config


def replay_arch(arch: str, config: dict, transcript: dict, tokenizer: Path) -> dict:
    import httpx

    from mlxctl.engine.engine import Engine
    from mlxctl.models.dummy import load_dummy
    from mlxctl.server.app import init_app
    from mlxctl.server.runner import BackgroundServer
    from mlxctl.server.settings import ServeSettings
    from scripts_replay import replay, reuse

    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "config.json").write_text(json.dumps(served_config(config)))
        engine = Engine(lambda: load_dummy(folder, tokenizer, "float32")).start()
        server = BackgroundServer(init_app(engine, ServeSettings(model_name=arch))).start()
        try:
            turns = replay(server.url, arch, transcript, max_tokens=1)
            stats = httpx.get(f"{server.url}/v1/cache/stats").json()
        finally:
            server.stop()
            engine.shutdown()
    return {"arch": arch, **reuse(turns), "mode": stats.get("mode"), "checkpoints": stats.get("checkpoints"),
            "cache_layers": stats.get("cache_layers"), "turns": len(turns)}


def main() -> int:
    from tests.engine.hybrid_configs import CONFIGS

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", action="append", choices=sorted(CONFIGS), help="default: every one")
    p.add_argument("--turns", type=int, default=0, help="assistant turns to replay (default: all)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    import importlib.util

    spec = importlib.util.spec_from_file_location("scripts_replay", ROOT / "scripts" / "replay_agent.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["scripts_replay"] = module
    from mlxctl.models.resolve import resolve_model

    tokenizer = resolve_model(None).path
    transcript = json.loads((ROOT / "docs" / "workloads" / "agent_transcript.json").read_text())
    if args.turns:
        ends = [i for i, m in enumerate(transcript["messages"]) if m["role"] == "assistant"]
        transcript["messages"] = transcript["messages"][: ends[args.turns - 1] + 1] if len(ends) >= args.turns else transcript["messages"]
    rows = [replay_arch(arch, CONFIGS[arch], transcript, tokenizer) for arch in args.arch or sorted(CONFIGS)]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{'architecture':<18} {'cache layers':<28} {'turns':>5} {'reusable':>9} {'cached':>8} {'share':>7}")
        for r in rows:
            print(f"{r['arch']:<18} {','.join(r['cache_layers'] or []):<28} {r['turns']:>5} "
                  f"{r['reusable_tokens']:>9} {r['cached_tokens']:>8} {r['share']:>7.1%}")
    return 0 if all(r["share"] >= 0.9 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
