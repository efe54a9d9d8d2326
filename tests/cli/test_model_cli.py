"""`mlxctl model inspect|acquire|list|rm` as users run them: exit codes, --json, one-line errors."""

from __future__ import annotations

import io
import json
import shutil

import pytest
import typer

from mlxctl.cli.app import app
from mlxctl.cli.context import CliState
from mlxctl.cli.entry import invoke
from mlxctl.errors import ExitStatus
from tests.cli.helpers import run_cli


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def homes(tmp_path, monkeypatch):
    """An empty store and HF cache, offline; the same settings for in-process and subprocess runs."""
    env = {
        "MLXCTL_HOME": str(tmp_path / "home"),
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_OFFLINE": "1",
        "MLXCTL_OFFLINE": "",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    return env


def mlxctl(*args: str, stdin: io.StringIO | None = None) -> tuple[int, str, str]:
    """Run the CLI in this process: (status, stdout, stderr)."""
    state = CliState(debug=False, stdin=stdin or io.StringIO(), stdout=io.StringIO(), stderr=io.StringIO())
    status = invoke(typer.main.get_command(app), list(args), state)
    return status, state.stdout.getvalue(), state.stderr.getvalue()


@pytest.fixture
def tiny_copy(tmp_path, smollm2):
    """A model folder of our own (a copy of the real SmolLM2) to acquire and remove."""
    folder = tmp_path / "smol-copy"
    shutil.copytree(smollm2.path, folder)
    return folder


def test_inspect_json_parses(homes, smollm2):
    status, out, err = mlxctl("model", "inspect", str(smollm2.path), "--json", "--context", "512")
    assert status == ExitStatus.OK, err
    report = json.loads(out)
    assert report["parameters"] == 134_515_008
    assert report["memory"]["context"] == 512
    assert isinstance(report["memory"]["fits"], bool)


def test_inspect_human_table(homes, smollm2):
    status, out, _ = mlxctl("model", "inspect", str(smollm2.path), "--batch", "2")
    assert status == ExitStatus.OK
    assert "Parameters" in out and "134.5M" in out
    assert "4-bit affine, group size 32; model.embed_tokens: 8-bit" in out
    assert "x batch 2" in out and "Fits" in out


def test_inspect_names_the_gguf_file_type_and_the_sliding_window(homes, tmp_path):
    from tests.models.test_inspect import _gemma3_header

    path = _gemma3_header(tmp_path / "gemma.gguf")
    status, out, _ = mlxctl("model", "inspect", str(path))
    assert status == ExitStatus.OK
    assert "GGUF Q4_K_M: mostly Q4_K (4-bit, blocks of 256)" in out
    assert "sliding window 512 on 15 of 18 layers" in out


def test_inspect_errors_are_one_line_with_their_status(homes, tmp_path):
    status, out, err = mlxctl("model", "inspect", "whisper-tiny-en")
    assert status == ExitStatus.NOT_FOUND and out == ""
    assert err.splitlines()[0] == "mlxctl: error: whisper-tiny-en is a catalog model that is not in the store yet"
    (tmp_path / "empty").mkdir()
    status, _, err = mlxctl("model", "inspect", str(tmp_path / "empty"))
    assert status == ExitStatus.BAD_INPUT and err.startswith("mlxctl: error: ")
    status, _, err = mlxctl("model", "inspect", str(tmp_path), "--batch", "0")
    assert status == ExitStatus.USAGE


def test_acquire_list_rm_round_trip(homes, tiny_copy):
    status, out, err = mlxctl("model", "acquire", str(tiny_copy), "--name", "mine", "--json")
    assert status == ExitStatus.OK, err
    result = json.loads(out)
    assert result["name"] == "mine" and result["fetched"] is True
    assert result["manifest"]["source_type"] == "local"

    status, out, _ = mlxctl("model", "acquire", str(tiny_copy), "--name", "mine", "-q")
    assert status == ExitStatus.OK and out.strip() == result["path"]  # quiet: the path alone

    status, out, _ = mlxctl("model", "list", "--json")
    [row] = json.loads(out)
    assert (row["name"], row["format"], row["source_type"]) == ("mine", "mlx", "local")
    status, out, _ = mlxctl("model", "list")
    assert "mine" in out and "NAME" in out
    assert mlxctl("model", "list", "-q")[1] == "mine\n"

    status, _, err = mlxctl("model", "rm", "mine")  # stdin is not a terminal
    assert status == ExitStatus.BAD_INPUT and "--yes" in err
    status, _, err = mlxctl("model", "rm", "mine", stdin=_Tty("n\n"))
    assert status == ExitStatus.OK and "Remove mine" in err
    assert json.loads(mlxctl("model", "list", "--json")[1])[0]["name"] == "mine"
    status, out, err = mlxctl("model", "rm", "mine", "--yes", "--json")
    assert status == ExitStatus.OK and json.loads(out)[0]["name"] == "mine"
    assert "removed mine" in err
    assert json.loads(mlxctl("model", "list", "--json")[1]) == []
    assert tiny_copy.is_dir()


def test_rm_unknown_removes_nothing(homes, tiny_copy):
    mlxctl("model", "acquire", str(tiny_copy), "--name", "keep")
    status, _, err = mlxctl("model", "rm", "keep", "ghost", "--yes")
    assert status == ExitStatus.NOT_FOUND and "ghost" in err
    assert json.loads(mlxctl("model", "list", "--json")[1])[0]["name"] == "keep"


def test_empty_list_says_so_on_stderr(homes):
    status, out, err = mlxctl("model", "list")
    assert status == ExitStatus.OK and out == "" and "no models" in err
    assert mlxctl("model", "list", "--json")[1].strip() == "[]"


def test_offline_hf_acquire_fails_in_one_line(homes):
    """A real process, as a user sees it: HF_HUB_OFFLINE=1 and a repo that is nowhere."""
    result = run_cli("model", "acquire", "nobody/no-such-model", "--revision", "main", env=homes)
    assert result.returncode == ExitStatus.UNAVAILABLE
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("mlxctl: error: cannot download nobody/no-such-model@main: ")
    assert "unset HF_HUB_OFFLINE" in line


def test_inspect_in_a_real_process(homes, smollm2):
    result = run_cli("model", "inspect", str(smollm2.path), "--json", env=homes)
    assert result.returncode == ExitStatus.OK, result.stderr
    assert json.loads(result.stdout)["architecture"] == "LlamaForCausalLM"
