"""scripts/save_dummy.py: a saved dummy model loads as a real folder, as it was built."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import mlx.core as mx
import pytest

from mlxctl.models.dummy import dummy_config, load_dummy
from mlxctl.models.loader import load_model
from tests.models.dummy_shrink import shrunk

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "save_dummy.py"


@pytest.mark.slow  # over 5 s on CI's two cores
def test_a_quantised_preset_is_saved_quantised_and_loads_with_the_same_logits(tmp_path, smollm2, model_home):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(shrunk(dummy_config("qwen3-next-80b-a3b")[1])))
    env = dict(os.environ, MLXCTL_HOME=str(model_home))
    out = tmp_path / "saved"
    subprocess.run([sys.executable, str(SCRIPT), "--preset", str(config), "--dtype", "float32", "--out", str(out)],
                   env=env, check=True, capture_output=True)
    saved = json.loads((out / "config.json").read_text())["quantization"]
    assert saved["group_size"] == 64 and saved["bits"] == 4
    assert saved["model.layers.0.mlp.gate"] == {"group_size": 64, "bits": 8}  # as mlx_lm.convert writes it
    loaded, built = load_model(out, "native"), load_dummy(str(config), smollm2.path, "float32")
    prompt = mx.array([[1, 2, 3, 4]])
    assert mx.array_equal(loaded.model(prompt), built.model(prompt)).item()
