"""`serve --models-config FILE`: the models it lists, merged with repeated -m; every bad entry is
one line naming the entry and the key; and a real `mlxctl serve` serving what a file says."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import httpx
import pytest

from mlxctl.cli.serve_models import EngineDefaults, ModelSpec, build_pool, load_models_config, pool_specs
from mlxctl.engine.engine import EngineConfig
from mlxctl.errors import BadInputError
from mlxctl.server.runner import free_port
from tests.cli.helpers import REPO, clean_env, run_cli
from tests.server.infra import wait_until
from tests.server.test_infra_serve_cli import read_url
from tests.server.test_residency import PROMPT

GOOD_YAML = """\
models:
  - name: fast
    ref: ./tiny            # relative to this file
    pin: true
    keep_alive: 10m
    dtype: float16
    max_num_seqs: 2
    prefill_chunk: 64
    prefill_step_ms: 100
  - ref: smollm2-135m
    keep_alive: -1
  - ref: org/other@main
    name: other
    load_format: auto
    moe_top_k: 2
"""


def write(folder, name: str, text: str):
    path = folder / name
    path.write_text(text)
    return path


def test_yaml_entries(tmp_path):
    (tmp_path / "tiny").mkdir()
    specs = load_models_config(write(tmp_path, "models.yaml", GOOD_YAML))
    fast, smol, other = specs
    assert (fast.name, fast.ref, fast.pin, fast.keep_alive_s) == ("fast", str(tmp_path / "tiny"), True, 600.0)
    assert (fast.dtype, fast.max_num_seqs, fast.prefill_chunk, fast.prefill_step_ms) == ("float16", 2, 64, 100)
    assert smol.prefill_step_ms is None
    assert (smol.name, smol.ref, smol.keep_alive_s, smol.pin) == ("smollm2-135m", "smollm2-135m", None, False)
    assert (other.name, other.ref, other.load_format, other.moe_top_k) == ("other", "org/other@main", "auto", 2)
    assert "models.yaml: models[0] (fast)" in fast.where


def test_json_entries_and_plain_strings(tmp_path):
    entries = ["org/a", {"ref": "org/b", "name": "b", "pin": False}]
    path = write(tmp_path, "models.json", json.dumps({"models": entries}))
    assert [(s.name, s.ref) for s in load_models_config(path)] == [("org/a", "org/a"), ("b", "org/b")]


@pytest.mark.parametrize("entry, where, says", [
    ({"ref": "org/a", "dtpye": "float16"}, "models[0] (org/a)", "unknown key 'dtpye'"),
    ({"name": "x"}, "models[0] (x)", "ref: missing"),
    ({"ref": ""}, "models[0]", "ref: must be a non-empty string"),
    ({"ref": 7}, "models[0]", "ref: must be a non-empty string, got 7"),
    ({"ref": "org/a", "name": "has space"}, "models[0] (has space)", "name: 'has space' may hold only"),
    ({"ref": "org/a", "pin": "yes"}, "models[0] (org/a)", "pin: must be true or false, got 'yes'"),
    ({"ref": "org/a", "keep_alive": "soon"}, "models[0] (org/a)", "keep_alive must be a duration"),
    ({"ref": "org/a", "keep_alive": None}, "models[0] (org/a)", "keep_alive: must be a duration"),
    ({"ref": "org/a", "dtype": "int4"}, "models[0] (org/a)", "dtype: must be one of auto, native"),
    ({"ref": "org/a", "load_format": "gguf"}, "models[0] (org/a)", "load_format: must be one of auto, dummy"),
    ({"ref": "org/a", "moe_top_k": 0}, "models[0] (org/a)", "moe_top_k: must be a whole number of at least 1"),
    ({"ref": "org/a", "max_num_seqs": 2.5}, "models[0] (org/a)", "max_num_seqs: must be a whole number"),
    ({"ref": "org/a", "prefill_chunk": True}, "models[0] (org/a)", "prefill_chunk: must be a whole number"),
    ({"ref": "org/a", "prefill_step_ms": -5}, "models[0] (org/a)", "prefill_step_ms: must be a whole number of at "
     "least 0, got -5"),
    ({"ref": "/no/such/folder"}, "models[0] (/no/such/folder)", "ref: no such file or folder"),
    ({"ref": "./missing.gguf"}, "models[0] (./missing.gguf)", "ref: no such file or folder"),
    (["org/a"], "models[0]", "an entry must be an object"),
])
def test_each_bad_entry_is_one_line_naming_the_entry_and_key(tmp_path, entry, where, says):
    path = write(tmp_path, "m.json", json.dumps({"models": [entry]}))
    with pytest.raises(BadInputError) as info:
        load_models_config(path)
    message = info.value.message
    assert message.startswith(f"{path}: {where}: ") and says in message and "\n" not in message


@pytest.mark.parametrize("text, says", [
    ("[]", "the top level must be an object with a 'models' list"),
    ('{"models": {}}', "'models' must be a list"),
    ('{"models": [], "budget": 3}', "unknown top-level key 'budget'"),
    ('{"models": [', "invalid JSON at line 1"),
])
def test_bad_files(tmp_path, text, says):
    with pytest.raises(BadInputError, match=says):
        load_models_config(write(tmp_path, "m.json", text))
    with pytest.raises(BadInputError, match="invalid YAML at line 3 column 1"):
        load_models_config(write(tmp_path, "m.yaml", "models:\n  - ref: [unclosed\n"))
    with pytest.raises(BadInputError, match="no such file"):
        load_models_config(tmp_path / "absent.yaml")


def test_merged_with_repeated_m_and_pin(tmp_path):
    config = [ModelSpec("fast", "org/fast", where="m.yaml: models[0] (fast)"), ModelSpec("slow", "org/slow")]
    specs = pool_specs([("extra", "org/extra")], config, ["slow"], "smollm2-135m")
    assert [(s.name, s.pin) for s in specs] == [("extra", False), ("fast", False), ("slow", True)]
    clash = r"m.yaml: models\[0\] \(fast\): name: 'fast' is already served by -m fast=org/x"
    with pytest.raises(BadInputError, match=clash):
        pool_specs([("fast", "org/x")], config, None, "smollm2-135m")
    with pytest.raises(BadInputError, match="already served by the primary model"):
        pool_specs([], [ModelSpec("smollm2-135m", "org/x", where="m.yaml: models[0]")], None, "smollm2-135m")
    with pytest.raises(BadInputError, match="--pin nope: not an extra model"):
        pool_specs([], config, ["nope"], "smollm2-135m")


def test_the_pool_gets_each_entrys_settings():
    config = EngineConfig()
    specs = [ModelSpec("a", "org/a", pin=True, keep_alive_s=0.0), ModelSpec("b", "org/b"),
             ModelSpec("c", "org/c", keep_alive_s=None)]
    pool = build_pool(specs, 1 << 30, 300.0, EngineDefaults("auto", "auto", None, config))
    assert {n: (r.pinned, r.keep_alive_s) for n, r in pool.models.items()} == \
        {"a": (True, 0.0), "b": (False, 300.0), "c": (False, None)}
    assert all(r.state == "unloaded" and r.estimate is not None for r in pool.models.values())


def test_an_entrys_engine_settings_override_the_flags_and_the_rest_keep_them():
    from mlxctl.cli.serve_models import _settings
    from mlxctl.engine.scheduler import SchedulerConfig

    flags = EngineDefaults("auto", "auto", None, EngineConfig(SchedulerConfig(prefill_chunk=256, prefill_step_ms=300)))
    _, _, own = _settings(ModelSpec("a", "org/a", max_num_seqs=4, prefill_step_ms=0), flags)
    _, _, kept = _settings(ModelSpec("b", "org/b"), flags)
    assert (own.scheduler.max_num_seqs, own.scheduler.prefill_chunk, own.scheduler.prefill_step_ms) == (4, 256, 0)
    assert (kept.scheduler.prefill_chunk, kept.scheduler.prefill_step_ms) == (256, 300)


def test_serve_refuses_a_bad_file_before_loading_anything(tmp_path):
    path = write(tmp_path, "models.yaml", "models:\n  - ref: org/a\n    keep_alive: forever\n")
    result = run_cli("serve", "--models-config", str(path), "--port", "1")
    assert result.returncode == 4
    lines = result.stderr.strip().splitlines()
    assert lines[0] == (f"mlxctl: error: {path}: models[0] (org/a): keep_alive must be a duration like "
                        "300, \"5m\" or -1, got 'forever'")
    assert "Traceback" not in result.stderr and "listening" not in result.stderr
    clash = write(tmp_path, "clash.json", json.dumps({"models": [{"name": "smollm2-135m", "ref": "org/a"}]}))
    result = run_cli("serve", "--models-config", str(clash), "--port", "1")
    assert result.returncode == 4
    assert "models[0] (smollm2-135m): name: 'smollm2-135m' is already served" in result.stderr


@pytest.mark.slow  # a long end-to-end run: the slow step
def test_mlxctl_serve_serves_what_the_file_says(smollm2, tiny_folder, tmp_path):
    import shutil

    shutil.copytree(tiny_folder, tmp_path / "tiny")
    config = write(tmp_path, "models.yaml", "models:\n"
                   "  - {name: fast, ref: ./tiny, pin: true, keep_alive: 10m, dtype: float16, max_num_seqs: 2}\n"
                   "  - {name: brief, ref: ./tiny, keep_alive: 0}\n")
    port = free_port()
    args = [sys.executable, "-m", "mlxctl", "serve", "-m", str(smollm2.path), "--served-model-name", "smollm2-135m",
            "-m", f"extra={tmp_path / 'tiny'}", "--models-config", str(config), "--port", str(port),
            "--keep-alive", "1h", "--drain-grace", "1"]
    proc = subprocess.Popen(args, cwd=REPO, env=clean_env(), stderr=subprocess.PIPE, text=True)
    try:
        url = read_url(proc)
        assert wait_until(lambda: httpx.get(f"{url}/health", timeout=5).status_code == 200, timeout=120, interval=0.25)
        models = {m["id"]: m for m in httpx.get(f"{url}/v1/models").json()["data"]}
        assert list(models) == ["smollm2-135m", "extra", "fast", "brief"]
        assert (models["fast"]["pinned"], models["fast"]["keep_alive_s"]) == (True, 600.0)
        assert (models["brief"]["pinned"], models["brief"]["keep_alive_s"]) == (False, 0.0)
        assert models["extra"]["keep_alive_s"] == 3600.0
        for name in ("fast", "extra"):
            r = httpx.post(f"{url}/v1/completions", timeout=120,
                           json={"model": name, "prompt": PROMPT, "max_tokens": 3, "temperature": 0})
            assert r.status_code == 200, r.text
        models = {m["id"]: m for m in httpx.get(f"{url}/v1/models").json()["data"]}
        # dtype float16 for "fast", the --dtype default (float32 on this CPU) for "extra"
        assert models["fast"]["weights_bytes"] * 2 == models["extra"]["weights_bytes"] > 0
        assert models["fast"]["estimated_bytes"] == models["fast"]["weights_bytes"]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
