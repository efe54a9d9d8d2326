"""Starting a job of several local ranks with mlx.launch (MLX's ring backend over loopback)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.cli.helpers import REPO, clean_env

SHARDABLE = {  # llama-shaped, every split dimension even; random weights (--load-format dummy)
    "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 4, "intermediate_size": 512,
    "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-5, "vocab_size": 49152,
    "rope_theta": 10000.0, "tie_word_embeddings": True, "max_position_embeddings": 4096,
}


def launcher() -> str:
    """The mlx.launch of this interpreter's environment."""
    beside = Path(sys.executable).with_name("mlx.launch")
    found = str(beside) if beside.exists() else shutil.which("mlx.launch")
    assert found, "mlx.launch is missing: it comes with the mlx package"
    return found


def launch_argv(ranks: int, *command: str) -> list[str]:
    """``command`` (after ``python``) as ``ranks`` local ranks; or once, plainly, for 1."""
    argv = [sys.executable, *command]
    return [launcher(), "-n", str(ranks), "--backend", "ring", "--", *argv] if ranks > 1 else argv


def launch(ranks: int, *command: str, home: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(launch_argv(ranks, *command), cwd=REPO, env=clean_env({"MLXCTL_HOME": str(home)}),
                          capture_output=True, text=True, timeout=timeout)


def dummy_model(tmp_path: Path) -> Path:
    folder = tmp_path / "shardable"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(SHARDABLE))
    return folder
